// libFuzzer target for the Dask task log import (src/importers/dask/): any program run under
// `grademl run` can write a dask-*.jsonl into its events folder, so the log is untrusted.
// The reader, then the importer's two passes into a model::RunBuilder with two recorded
// worker processes, as `grademl run` imports it, the flush hook taking deltas as it goes.
// Whatever the bytes: the import ends (a result, partial or not, or a one-line error),
// nothing is added when it fails, every phase's parent was handed out before it, no phase
// ends before it starts, and every edge joins two handed-out phases. Seeds:
// tests/fuzz/corpus/dask_import (the importer's fixtures and a log cut short; hostile text:
// bytes that are not UTF-8 and lone surrogate escapes in keys and names, whole and cut short).
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

  void Take(model::RunDelta delta) {
    for (const auto& p : delta.phases) {
      if (p.parent != 0 && !phases.count(p.parent)) std::abort();  // parent handed out first
      if (p.end_ns != 0 && p.end_ns < p.start_ns) std::abort();
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
  model::RunBuilder builder(model::RunInfo{});
  Checker checker;
  importers::ImportTarget target;
  target.builder = &builder;
  target.host = "node1";
  target.under = builder.BeginPhase({.parent = 0, .name = "root", .type = "run", .start_ns = 1, .host = "node1"});
  // Two recorded workers (the fixtures' pids), one ending early so that tasks get clamped.
  for (int32_t pid : {201, 202}) {
    model::PhaseId p = builder.BeginPhase({.parent = target.under,
                                           .name = "worker",
                                           .type = "process",
                                           .start_ns = 999'000'000'000,
                                           .host = "node1",
                                           .pid = pid});
    builder.EndPhase(p, pid == 201 ? 1'010'000'000'000 : 1'003'400'000'000);
  }
  target.processes = builder.PhasesWhere([](const model::Phase& p) { return p.leaf_type() == "process"; });
  checker.Take(builder.TakeDelta());
  target.flush = [&]() {
    checker.Take(builder.TakeDelta());
    return Status::Ok();
  };
  auto result = importers::ImportTraceBytes(bytes, "dask-1-0.jsonl", target);
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
