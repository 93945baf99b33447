// Test-only loader of Kineto/Chrome trace files (gzip) into the GPU analyses' row table, by
// HTA's own loading rules: one row per traceEvents element with dur and cat (cat != "Trace"),
// index = its position, args.stream / args.correlation as integers (-1 when absent or not
// numeric), ts_float when any ts is a JSON float or missing, the rank from distributedInfo.
// Used by the HTA parity tests and by the end-to-end check that the importer and the
// extractor give the same rows' figures.
#pragma once

#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "analysis/gpu_breakdown.h"

namespace grademl::testing {

inline std::string ReadGzip(const std::filesystem::path& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return {};
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  gzclose(f);
  return out;
}

// pd.to_numeric-like: an integer, or a string holding one; anything else is -1.
inline int64_t IntArg(const nlohmann::json& args, const char* key) {
  auto it = args.find(key);
  if (it == args.end()) return -1;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (it->is_number_float()) return static_cast<int64_t>(it->get<double>());
  if (it->is_string()) {
    const std::string& s = it->get_ref<const std::string&>();
    char* end = nullptr;
    long long v = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end != nullptr && *end == '\0') return v;
  }
  return -1;
}

// One trace file as HTA's dataframe: the rank from distributedInfo.
inline analysis::GpuRankRows LoadTrace(const std::filesystem::path& path) {
  nlohmann::json doc = nlohmann::json::parse(ReadGzip(path));
  analysis::GpuRankRows out;
  if (doc.is_object() && doc.contains("distributedInfo")) out.rank = doc["distributedInfo"].value("rank", 0);
  const auto& events = doc.is_array() ? doc : doc["traceEvents"];  // an object, or a bare array
  int64_t index = 0;
  for (const auto& e : events) {
    int64_t i = index++;
    if (!e.contains("ts") || e["ts"].is_number_float()) out.ts_float = true;
    if (!e.contains("dur") || !e.contains("cat")) continue;
    const std::string cat = e["cat"].is_string() ? e["cat"].get<std::string>() : e["cat"].dump();
    if (cat == "Trace") continue;
    analysis::GpuTraceRow r{.index = i, .name = e.value("name", std::string()), .cat = cat};
    r.ts_us = e.contains("ts") ? e["ts"].get<double>() : 0;
    r.dur_us = e["dur"].get<double>();
    if (e.contains("args")) {
      r.stream = IntArg(e["args"], "stream");
      r.correlation = IntArg(e["args"], "correlation");
    }
    if (e.contains("tid") && e["tid"].is_number_integer()) r.tid = e["tid"].get<int64_t>();
    out.rows.push_back(std::move(r));
  }
  return out;
}

}  // namespace grademl::testing
