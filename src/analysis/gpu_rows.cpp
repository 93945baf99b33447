// ExtractGpuRows: the neutral row table of the GPU analyses (gpu_breakdown.h) from a
// model::Run. One rank per imported Source (rank from its `rank` tag, ts_float from its
// `ts_float` tag, times back in the file's own clock by its `ts_offset_ns` tag); one row per phase of that source with a duration on a thread or device
// track (async slices and instants are not complete events, so HTA never sees them), with
// the phase's `cat`, `stream` and `correlation` tags. Times go back to the µs doubles HTA
// parses: ns / 1000, correctly rounded.
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <unordered_map>

#include "analysis/gpu_breakdown.h"

namespace grademl::analysis {
namespace {

// The double nearest to ns / 1000, as a correctly rounding parser reads the decimal µs.
double NsToUs(int64_t ns) {
  if (ns % 1000 == 0) return static_cast<double>(ns / 1000);  // exact while |µs| < 2^53
  char buf[48];
  const bool negative = ns < 0;
  const uint64_t abs = negative ? static_cast<uint64_t>(-(ns + 1)) + 1 : static_cast<uint64_t>(ns);
  std::snprintf(buf, sizeof buf, "%s%llu.%03llu", negative ? "-" : "", static_cast<unsigned long long>(abs / 1000),
                static_cast<unsigned long long>(abs % 1000));
  return std::strtod(buf, nullptr);
}

const std::string* FindTag(const model::Tags& tags, std::string_view key) {
  for (const auto& [k, v] : tags) {
    if (k == key) return &v;
  }
  return nullptr;
}

// HTA coerces stream and correlation to integers; anything else is -1.
int64_t IntTag(const model::Tags& tags, std::string_view key) {
  const std::string* v = FindTag(tags, key);
  if (v == nullptr || v->empty()) return -1;
  int64_t out = -1;
  auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || ptr != v->data() + v->size()) return -1;
  return out;
}

// The process phase a phase lies under (itself when it is one), or 0.
model::PhaseId ProcessPhaseOf(const model::Run& run, const model::Phase& phase) {
  for (const model::Phase* p = &phase; p != nullptr; p = p->parent != 0 ? run.FindPhase(p->parent) : nullptr) {
    if (p->leaf_is(model::kPhaseTypeProcess)) return p->id;
  }
  return 0;
}

}  // namespace

GpuRowTable ExtractGpuRows(const model::Run& run) {
  std::map<model::SourceId, GpuRankRows> by_source;
  std::unordered_map<model::SourceId, int64_t> next_index;
  // The source's ts_offset_ns tag: what the importer added to the file's timestamps. Without
  // it, the times in the run's clock are used (the same figures unless the trace is rounded
  // and the offset is not whole µs).
  std::unordered_map<model::SourceId, int64_t> offsets;
  for (const model::Phase& phase : run.phases) {
    if (phase.track == 0 || !phase.ended()) continue;
    const model::Track* track = run.FindTrack(phase.track);
    if (track == nullptr || track->source == 0 || track->kind == model::TrackKind::kAsync) continue;
    if (phase.leaf_is("instant")) continue;
    // Indices from 1: phases are not in file order, so no row is "the file's first event"
    // that HTA's index-0 fallback for unpaired kernels would look up.
    int64_t index = ++next_index[track->source];
    const std::string* cat = FindTag(phase.tags, "cat");
    if (cat == nullptr || *cat == "Trace") continue;  // HTA drops rows without cat, and cat "Trace"
    auto [it, fresh] = by_source.try_emplace(track->source);
    GpuRankRows& rows = it->second;
    if (fresh) {
      const model::Source* source = run.FindSource(track->source);
      if (source != nullptr) {
        int64_t rank = IntTag(source->tags, "rank");
        rows.rank = rank >= 0 ? rank : 0;
        const std::string* ts_float = FindTag(source->tags, "ts_float");
        rows.ts_float = ts_float != nullptr && *ts_float == "1";
        const std::string* offset = FindTag(source->tags, "ts_offset_ns");
        if (offset != nullptr) std::from_chars(offset->data(), offset->data() + offset->size(), offsets[track->source]);
      }
    }
    if (rows.phase == 0) rows.phase = ProcessPhaseOf(run, phase);
    GpuTraceRow r{.index = index, .name = phase.name, .cat = *cat};
    r.ts_us = NsToUs(phase.start_ns - offsets[track->source]);
    r.dur_us = NsToUs(phase.end_ns - phase.start_ns);
    // A runtime call is never a GPU row: CUDA's carry no stream, and ROCm's carry "0x0",
    // which HTA reads as none (the importer keeps it as the number 0).
    const bool runtime = *cat == "cuda_runtime" || *cat == "cuda_driver";
    r.stream = runtime && track->kind == model::TrackKind::kThread ? -1 : IntTag(phase.tags, "stream");
    r.correlation = IntTag(phase.tags, "correlation");
    r.tid = track->kind == model::TrackKind::kThread ? track->tid : 0;
    rows.rows.push_back(std::move(r));
  }
  // One entry per rank: a later source with the same rank replaces an earlier one, as in HTA.
  std::map<int64_t, GpuRankRows> by_rank;
  for (auto& [source, rows] : by_source) by_rank[rows.rank] = std::move(rows);
  GpuRowTable out;
  for (auto& [rank, rows] : by_rank) out.push_back(std::move(rows));
  return out;
}

GpuAnalysis AnalyzeGpu(const model::Run& run, const GpuAnalysisOptions& options) {
  return AnalyzeGpuRows(ExtractGpuRows(run), options);
}

}  // namespace grademl::analysis
