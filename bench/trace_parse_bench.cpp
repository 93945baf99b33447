// Parse speed of the streaming Chrome-trace reader (src/importers/chrome_json): for each file
// given, reads it REPEAT times with ReadChromeTrace (events delivered to a callback that only
// counts them) and prints one line: "FILE BYTES EVENTS cpu_seconds MB/s wall_seconds" (MB =
// 1e6 bytes of uncompressed JSON; the best of the repeats; MB/s per core is over the
// thread's CPU time, which other load on the machine does not inflate as it does wall time). bench/trace_parse_bench.sh runs it
// beside Python's json.load on the same (decompressed) files.
// usage: trace_parse_bench [--repeat N] FILE...
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "importers/chrome_json/json_event_reader.h"
#include "importers/trace_input.h"

int main(int argc, char** argv) {
  using namespace grademl::importers;
  int repeat = 5;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--repeat" && i + 1 < argc) {
      repeat = std::atoi(argv[++i]);
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: trace_parse_bench [--repeat N] FILE...\n");
    return 2;
  }
  for (const std::string& file : files) {
    double best = 1e30, best_wall = 1e30;
    uint64_t bytes = 0;
    int64_t events = 0;
    uint64_t check = 0;
    for (int r = 0; r < repeat; ++r) {
      auto start = std::chrono::steady_clock::now();
      timespec c0{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
      auto input = TraceInput::Open(file);
      if (!input.ok()) {
        std::fprintf(stderr, "%s\n", input.status().message().c_str());
        return 1;
      }
      int64_t n = 0;
      auto header = chrome_json::ReadChromeTrace(**input, [&](const chrome_json::RawTraceEvent& ev) {
        ++n;
        check += static_cast<uint64_t>(ev.ts_ns.value_or(0)) + ev.name.size() + ev.args.size();
        return grademl::Status::Ok();
      });
      double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      timespec c1{};
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
      double s = static_cast<double>(c1.tv_sec - c0.tv_sec) + static_cast<double>(c1.tv_nsec - c0.tv_nsec) / 1e9;
      if (wall < best_wall) best_wall = wall;
      if (!header.ok()) {
        std::fprintf(stderr, "%s\n", header.status().message().c_str());
        return 1;
      }
      bytes = header->bytes;
      events = n;
      if (s < best) best = s;
    }
    std::printf("%s %llu %lld %.4f %.1f %.4f\n", file.c_str(), static_cast<unsigned long long>(bytes),
                static_cast<long long>(events), best, static_cast<double>(bytes) / 1e6 / best, best_wall);
    if (check == 42) std::printf("\n");  // keeps the callback's work
  }
  return 0;
}
