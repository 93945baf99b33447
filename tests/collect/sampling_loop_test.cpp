// Tests of SamplingLoop: a stop is seen whatever the interval, even when a pass takes
// longer than the interval (it used to spin without ever looking at the stop request).
#include "collect/sampling_loop.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <thread>

#include <gtest/gtest.h>

namespace grademl::collect {
namespace {

using namespace std::chrono_literals;

// Stops `loop` in another thread; a loop that never stops ends the test binary (a hang
// guard with a generous limit, not a timing assertion).
void StopWithin(SamplingLoop& loop, std::chrono::seconds limit) {
  auto stopped = std::async(std::launch::async, [&] { loop.Stop(); });
  if (stopped.wait_for(limit) != std::future_status::ready) {
    std::fprintf(stderr, "SamplingLoop::Stop() did not return within %lld s\n", static_cast<long long>(limit.count()));
    std::_Exit(1);
  }
}

TEST(SamplingLoopTest, StopsWithAnIntervalOfOneNanosecond) {
  std::atomic<int> calls{0};
  SamplingLoop loop(1, {[&](TimeNs) { ++calls; }}, -1, nullptr);
  loop.Start();
  while (calls.load() < 100) std::this_thread::sleep_for(1ms);
  StopWithin(loop, 10s);
  EXPECT_GE(loop.passes(), 100);
}

TEST(SamplingLoopTest, StopsWhenAPassTakesLongerThanTheInterval) {
  std::atomic<int> calls{0};
  SamplingLoop loop(100, {[&](TimeNs) {
                      ++calls;
                      std::this_thread::sleep_for(2ms);
                    }},
                    -1, nullptr);
  loop.Start();
  while (calls.load() < 3) std::this_thread::sleep_for(1ms);
  StopWithin(loop, 10s);
  EXPECT_GE(loop.passes(), 3);
}

// Back-off on a many-process tree: the interval grows so that a pass costs at most the
// budget's share of it (a pass's cost forced: 0.5 ms at 1% -> 50 ms), never past the
// longest allowed, and comes back once the tree is small again.
TEST(SamplingLoopTest, IntervalBacksOffToKeepPassesWithinTheirBudget) {
  std::atomic<int> calls{0};
  std::atomic<bool> many{true};
  SamplingLoop loop(5 * kNsPerMs, {[&](TimeNs) { ++calls; }}, -1, nullptr);
  loop.SetBackOff(0.01, [&] { return many.load(); }, 80 * kNsPerMs);
  loop.SetTestPassCost(500 * kNsPerUs);
  loop.Start();
  while (calls.load() < 2) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(loop.current_interval(), 50 * kNsPerMs);
  many = false;
  int seen = calls.load();
  while (calls.load() < seen + 2) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(loop.current_interval(), 5 * kNsPerMs);
  EXPECT_EQ(loop.longest_interval(), 50 * kNsPerMs);
  StopWithin(loop, 10s);
}

TEST(SamplingLoopTest, BackOffStopsAtTheLongestInterval) {
  std::atomic<int> calls{0};
  SamplingLoop loop(5 * kNsPerMs, {[&](TimeNs) { ++calls; }}, -1, nullptr);
  loop.SetBackOff(0.01, [] { return true; }, 20 * kNsPerMs);
  loop.SetTestPassCost(5 * kNsPerMs);  // would want 500 ms
  loop.Start();
  while (calls.load() < 2) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(loop.current_interval(), 20 * kNsPerMs);
  StopWithin(loop, 10s);
}

}  // namespace
}  // namespace grademl::collect
