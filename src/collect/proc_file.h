// ProcFile: a /proc or /sys file kept open and re-read from offset 0 with pread, so a
// sampling pass costs one syscall per file instead of open+read+close.
//
// Also home to the small, allocation-free scanners the collectors parse such files with.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "core/status.h"

namespace grademl::collect {

class ProcFile {
 public:
  ProcFile() = default;
  ~ProcFile();
  ProcFile(ProcFile&& other) noexcept;
  ProcFile& operator=(ProcFile&& other) noexcept;
  ProcFile(const ProcFile&) = delete;
  ProcFile& operator=(const ProcFile&) = delete;

  // Opens path read-only. NotFound when it does not exist (e.g. the process is gone).
  static StatusOr<ProcFile> Open(const std::string& path);

  bool is_open() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

  // Reads the whole file again. The view stays valid until the next Read(). An error
  // (typically ESRCH once a process has been reaped) comes back as a Status.
  StatusOr<std::string_view> Read();

 private:
  int fd_ = -1;
  std::string path_;
  std::unique_ptr<char[]> buffer_;
  size_t capacity_ = 0;
};

// Says whether any process was created on the machine since the last call: the last field
// of /proc/loadavg is the most recently allocated pid (threads included), so when it is
// unchanged, a /proc listing would find nothing new. True on the first call and whenever
// the file cannot be read (then the caller lists /proc to be safe).
class PidAllocationWatch {
 public:
  explicit PidAllocationWatch(std::string proc_root) : path_(std::move(proc_root) + "/loadavg") {}
  bool Changed();

 private:
  std::string path_;
  ProcFile loadavg_;
  uint64_t last_pid_ = 0;
};

// Reads a whole small file once (open, read, close). For files read only at start-up.
StatusOr<std::string> ReadFileOnce(const std::string& path);

// A cursor over whitespace-separated fields of a line of text.
class FieldScanner {
 public:
  explicit FieldScanner(std::string_view text) : text_(text) {}
  // The next field, or an empty view at the end.
  std::string_view Next();
  // The next field as an unsigned integer; false when missing or not a number.
  bool NextU64(uint64_t* out);
  bool NextI64(int64_t* out);
  // Skips n fields.
  void Skip(int n);
  std::string_view rest() const { return text_.substr(pos_); }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

// Parses a decimal unsigned integer filling the whole view; false otherwise.
bool ParseU64(std::string_view s, uint64_t* out);

// Finds "key:" at the start of a line in "key:   value unit" text and parses the value.
bool FindKeyedU64(std::string_view text, std::string_view key, uint64_t* out);

}  // namespace grademl::collect
