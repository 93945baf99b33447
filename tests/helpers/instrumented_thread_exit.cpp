// A C++ program whose threads exit with phases open: one returns from its function inside
// "left open" (with "inner open" nested), one calls pthread_exit inside "exited open". The
// main thread then lives on for 1.5 s. Each thread's end (CLOCK_REALTIME, ns) goes to the
// truth file as returned_end_ns and exited_end_ns, for the tests to compare phase ends with.
// usage: instrumented_thread_exit TRUTH_FILE
#include <grademl/grademl_c.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

static long long RealtimeNs() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

static long long g_exited_end_ns = 0;

static void* ExitsInsideAPhase(void*) {
  grademl_begin_str("exited open");
  usleep(100000);
  g_exited_end_ns = RealtimeNs();
  pthread_exit(nullptr);
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  long long returned_end_ns = 0;
  std::thread returns([&] {
    grademl_begin_str("left open");
    grademl_begin_str("inner open");
    usleep(100000);
    returned_end_ns = RealtimeNs();
  });
  returns.join();
  pthread_t exits;
  if (pthread_create(&exits, nullptr, ExitsInsideAPhase, nullptr) != 0) return 1;
  pthread_join(exits, nullptr);
  usleep(1500000);
  FILE* f = std::fopen(argv[1], "w");
  if (!f) return 1;
  std::fprintf(f, "returned_end_ns=%lld\nexited_end_ns=%lld\n", returned_end_ns, g_exited_end_ns);
  std::fclose(f);
  return 0;
}
