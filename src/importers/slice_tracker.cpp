#include "importers/slice_tracker.h"

#include <algorithm>

namespace grademl::importers {

std::optional<uint32_t> SliceTracker::End() {
  if (open_.empty()) {
    stats_.Add(model::StatKey::end_without_begin);
    return std::nullopt;
  }
  uint32_t slice = open_.back();
  open_.pop_back();
  return slice;
}

std::optional<uint32_t> SliceTracker::EndAsync(uint32_t key) {
  auto it = open_async_.find(key);
  if (it == open_async_.end() || it->second.empty()) {
    it = std::find_if(open_async_.begin(), open_async_.end(), [](const auto& kv) { return !kv.second.empty(); });
  }
  if (it == open_async_.end()) {
    stats_.Add(model::StatKey::async_end_without_begin);
    return std::nullopt;
  }
  uint32_t slice = it->second.back();
  it->second.pop_back();
  return slice;
}

std::optional<uint32_t> SliceTracker::Nest(uint32_t slice, int64_t start, int64_t end) {
  while (!nest_.empty()) {
    const Nested& top = nest_.back();
    bool ended_before = top.end < start || (top.end == start && end > start);
    if (!ended_before) break;
    nest_.pop_back();
  }
  std::optional<uint32_t> parent;
  if (!nest_.empty()) {
    if (end > nest_.back().end) stats_.Add(model::StatKey::slice_ends_after_parent_kept_as_child);
    parent = nest_.back().slice;
  }
  nest_.push_back({slice, end});
  return parent;
}

int64_t SliceTracker::EndOrClose(std::optional<int64_t> end, int64_t close_at, model::StatKey closed) {
  if (end) return *end;
  stats_.Add(closed);
  return close_at;
}

void SliceTracker::KeepAsChild(int64_t child_end, int64_t parent_end, model::StatKey stat) {
  if (child_end > parent_end) stats_.Add(stat);
}

bool SliceTracker::OutsideParent(int64_t start, int64_t end, int64_t parent_start, int64_t parent_end,
                                 model::StatKey stat) {
  if (start >= parent_start && end <= parent_end) return false;
  stats_.Add(stat);
  return true;
}

}  // namespace grademl::importers
