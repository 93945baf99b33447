// A C++ program instrumented with GradeML's API: THREADS threads each run N "work" phases
// nested in one "worker" phase tagged with the thread's index. usage: instrumented_threads THREADS N
#include <grademl/grademl.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 4;
  int n = argc > 2 ? std::atoi(argv[2]) : 100;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([t, n] {
      GRADEML_PHASE("worker", "index", std::to_string(t).c_str());
      for (int i = 0; i < n; ++i) {
        GRADEML_PHASE("work");
        volatile int x = 0;
        for (int k = 0; k < 1000; ++k) x = x + k;
      }
    });
  }
  for (auto& th : pool) th.join();
  return 0;
}
