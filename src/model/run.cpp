#include "model/run.h"

#include <algorithm>

namespace grademl::model {

std::string_view ResourceKindName(ResourceKind kind) {
  switch (kind) {
    case ResourceKind::kHost: return "host";
    case ResourceKind::kCpu: return "cpu";
    case ResourceKind::kCore: return "core";
    case ResourceKind::kMemory: return "memory";
    case ResourceKind::kDisk: return "disk";
    case ResourceKind::kNet: return "net";
    case ResourceKind::kGpu: return "gpu";
    case ResourceKind::kProcess: return "process";
    case ResourceKind::kOutsideProcess: return "outside_process";
  }
  return "unknown";
}

std::optional<ResourceKind> ParseResourceKind(std::string_view name) {
  for (auto kind : {ResourceKind::kHost, ResourceKind::kCpu, ResourceKind::kCore, ResourceKind::kMemory,
                    ResourceKind::kDisk, ResourceKind::kNet, ResourceKind::kGpu, ResourceKind::kProcess,
                    ResourceKind::kOutsideProcess}) {
    if (ResourceKindName(kind) == name) return kind;
  }
  return std::nullopt;
}

std::string_view TrackKindName(TrackKind kind) {
  switch (kind) {
    case TrackKind::kThread: return "thread";
    case TrackKind::kDevice: return "device";
    case TrackKind::kAsync: return "async";
  }
  return "unknown";
}

std::optional<TrackKind> ParseTrackKind(std::string_view name) {
  for (auto kind : {TrackKind::kThread, TrackKind::kDevice, TrackKind::kAsync}) {
    if (TrackKindName(kind) == name) return kind;
  }
  return std::nullopt;
}

void Run::Index() {
  track_index_.clear();
  for (size_t i = 0; i < tracks.size(); ++i) track_index_[tracks[i].id] = i;
  phase_index_.clear();
  resource_index_.clear();
  children_.clear();
  process_resource_of_phase_.clear();
  series_of_resource_.clear();
  dense_phases_ = true;
  for (size_t i = 0; i < phases.size() && dense_phases_; ++i) {
    dense_phases_ = phases[i].id == static_cast<PhaseId>(i) + 1;
  }
  dense_count_ = dense_phases_ ? phases.size() : 0;
  if (!dense_phases_) {
    phase_index_.reserve(phases.size());
    for (size_t i = 0; i < phases.size(); ++i) phase_index_[phases[i].id] = i;
  }
  // Children in start order, ties by id. Lists already in that order (the usual case:
  // phases are stored as they began) are only checked.
  for (const Phase& p : phases) children_[p.parent].push_back(p.id);
  for (auto& [parent, kids] : children_) {
    auto before = [this](PhaseId a, PhaseId b) {
      const Phase* pa = FindPhase(a);
      const Phase* pb = FindPhase(b);
      return pa->start_ns != pb->start_ns ? pa->start_ns < pb->start_ns : a < b;
    };
    if (!std::is_sorted(kids.begin(), kids.end(), before)) std::stable_sort(kids.begin(), kids.end(), before);
  }
  for (size_t i = 0; i < resources.size(); ++i) {
    resource_index_[resources[i].id] = i;
    if (resources[i].kind == ResourceKind::kProcess && resources[i].phase != 0) {
      process_resource_of_phase_[resources[i].phase] = resources[i].id;
    }
  }
  for (size_t i = 0; i < series.size(); ++i) series_of_resource_[series[i].info.resource].push_back(i);
}

const Phase* Run::FindPhase(PhaseId id) const {
  if (dense_phases_) {
    return id >= 1 && static_cast<size_t>(id) <= dense_count_ ? &phases[static_cast<size_t>(id) - 1] : nullptr;
  }
  auto it = phase_index_.find(id);
  return it == phase_index_.end() ? nullptr : &phases[it->second];
}

const Resource* Run::FindResource(ResourceId id) const {
  auto it = resource_index_.find(id);
  return it == resource_index_.end() ? nullptr : &resources[it->second];
}

const Series* Run::FindSeries(ResourceId resource, std::string_view name) const {
  auto it = series_of_resource_.find(resource);
  if (it == series_of_resource_.end()) return nullptr;
  for (size_t i : it->second) {
    if (series[i].info.name == name) return &series[i];
  }
  return nullptr;
}

const std::vector<PhaseId>& Run::ChildrenOf(PhaseId id) const {
  static const std::vector<PhaseId> kNone;
  auto it = children_.find(id);
  return it == children_.end() ? kNone : it->second;
}

const Track* Run::FindTrack(TrackId id) const {
  auto it = track_index_.find(id);
  return it == track_index_.end() ? nullptr : &tracks[it->second];
}

const Source* Run::FindSource(SourceId id) const {
  for (const Source& s : sources) {
    if (s.id == id) return &s;
  }
  return nullptr;
}

const Host* Run::FindHost(std::string_view name) const {
  for (const Host& h : hosts) {
    if (h.name == name) return &h;
  }
  return nullptr;
}

const Phase* Run::Root() const {
  const auto& roots = ChildrenOf(0);
  return roots.empty() ? nullptr : FindPhase(roots.front());
}

const Resource* Run::ProcessResourceOf(PhaseId phase) const {
  auto it = process_resource_of_phase_.find(phase);
  return it == process_resource_of_phase_.end() ? nullptr : FindResource(it->second);
}

TimeNs Run::EffectiveEnd() const {
  if (info.end_ns != 0) return info.end_ns;
  TimeNs end = info.start_ns;
  for (const Phase& p : phases) end = std::max({end, p.start_ns, p.end_ns});
  for (const Series& s : series) {
    if (!s.samples.empty()) end = std::max(end, s.samples.back().t);
  }
  return end;
}

std::string OutsideProcessName(std::string_view user, std::string_view command) {
  if (user.empty()) return std::string(command);
  std::string out;
  out.reserve(user.size() + 1 + command.size());
  out.append(user).append(":").append(command);
  return out;
}

void SplitOutsideProcessName(std::string_view name, std::string* user, std::string* command) {
  // A user name (POSIX portable characters, or a uid) never holds ':' or a space.
  size_t colon = name.find(':');
  bool is_user = colon != std::string_view::npos && colon > 0 && colon <= 64;
  for (size_t i = 0; is_user && i < colon; ++i) {
    char c = name[i];
    is_user = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              c == '-' || c == '.' || c == '$';
  }
  if (!is_user) {
    user->clear();
    command->assign(name);
    return;
  }
  user->assign(name.substr(0, colon));
  command->assign(name.substr(colon + 1));
}

}  // namespace grademl::model
