// Runs a command as its child and writes the kernel's own account of that child, as its
// parent gets it from wait4 (every CPU-second it used, its exit included: the truth an end-
// to-end test compares a process's CPU with): pid=, cpu_seconds=, exit_status=.
// usage: wait4_truth TRUTH_FILE COMMAND [ARGS...]   (exits with the command's exit code)
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: wait4_truth TRUTH_FILE COMMAND [ARGS...]\n");
    return 2;
  }
  pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    execvp(argv[2], argv + 2);
    _exit(127);
  }
  int status = 0;
  rusage ru{};
  if (wait4(pid, &status, 0, &ru) != pid) return 2;
  double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
               static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  FILE* f = std::fopen(argv[1], "w");
  if (f == nullptr) return 2;
  std::fprintf(f, "pid=%d\ncpu_seconds=%.6f\nexit_status=%d\n", pid, cpu, status);
  std::fclose(f);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
