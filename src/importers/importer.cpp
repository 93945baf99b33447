#include "importers/importer.h"

#include <sys/stat.h>

#include <functional>
#include <memory>
#include <string>

#include "importers/trace_input.h"

namespace grademl::importers {

namespace {

std::string ExpectedFormats() {
  std::string out;
  for (const TraceFormat& f : TraceFormats()) {
    if (!out.empty()) out += "; ";
    out += f.description;
  }
  return out;
}

// An input that ends with an error at the next chunk once `stop` says so.
class StoppableInput : public TraceInput {
 public:
  StoppableInput(std::unique_ptr<TraceInput> in, std::function<bool()> stop)
      : TraceInput(in->path()), in_(std::move(in)), stop_(std::move(stop)) {}
  StatusOr<std::span<const char>> Next() override {
    if (stop_()) {
      return Status(StatusCode::kFailedPrecondition,
                    fmt::format("{}: byte {}: stopped (grademl was asked to stop)", path_, in_->offset()));
    }
    StatusOr<std::span<const char>> chunk = in_->Next();
    offset_ = in_->offset();
    return chunk;
  }
  std::string_view compression() const override { return in_->compression(); }
  size_t part_index() const override { return in_->part_index(); }
  const std::string& part_path() const override { return in_->part_path(); }

 private:
  std::unique_ptr<TraceInput> in_;
  std::function<bool()> stop_;
};

StatusOr<std::unique_ptr<TraceRead>> Read(const std::string& name, const InputOpener& plain_open,
                                          ImportTarget& target) {
  if (target.builder == nullptr) return InvalidArgument("{}: import target has no run builder", name);
  InputOpener open = plain_open;
  if (target.stop) {
    open = [plain_open, stop = target.stop]() -> StatusOr<std::unique_ptr<TraceInput>> {
      GRADEML_ASSIGN_OR_RETURN(std::unique_ptr<TraceInput> in, plain_open());
      return std::unique_ptr<TraceInput>(new StoppableInput(std::move(in), stop));
    };
  }
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
  const TraceFormat* format = SniffTraceFormat(head);
  if (format == nullptr) {
    return Corrupt("{}: byte 0: not a trace GradeML can import (expected {}; plain, gzip or zstd)", name,
                   ExpectedFormats());
  }
  return format->read(name, open, target);
}

// A directory is read when a directory format recognises it (its files, in order).
StatusOr<std::unique_ptr<TraceRead>> ReadPath(const std::string& path, ImportTarget& target) {
  struct stat st {};
  if (!path.empty() && stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    for (const TraceFormat& f : TraceFormats()) {
      if (f.files_of_directory == nullptr) continue;
      auto listed = f.files_of_directory(path);
      if (!listed.ok()) return listed.status();
      std::vector<std::string> files = std::move(*listed);
      if (files.empty()) continue;
      InputOpener open = [files, path] { return TraceInput::OpenFiles(files, path); };
      return Read(path, open, target);
    }
    return InvalidArgument("{}: a directory, and not one GradeML can import (e.g. a Spark eventlog_v2_* directory)",
                           path);
  }
  return Read(path, [&] { return TraceInput::Open(path); }, target);
}

}  // namespace

bool IsTraceDirectory(const std::string& path) {
  struct stat st {};
  if (path.empty() || stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  for (const TraceFormat& f : TraceFormats()) {
    if (f.files_of_directory == nullptr) continue;
    auto listed = f.files_of_directory(path);
    if (!listed.ok() || !listed->empty()) return true;
  }
  return false;
}

const TraceFormat* SniffTraceFormat(std::string_view head) {
  for (const TraceFormat& f : TraceFormats()) {
    if (f.sniff(head)) return &f;
  }
  return nullptr;
}

StatusOr<std::unique_ptr<TraceRead>> ReadTraceFile(const std::string& path, ImportTarget& target) {
  return ReadPath(path, target);
}

StatusOr<ImportResult> ImportTraceFile(const std::string& path, ImportTarget& target) {
  GRADEML_ASSIGN_OR_RETURN(auto read, ReadPath(path, target));
  return read->Emit();
}

StatusOr<ImportResult> ImportTraceBytes(std::string_view bytes, const std::string& name, ImportTarget& target) {
  GRADEML_ASSIGN_OR_RETURN(auto read, Read(name, [&] { return TraceInput::FromMemory(bytes, name); }, target));
  return read->Emit();
}

}  // namespace grademl::importers
