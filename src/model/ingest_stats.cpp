#include "model/ingest_stats.h"

#include "model/run.h"
#include "model/run_builder.h"

namespace grademl::model {

std::string_view StatSeverityName(StatSeverity severity) {
  switch (severity) {
    case StatSeverity::kInfo:
      return "info";
    case StatSeverity::kDataLoss:
      return "data_loss";
    case StatSeverity::kError:
      return "error";
  }
  return "info";
}

bool ParseStatSeverity(std::string_view name, StatSeverity& out) {
  for (StatSeverity s : {StatSeverity::kInfo, StatSeverity::kDataLoss, StatSeverity::kError}) {
    if (name == StatSeverityName(s)) {
      out = s;
      return true;
    }
  }
  return false;
}

const StatInfo* FindStat(std::string_view reason) {
  for (const StatInfo& info : kStatInfos) {
    if (info.separator.empty()) {
      if (reason == info.name) return &info;
    } else if (reason.size() > info.name.size() + info.separator.size() && reason.starts_with(info.name) &&
               reason.substr(info.name.size()).starts_with(info.separator)) {
      return &info;
    }
  }
  return nullptr;
}

IngestStat StoredIngestStat(SourceId source, std::string reason, int64_t count, std::string_view severity,
                            std::string description) {
  IngestStat stat{.source = source, .reason = std::move(reason), .count = count};
  const StatInfo* info = nullptr;
  if (!ParseStatSeverity(severity, stat.severity)) {
    info = FindStat(stat.reason);
    stat.severity = info != nullptr ? info->severity : StatSeverity::kInfo;
  }
  if (description.empty()) {
    if (info == nullptr) info = FindStat(stat.reason);
    if (info != nullptr) description = std::string(info->description);
  }
  stat.description = std::move(description);
  return stat;
}

void IngestStatCounter::Add(StatKey key, int64_t n) {
  const StatInfo& info = InfoOf(key);
  auto it = counts_.find(info.name);
  if (it == counts_.end()) it = counts_.emplace(std::string(info.name), Entry{key}).first;
  it->second.count += n;
}

void IngestStatCounter::Add(StatKey key, std::string_view index, int64_t n) {
  const StatInfo& info = InfoOf(key);
  if (info.separator.empty()) return Add(key, n);
  std::string reason = std::string(info.name) + std::string(info.separator) + std::string(index);
  auto it = counts_.find(reason);
  if (it == counts_.end()) {
    // At most kMaxIndexesPerStat names from the input per stat: the others together.
    int& seen = indexes_[key];
    if (seen >= kMaxIndexesPerStat) {
      reason = std::string(info.name) + std::string(info.separator) + "other";
      it = counts_.find(reason);
    } else {
      ++seen;
    }
    if (it == counts_.end()) it = counts_.emplace(std::move(reason), Entry{key}).first;
  }
  it->second.count += n;
}

int64_t IngestStatCounter::Count(std::string_view reason) const {
  auto it = counts_.find(reason);
  return it == counts_.end() ? 0 : it->second.count;
}

std::vector<IngestStat> IngestStatCounter::AddTo(RunBuilder& builder, SourceId source) const {
  std::vector<IngestStat> out;
  out.reserve(counts_.size());
  for (const auto& [reason, entry] : counts_) {
    const StatInfo& info = InfoOf(entry.key);
    IngestStat stat{.source = source,
                    .reason = reason,
                    .count = entry.count,
                    .severity = info.severity,
                    .description = std::string(info.description)};
    builder.AddIngestStat(stat);
    out.push_back(std::move(stat));
  }
  return out;
}

IngestStatTotals TotalsOf(const std::vector<IngestStat>& stats) {
  IngestStatTotals t;
  for (const IngestStat& s : stats) {
    if (s.severity == StatSeverity::kInfo) {
      t.kept += s.count;
    } else {
      t.dropped += s.count;
      if (s.severity == StatSeverity::kError) t.errors += s.count;
    }
  }
  return t;
}

}  // namespace grademl::model
