#include "importers/importer.h"

#include <functional>
#include <memory>

#include "importers/chrome_json/chrome_importer.h"
#include "importers/chrome_json/json_event_reader.h"
#include "importers/trace_input.h"

namespace grademl::importers {

namespace {

// How many uncompressed bytes the format sniffers look at.
constexpr size_t kSniffBytes = 4096;

using Opener = std::function<StatusOr<std::unique_ptr<TraceInput>>()>;

StatusOr<ImportResult> Import(const std::string& name, const Opener& open, ImportTarget& target) {
  if (target.builder == nullptr) return InvalidArgument("{}: import target has no run builder", name);
  // Sniff the format from the first uncompressed bytes.
  std::string head;
  {
    GRADEML_ASSIGN_OR_RETURN(auto input, open());
    while (head.size() < kSniffBytes) {
      auto chunk = input->Next();
      if (!chunk.ok()) {
        if (head.empty()) return chunk.status();
        break;  // damage further on: the reader reports it with its offset
      }
      if (chunk->empty()) break;
      head.append(chunk->data(), std::min(chunk->size(), kSniffBytes - head.size()));
    }
  }
  if (!chrome_json::LooksLikeChromeTrace(head)) {
    if (head.empty()) return Corrupt("{}: empty file, not a trace", name);
    return Corrupt("{}: byte 0: not a trace GradeML can import (expected Chrome trace JSON, e.g. from the "
                   "PyTorch profiler; plain, gzip or zstd)",
                   name);
  }
  GRADEML_ASSIGN_OR_RETURN(auto input, open());
  chrome_json::ChromeTraceImporter importer(name, target);
  auto header = chrome_json::ReadChromeTrace(
      *input, [&](const chrome_json::RawTraceEvent& event) { return importer.OnEvent(event); });
  if (header.ok()) return importer.Finish(*header, Status::Ok());
  return importer.Finish(chrome_json::TraceHeader{}, header.status());
}

}  // namespace

StatusOr<ImportResult> ImportTraceFile(const std::string& path, ImportTarget& target) {
  return Import(path, [&] { return TraceInput::Open(path); }, target);
}

StatusOr<ImportResult> ImportTraceBytes(std::string_view bytes, const std::string& name, ImportTarget& target) {
  return Import(name, [&] { return TraceInput::FromMemory(bytes, name); }, target);
}

}  // namespace grademl::importers
