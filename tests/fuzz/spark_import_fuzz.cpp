// libFuzzer target for the whole Spark event log import (src/importers/spark/): the line
// reader, simdjson on each line and the importer's records into a model::RunBuilder, as
// `grademl import` does, with the flush hook taking deltas as it goes. Whatever the bytes:
// the import ends (a result, partial or not, or a one-line error), nothing is added when it
// fails, every phase's parent was handed out before it (or is the phase imported under), no
// phase ends before it starts, every edge joins two handed-out phases, every phase's track
// was declared, and every series' samples go forward in time. Inputs that do not start like a
// Spark log are given a first line that does, so that the fuzzer works on the events. Seeds:
// tests/fuzz/corpus/spark_import (the fixture log cut into pieces, the Spark 1.x field
// names, a truncated log, a zstd one; hostile text: bytes that are not UTF-8 and lone
// surrogate escapes in names and hosts, whole, cut short and zstd).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "fuzz/fuzz_support.h"
#include "importers/importer.h"
#include "importers/spark/spark_importer.h"
#include "model/run_builder.h"

namespace {

using namespace grademl;

struct Checker {
  std::unordered_set<model::PhaseId> phases;
  std::unordered_set<model::TrackId> tracks;
  std::unordered_map<model::SeriesId, TimeNs> last_sample;

  void Take(model::RunDelta delta) {
    for (const auto& t : delta.tracks) tracks.insert(t.id);
    for (const auto& p : delta.phases) {
      if (p.parent != 0 && !phases.count(p.parent)) std::abort();  // parent handed out first
      if (p.end_ns != 0 && p.end_ns < p.start_ns) std::abort();
      if (p.track != 0 && !tracks.count(p.track)) std::abort();
      phases.insert(p.id);
    }
    for (const auto& e : delta.edges) {
      if (!phases.count(e.from) || !phases.count(e.to)) std::abort();
    }
    for (const auto& s : delta.samples) {
      auto [it, added] = last_sample.emplace(s.series, s.sample.t);
      if (!added) {
        if (s.sample.t <= it->second) std::abort();  // forward in time, one sample per time
        it->second = s.sample.t;
      }
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (!importers::spark::LooksLikeSparkEventLog(bytes.substr(0, importers::kSniffBytes))) {
    bytes = "{\"Event\":\"SparkListenerLogStart\",\"Spark Version\":\"3.5.0\"}\n" + bytes;
  }
  model::RunBuilder builder(model::RunInfo{});
  Checker checker;
  importers::ImportTarget target;
  target.builder = &builder;
  target.under = builder.BeginPhase({.parent = 0, .name = "root", .type = "run", .start_ns = 1});
  if (size % 2 == 1) {  // both clock cases: the driver's host known to the run, or not
    target.host = "localhost";
    target.hosts.push_back({.name = "driver-host", .clock_offset_ns = -5'000'000});
  }
  checker.Take(builder.TakeDelta());
  target.flush = [&]() {
    checker.Take(builder.TakeDelta());
    return Status::Ok();
  };
  auto result = importers::ImportTraceBytes(bytes, "fuzz.log", target);
  model::RunDelta last = builder.TakeDelta(true);
  if (!result.ok()) {
    fuzz::CheckOneLineError(result.status());
    if (!last.phases.empty() || !last.sources.empty()) std::abort();  // nothing added
    return 0;
  }
  if (result->partial) fuzz::CheckOneLineError(result->error);
  if (last.sources.size() != 1) std::abort();
  checker.Take(std::move(last));
  if (result->phases < 0 || result->dropped < 0 || result->events < 0) std::abort();
  return 0;
}
