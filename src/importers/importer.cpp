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

StatusOr<std::unique_ptr<TraceRead>> Read(const std::string& name, const Opener& open, ImportTarget& target) {
  if (target.builder == nullptr) return InvalidArgument("{}: import target has no run builder", name);
  // Sniff the format from the first uncompressed bytes.
  std::string head;
  {
    GRADEML_ASSIGN_OR_RETURN(auto input, open());
    Status damage;
    head = ReadHead(*input, kSniffBytes, &damage);
    // Damage further on is left to the reader, which reports it with its offset.
    if (head.empty() && !damage.ok()) return damage;
  }
  if (head.empty()) return Corrupt("{}: empty file, not a trace", name);
  if (!chrome_json::LooksLikeChromeTrace(head)) {
    return Corrupt("{}: byte 0: not a trace GradeML can import (expected Chrome trace JSON, e.g. from the "
                   "PyTorch profiler; plain, gzip or zstd)",
                   name);
  }
  GRADEML_ASSIGN_OR_RETURN(auto input, open());
  auto importer = std::make_unique<chrome_json::ChromeTraceImporter>(name, target);
  auto header = chrome_json::ReadChromeTrace(
      *input, [&](const chrome_json::RawTraceEvent& event) { return importer->OnEvent(event); });
  importer->EndInput(header.ok() ? *header : chrome_json::TraceHeader{}, header.status());
  return std::make_unique<TraceRead>(std::move(importer));
}

StatusOr<ImportResult> ReadAndEmit(const std::string& name, const Opener& open, ImportTarget& target) {
  GRADEML_ASSIGN_OR_RETURN(auto read, Read(name, open, target));
  return read->Emit();
}

}  // namespace

TraceRead::TraceRead(std::unique_ptr<chrome_json::ChromeTraceImporter> importer) : importer_(std::move(importer)) {}
TraceRead::~TraceRead() = default;
TimeNs TraceRead::start_ns() const { return importer_->start_ns(); }
TimeNs TraceRead::end_ns() const { return importer_->end_ns(); }
StatusOr<ImportResult> TraceRead::Emit() { return importer_->Emit(); }

StatusOr<std::unique_ptr<TraceRead>> ReadTraceFile(const std::string& path, ImportTarget& target) {
  return Read(path, [&] { return TraceInput::Open(path); }, target);
}

StatusOr<ImportResult> ImportTraceFile(const std::string& path, ImportTarget& target) {
  return ReadAndEmit(path, [&] { return TraceInput::Open(path); }, target);
}

StatusOr<ImportResult> ImportTraceBytes(std::string_view bytes, const std::string& name, ImportTarget& target) {
  return ReadAndEmit(name, [&] { return TraceInput::FromMemory(bytes, name); }, target);
}

}  // namespace grademl::importers
