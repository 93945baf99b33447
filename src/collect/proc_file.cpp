#include "collect/proc_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

namespace grademl::collect {

ProcFile::~ProcFile() {
  if (fd_ >= 0) ::close(fd_);
}

ProcFile::ProcFile(ProcFile&& other) noexcept
    : fd_(other.fd_), path_(std::move(other.path_)), buffer_(std::move(other.buffer_)), capacity_(other.capacity_) {
  other.fd_ = -1;
  other.capacity_ = 0;
}

ProcFile& ProcFile::operator=(ProcFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    path_ = std::move(other.path_);
    buffer_ = std::move(other.buffer_);
    capacity_ = other.capacity_;
    other.fd_ = -1;
    other.capacity_ = 0;
  }
  return *this;
}

StatusOr<ProcFile> ProcFile::Open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ESRCH) return NotFound("{}: does not exist", path);
    return ErrnoError(path);
  }
  ProcFile file;
  file.fd_ = fd;
  file.path_ = path;
  file.capacity_ = 1024;
  file.buffer_ = std::make_unique<char[]>(file.capacity_);
  return file;
}

StatusOr<std::string_view> ProcFile::Read() {
  if (fd_ < 0) return FailedPrecondition("{}: not open", path_);
  size_t used = 0;
  while (true) {
    ssize_t n = ::pread(fd_, buffer_.get() + used, capacity_ - used, static_cast<off_t>(used));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == ESRCH) return NotFound("{}: process is gone", path_);
      return ErrnoError(path_);
    }
    used += static_cast<size_t>(n);
    if (n == 0 || used < capacity_) break;
    // Buffer full: grow and read the whole file again so the view is one snapshot.
    capacity_ *= 2;
    buffer_ = std::make_unique<char[]>(capacity_);
    used = 0;
  }
  return std::string_view(buffer_.get(), used);
}

StatusOr<std::string> ReadFileOnce(const std::string& path) {
  GRADEML_ASSIGN_OR_RETURN(ProcFile file, ProcFile::Open(path));
  GRADEML_ASSIGN_OR_RETURN(std::string_view text, file.Read());
  return std::string(text);
}

std::string_view FieldScanner::Next() {
  while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n')) ++pos_;
  size_t start = pos_;
  while (pos_ < text_.size() && text_[pos_] != ' ' && text_[pos_] != '\t' && text_[pos_] != '\n') ++pos_;
  return text_.substr(start, pos_ - start);
}

bool FieldScanner::NextU64(uint64_t* out) { return ParseU64(Next(), out); }

bool FieldScanner::NextI64(int64_t* out) {
  std::string_view f = Next();
  if (f.empty()) return false;
  auto [ptr, ec] = std::from_chars(f.data(), f.data() + f.size(), *out);
  return ec == std::errc() && ptr == f.data() + f.size();
}

void FieldScanner::Skip(int n) {
  for (int i = 0; i < n; ++i) Next();
}

bool ParseU64(std::string_view s, uint64_t* out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

bool FindKeyedU64(std::string_view text, std::string_view key, uint64_t* out) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view line = text.substr(pos, eol - pos);
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ':') {
      FieldScanner fields(line.substr(key.size() + 1));
      return fields.NextU64(out);
    }
    pos = eol + 1;
  }
  return false;
}

bool PidAllocationWatch::Changed() {
  if (!loadavg_.is_open()) {
    if (auto f = ProcFile::Open(path_); f.ok()) loadavg_ = std::move(*f);
  }
  if (!loadavg_.is_open()) return true;
  auto text = loadavg_.Read();
  if (!text.ok()) return true;
  std::string_view t = *text;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.remove_suffix(1);
  uint64_t last_pid = 0;
  if (!ParseU64(t.substr(t.rfind(' ') + 1), &last_pid)) return true;
  bool changed = last_pid != last_pid_;
  last_pid_ = last_pid;
  return changed;
}

}  // namespace grademl::collect
