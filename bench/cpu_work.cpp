// A fixed amount of CPU work (not a fixed time), so that its makespan shows any slowdown:
// THREADS threads each run ITERATIONS rounds of an LCG. usage: cpu_work ITERATIONS [THREADS]
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  unsigned long long iterations = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000000000ULL;
  int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  std::vector<std::thread> pool;
  std::vector<unsigned long long> results(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      unsigned long long x = static_cast<unsigned long long>(t) + 1;
      for (unsigned long long i = 0; i < iterations; ++i) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
      results[static_cast<size_t>(t)] = x;
    });
  }
  for (auto& th : pool) th.join();
  unsigned long long sum = 0;
  for (auto r : results) sum ^= r;
  return static_cast<int>(sum & 1) * 0;
}
