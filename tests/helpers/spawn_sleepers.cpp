// A process tree for the monitor benchmark: forks N children that each sleep for S seconds,
// then waits for them. usage: spawn_sleepers N SECONDS
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 200;
  unsigned seconds = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 10;
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      sleep(seconds);
      _exit(0);
    }
  }
  while (wait(nullptr) > 0) {
  }
  return 0;
}
