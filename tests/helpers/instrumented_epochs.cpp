// An instrumented program that records N "epoch" phases through libgrademl (as Python's
// auto-instrumentation does for a training loop) and prints "epoch I" at the start of each,
// so that the built-in log rule would find the same epochs. usage: instrumented_epochs N
#include <grademl/grademl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  int epochs = argc > 1 ? std::atoi(argv[1]) : 3;
  for (int e = 1; e <= epochs; ++e) {
    std::printf("epoch %d\n", e);
    std::fflush(stdout);
    grademl::BeginTyped("epoch", "epoch");
    usleep(100000);
    grademl::End();
  }
  return 0;
}
