// libFuzzer target for the whole Chrome/Kineto import (src/importers/importer.h): the reader,
// then the importer's sorter and trackers into a model::RunBuilder, as `grademl import`
// does, with the flush hook taking deltas as it goes. Whatever the bytes: the import ends
// (a result, partial or not, or a one-line error), nothing is added when it fails, every
// phase's parent was handed out before it (or is the phase imported under), no phase ends
// before it starts, every edge joins two handed-out phases, and every phase's track was
// declared. Seeds: tests/fuzz/corpus/chrome_import (the importer's fixtures, a truncated one
// and a gzip one; hostile text: bytes that are not UTF-8 and lone surrogate escapes in names,
// args keys, ids and header values, whole, cut short and gzipped).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <unordered_set>

#include "fuzz/fuzz_support.h"
#include "importers/importer.h"
#include "model/run_builder.h"

namespace {

using namespace grademl;

struct Checker {
  std::unordered_set<model::PhaseId> phases;
  std::unordered_set<model::TrackId> tracks;

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
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The low bits of the size pick a clock mode, so that all of them are reached.
  model::RunBuilder builder(model::RunInfo{});
  Checker checker;
  importers::ImportTarget target;
  target.builder = &builder;
  target.under = builder.BeginPhase({.parent = 0, .name = "root", .type = "run", .start_ns = 1});
  if (size % 3 == 1) target.anchor_ns = 1'600'000'000'000'000'000;
  if (size % 3 == 2) target.align_start_ns = 1'600'000'000'000'000'000;
  checker.Take(builder.TakeDelta());
  target.flush = [&]() {
    checker.Take(builder.TakeDelta());
    return Status::Ok();
  };
  auto result = importers::ImportTraceBytes(bytes, "fuzz.json", target);
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
