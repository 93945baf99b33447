// The one place where importers turn begin/end events and complete slices into nested phases
// (modelled on Perfetto's SliceTracker): begin/end pairs per track and per async key, complete
// slices nested by time on a track, begins never ended closed at the trace's end, children
// that overrun their parent kept as children, and, for engine logs whose phases have explicit
// parents (Spark, Dask), a slice that never ended closed at the log's end and a child kept
// within (or beside) its parent. Each outcome that is not the plain case is counted as an
// ingest stat of model/ingest_stats.h's list in the importer's counter.
//
// It holds no events: the importer keeps its records and passes their indexes (uint32_t), so
// the tracker costs a few words per open slice. Times are the importer's (any unit, any
// origin), compared only with each other.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/ingest_stats.h"

namespace grademl::importers {

class SliceTracker {
 public:
  explicit SliceTracker(model::IngestStatCounter& stats) : stats_(stats) {}

  // ---- Begin/end pairs on one track, fed in time order; Reset() before the next track. ----

  // Opens `slice` on the track (B).
  void Begin(uint32_t slice) { open_.push_back(slice); }
  // Opens `slice` under an async key (b: Chrome pairs an async end with its begin by name).
  void BeginAsync(uint32_t key, uint32_t slice) { open_async_[key].push_back(slice); }
  // Closes the latest open begin of the track (E) and returns it; none open: counted as
  // end_without_begin.
  std::optional<uint32_t> End();
  // Closes the latest open begin of `key` (e), or, when the key has none, the latest of some
  // other key with one (an end that names no begin); none open: async_end_without_begin.
  std::optional<uint32_t> EndAsync(uint32_t key);
  // The begins never ended (a truncated trace), each counted as
  // begin_without_end_closed_at_trace_end and handed to `close` (which ends it at the trace's
  // end): the track's first, then each async key's.
  template <typename Close>
  void CloseOpen(Close&& close) {
    auto close_all = [&](std::vector<uint32_t>& stack) {
      for (uint32_t slice : stack) {
        stats_.Add(model::StatKey::begin_without_end_closed_at_trace_end);
        close(slice);
      }
      stack.clear();
    };
    close_all(open_);
    for (auto& [key, stack] : open_async_) close_all(stack);
  }
  // Forgets what is open (call CloseOpen first to keep it).
  void Reset() {
    open_.clear();
    open_async_.clear();
  }

  // ---- Complete slices nested by time on one track; ResetNesting() before the next. ----

  // `slice` [start, end], fed in order of start (at equal starts, the longer first): returns
  // the enclosing slice among those fed before (the innermost still open at `start`), or
  // nullopt at the top level. A slice that ended before `start` (or at it, when this one is
  // not empty) is closed. A slice that starts inside another but ends after it stays its
  // child, counted as slice_ends_after_parent_kept_as_child.
  std::optional<uint32_t> Nest(uint32_t slice, int64_t start, int64_t end);
  void ResetNesting() { nest_.clear(); }
  // How deep the slice Nest() was last given lies: 1 at the top level.
  size_t depth() const { return nest_.size(); }

  // ---- Engine logs: phases with explicit parents. ----

  // The end of a slice: its own when it has one, else `close_at` (the log's end, or its
  // parent's), counted as `closed` (an info stat: "..._closed_at_log_end").
  int64_t EndOrClose(std::optional<int64_t> end, int64_t close_at, model::StatKey closed);
  // A child ending after its parent stays its child, counted as `stat` (an info stat).
  void KeepAsChild(int64_t child_end, int64_t parent_end, model::StatKey stat);
  // Whether [start, end] lies outside its parent's [parent_start, parent_end]; if so it is
  // counted as `stat` (the importer then clamps it into the parent).
  bool OutsideParent(int64_t start, int64_t end, int64_t parent_start, int64_t parent_end, model::StatKey stat);

 private:
  struct Nested {
    uint32_t slice;
    int64_t end;
  };
  model::IngestStatCounter& stats_;
  std::vector<uint32_t> open_;
  std::unordered_map<uint32_t, std::vector<uint32_t>> open_async_;
  std::vector<Nested> nest_;
};

}  // namespace grademl::importers
