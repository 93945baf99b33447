// An instrumented program that pauses between two series of phases, so that a test can
// tamper with its event memory meanwhile. usage: instrumented_pause BEFORE AFTER [MARKER GO]
// Writes BEFORE "before" phases, then (with MARKER) writes its pid to MARKER and waits (up
// to 60 s) for the file GO, then writes AFTER "after" phases, prints "workload done" and
// exits with 3.
#include <grademl/grademl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  int before = argc > 1 ? std::atoi(argv[1]) : 1000;
  int after = argc > 2 ? std::atoi(argv[2]) : 1000;
  for (int i = 0; i < before; ++i) {
    GRADEML_PHASE("before");
  }
  if (argc > 4) {
    std::string tmp = std::string(argv[3]) + ".tmp";
    if (FILE* f = std::fopen(tmp.c_str(), "w")) {
      std::fprintf(f, "%d\n", int(getpid()));
      std::fclose(f);
      std::rename(tmp.c_str(), argv[3]);
    }
    for (int i = 0; i < 6000 && access(argv[4], F_OK) != 0; ++i) usleep(10000);
  }
  for (int i = 0; i < after; ++i) {
    GRADEML_PHASE("after");
  }
  std::printf("workload done\n");
  return 3;
}
