#include "store/postgres/pg_wire.h"

#include <fmt/format.h>

namespace grademl::store::pg {
namespace {

// libpq's messages end with a newline and may span lines ("ERROR: ...\nDETAIL: ..."):
// one line, "; " between the parts.
std::string OneLine(const char* message) {
  std::string out;
  std::string_view m = message != nullptr ? message : "";
  bool pending_sep = false;
  for (char c : m) {
    if (c == '\n' || c == '\r') {
      pending_sep = !out.empty();
      continue;
    }
    if (c == '\t') c = ' ';
    if (c == ' ' && (pending_sep || out.empty() || out.back() == ' ')) continue;
    if (pending_sep) {
      out += "; ";
      pending_sep = false;
    }
    out += c;
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ';')) out.pop_back();
  return out.empty() ? "unknown error" : out;
}

// Where a valid UTF-8 sequence starting at s[i] ends, or i when none starts there.
size_t Utf8SequenceEnd(std::string_view s, size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  size_t n;
  uint32_t cp;
  if (c < 0x80) return c == 0 ? i : i + 1;
  if ((c & 0xe0) == 0xc0) {
    n = 2;
    cp = c & 0x1f;
  } else if ((c & 0xf0) == 0xe0) {
    n = 3;
    cp = c & 0x0f;
  } else if ((c & 0xf8) == 0xf0) {
    n = 4;
    cp = c & 0x07;
  } else {
    return i;
  }
  if (i + n > s.size()) return i;
  for (size_t k = 1; k < n; ++k) {
    auto d = static_cast<unsigned char>(s[i + k]);
    if ((d & 0xc0) != 0x80) return i;
    cp = cp << 6 | (d & 0x3f);
  }
  // Overlong forms, surrogates and code points past U+10FFFF are invalid.
  if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
      (cp >= 0xd800 && cp <= 0xdfff)) {
    return i;
  }
  return i + n;
}

// libpq's message on `conn` without the connection's password or $PGPASSWORD, should a
// message ever quote one.
std::string Redacted(PGconn* conn, const std::string& message) {
  const char* password = conn != nullptr ? PQpass(conn) : nullptr;
  if (password == nullptr || password[0] == '\0') return RedactMessage(message, "");
  return RedactMessage(message, "", {password});
}

}  // namespace

Status ConnectionError(PGconn* conn, const std::string& path) {
  return Unavailable("{}: {}", path, Redacted(conn, OneLine(conn != nullptr ? PQerrorMessage(conn) : "out of memory")));
}

Status ConnectionError(PGconn* conn, const std::string& path, std::string_view location) {
  Status st = ConnectionError(conn, path);
  return Status(st.code(), RedactMessage(st.message(), location));
}

Status ResultError(PGconn* conn, const PGresult* result, const std::string& path) {
  if (PQstatus(conn) != CONNECTION_OK) return ConnectionError(conn, path);
  const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  std::string message =
      Redacted(conn, OneLine(result != nullptr ? PQresultErrorMessage(result) : PQerrorMessage(conn)));
  std::string_view sqlstate = state != nullptr ? state : "";
  // Class 08: connection exceptions; 57P0x: the server shutting down; 40001/40P01:
  // serialization failures and deadlocks (retrying is the answer).
  // 55P03: a lock not had within lock_timeout; 57014: a statement cancelled (SetLockWait).
  if (sqlstate.starts_with("08") || sqlstate.starts_with("57P0") || sqlstate == "40001" || sqlstate == "40P01" ||
      sqlstate == "55P03" || sqlstate == "57014") {
    return Unavailable("{}: {}", path, message);
  }
  if (sqlstate == "42501" || sqlstate == "25006") return FailedPrecondition("{}: {}", path, message);
  return Internal("{}: {}", path, message);
}

Status Exec(PGconn* conn, const std::string& path, const std::string& sql) {
  Result r(PQexec(conn, sql.c_str()));
  ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return Status::Ok();
  return ResultError(conn, r.get(), path);
}

StatusOr<Result> ExecParams(PGconn* conn, const std::string& path, const std::string& sql,
                            const std::vector<const char*>& params, bool binary_results) {
  Result r(PQexecParams(conn, sql.c_str(), static_cast<int>(params.size()), nullptr, params.data(), nullptr, nullptr,
                        binary_results ? 1 : 0));
  ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return r;
  return ResultError(conn, r.get(), path);
}

std::string_view ServerText(std::string_view text, bool utf8, std::string& scratch) {
  size_t i = 0;
  if (utf8) {
    while (i < text.size()) {
      size_t next = Utf8SequenceEnd(text, i);
      if (next == i) break;
      i = next;
    }
  } else {
    i = text.find('\0');
    if (i == std::string_view::npos) i = text.size();
  }
  if (i == text.size()) return text;
  scratch.assign(text.substr(0, i));
  while (i < text.size()) {
    size_t next = utf8 ? Utf8SequenceEnd(text, i) : (text[i] == '\0' ? i : i + 1);
    if (next == i) {
      scratch += utf8 ? "\xef\xbf\xbd" : "?";
      ++i;
    } else {
      scratch.append(text.substr(i, next - i));
      i = next;
    }
  }
  return scratch;
}

Status CopyIn(PGconn* conn, const std::string& path, const std::string& copy_sql, const std::string& stream) {
  Result start(PQexec(conn, copy_sql.c_str()));
  if (!start || PQresultStatus(start.get()) != PGRES_COPY_IN) return ResultError(conn, start.get(), path);
  constexpr size_t kChunk = size_t{1} << 20;
  for (size_t off = 0; off < stream.size(); off += kChunk) {
    size_t n = std::min(kChunk, stream.size() - off);
    if (PQputCopyData(conn, stream.data() + off, static_cast<int>(n)) != 1) {
      (void)PQputCopyEnd(conn, "grademl: send failed");
      return ConnectionError(conn, path);
    }
  }
  if (PQputCopyEnd(conn, nullptr) != 1) return ConnectionError(conn, path);
  Status st = Status::Ok();
  // Every result of the COPY must be read before the connection takes another command.
  while (PGresult* raw = PQgetResult(conn)) {
    Result r(raw);
    if (PQresultStatus(raw) != PGRES_COMMAND_OK && st.ok()) st = ResultError(conn, raw, path);
  }
  return st;
}

}  // namespace grademl::store::pg
