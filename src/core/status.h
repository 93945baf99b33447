// Status and StatusOr<T>: how recoverable errors travel in GradeML.
//
// A Status is OK or carries a code and a one-line message meant for the user ("db.sqlite:
// not a GradeML database"). Invariants are not Statuses: they are GRADEML_CHECKs.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <variant>

namespace grademl {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // a wrong flag or value given by the user
  kNotFound,         // a file, run or phase that does not exist
  kIoError,          // the OS refused a read or write
  kCorrupt,          // a file exists but its contents cannot be trusted
  kFailedPrecondition,
  kUnavailable,      // an optional facility (GPU driver, ...) is not present
  kInternal,
};

const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "message" for errors, "OK" otherwise.
  std::string ToString() const { return ok() ? "OK" : message_; }

  // Returns a copy whose message is "prefix: message".
  Status WithPrefix(const std::string& prefix) const {
    return ok() ? *this : Status(code_, prefix + ": " + message_);
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename... Args>
Status MakeError(StatusCode code, fmt::format_string<Args...> format, Args&&... args) {
  return Status(code, fmt::format(format, std::forward<Args>(args)...));
}
template <typename... Args>
Status InvalidArgument(fmt::format_string<Args...> f, Args&&... a) {
  return MakeError(StatusCode::kInvalidArgument, f, std::forward<Args>(a)...);
}
template <typename... Args>
Status NotFound(fmt::format_string<Args...> f, Args&&... a) {
  return MakeError(StatusCode::kNotFound, f, std::forward<Args>(a)...);
}
template <typename... Args>
Status IoError(fmt::format_string<Args...> f, Args&&... a) {
  return MakeError(StatusCode::kIoError, f, std::forward<Args>(a)...);
}
template <typename... Args>
Status Corrupt(fmt::format_string<Args...> f, Args&&... a) {
  return MakeError(StatusCode::kCorrupt, f, std::forward<Args>(a)...);
}
template <typename... Args>
Status FailedPrecondition(fmt::format_string<Args...> f, Args&&... a) {
  return MakeError(StatusCode::kFailedPrecondition, f, std::forward<Args>(a)...);
}
template <typename... Args>
Status Unavailable(fmt::format_string<Args...> f, Args&&... a) {
  return MakeError(StatusCode::kUnavailable, f, std::forward<Args>(a)...);
}
template <typename... Args>
Status Internal(fmt::format_string<Args...> f, Args&&... a) {
  return MakeError(StatusCode::kInternal, f, std::forward<Args>(a)...);
}

// An IoError "what: strerror(errno)" for the current errno.
Status ErrnoError(const std::string& what);

[[noreturn]] void CheckFailed(const char* file, int line, const char* expr, const std::string& msg);

// StatusOr<T> holds either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(Status status) : value_(std::move(status)) {  // NOLINT: implicit by design
    if (std::get<Status>(value_).ok()) CheckFailed(__FILE__, __LINE__, "!ok", "StatusOr from OK Status");
  }
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design

  bool ok() const { return std::holds_alternative<T>(value_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(value_); }

  T& value() & { Check(); return std::get<T>(value_); }
  const T& value() const& { Check(); return std::get<T>(value_); }
  T&& value() && { Check(); return std::get<T>(std::move(value_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void Check() const {
    if (!ok()) CheckFailed(__FILE__, __LINE__, "ok()", "value() of an error: " + std::get<Status>(value_).message());
  }
  std::variant<Status, T> value_;
};

}  // namespace grademl

#define GRADEML_CONCAT_INNER(a, b) a##b
#define GRADEML_CONCAT(a, b) GRADEML_CONCAT_INNER(a, b)

#define GRADEML_RETURN_IF_ERROR(expr)          \
  do {                                         \
    ::grademl::Status _st = (expr);            \
    if (!_st.ok()) return _st;                 \
  } while (0)

#define GRADEML_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(tmp).value()

#define GRADEML_ASSIGN_OR_RETURN(lhs, expr) \
  GRADEML_ASSIGN_OR_RETURN_IMPL(GRADEML_CONCAT(_status_or_, __LINE__), lhs, expr)

// Invariant checks: always on, abort with file:line. Never for bad input.
#define GRADEML_CHECK(cond)                                                   \
  do {                                                                        \
    if (!(cond)) ::grademl::CheckFailed(__FILE__, __LINE__, #cond, "");       \
  } while (0)
#define GRADEML_CHECK_MSG(cond, msg)                                          \
  do {                                                                        \
    if (!(cond)) ::grademl::CheckFailed(__FILE__, __LINE__, #cond, (msg));    \
  } while (0)
