// The PostgreSQL backend's thin layer over libpq: one-line Statuses from results and
// connections, the binary COPY format (PGCOPY) built in one buffer, binary result fields
// read without copies, and text made acceptable to the server's encoding.
#pragma once

#include "store/postgres/libpq.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "store/postgres/pg_redact.h"

namespace grademl::store::pg {

// Frees a PGresult at scope exit.
struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

// The last error on `conn` as one line ("PATH: message; detail"). Connection failures are
// kUnavailable (a server down, a cut network: an uploader retries), the rest kInternal or
// kFailedPrecondition (a permission refused, a schema a newer grademl wrote).
// Neither quotes the connection's password nor $PGPASSWORD (RedactMessage); the first with
// a location also hides what libpq quotes of a malformed `location`.
Status ConnectionError(PGconn* conn, const std::string& path);
Status ConnectionError(PGconn* conn, const std::string& path, std::string_view location);
Status ResultError(PGconn* conn, const PGresult* result, const std::string& path);

// Runs SQL that returns no rows the caller needs (several statements are allowed).
Status Exec(PGconn* conn, const std::string& path, const std::string& sql);
// Runs one statement with text parameters (nullptr for NULL); results in binary when asked.
StatusOr<Result> ExecParams(PGconn* conn, const std::string& path, const std::string& sql,
                            const std::vector<const char*>& params, bool binary_results = false);

// `text` as the server accepts it: PostgreSQL text holds no NUL byte and, in a UTF8
// database, only valid UTF-8; each offending byte becomes U+FFFD (or '?' where the server's
// encoding is not UTF8). Most text passes unchanged, without a copy into `scratch`.
std::string_view ServerText(std::string_view text, bool utf8, std::string& scratch);

// Builds a binary COPY stream: the header, then rows of fields, then the trailer.
class CopyBuffer {
 public:
  explicit CopyBuffer(bool utf8) : utf8_(utf8) { Start(); }
  void Row(int16_t fields) { Put16(fields); ++rows_; }
  void Null() { Put32(-1); }
  void Int8(int64_t v) {
    Put32(8);
    Put64(static_cast<uint64_t>(v));
  }
  // 0 as NULL: the model's "none" for ids, pids and end times.
  void Int8OrNull(int64_t v) {
    if (v == 0) {
      Null();
    } else {
      Int8(v);
    }
  }
  void Int4(int32_t v) {
    Put32(4);
    Put32(v);
  }
  void Int2(int16_t v) {
    Put32(2);
    Put16(v);
  }
  // NaN goes as NULL, as in the SQLite backend.
  void Float8(double v) {
    if (v != v) return Null();
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    Put32(8);
    Put64(bits);
  }
  void Bool(bool v) {
    Put32(1);
    buf_.push_back(v ? 1 : 0);
  }
  void Text(std::string_view text) {
    std::string_view t = ServerText(text, utf8_, scratch_);
    Put32(static_cast<int32_t>(t.size()));
    buf_.append(t.data(), t.size());
  }
  // A whole samples row (run_id, series_id, t_ns, value) in one append: the hot path.
  void SampleRow(int64_t run, int64_t series, int64_t t, double v) {
    char b[2 + 3 * 12 + 12];
    char* p = b;
    auto put16 = [&](uint16_t x) {
      *p++ = static_cast<char>(x >> 8);
      *p++ = static_cast<char>(x);
    };
    auto put32 = [&](uint32_t x) {
      for (int i = 3; i >= 0; --i) *p++ = static_cast<char>(x >> (8 * i));
    };
    auto put64 = [&](uint64_t x) {
      x = __builtin_bswap64(x);
      std::memcpy(p, &x, 8);
      p += 8;
    };
    put16(4);
    for (int64_t x : {run, series, t}) {
      put32(8);
      put64(static_cast<uint64_t>(x));
    }
    if (v != v) {
      put32(0xffffffffu);
    } else {
      uint64_t bits;
      std::memcpy(&bits, &v, 8);
      put32(8);
      put64(bits);
    }
    buf_.append(b, static_cast<size_t>(p - b));
    ++rows_;
  }
  void Reserve(size_t bytes) { buf_.reserve(bytes); }

  // The stream with its trailer; the buffer is then empty again.
  std::string Finish() {
    Put16(-1);
    std::string out = std::move(buf_);
    Start();
    return out;
  }
  size_t rows() const { return rows_; }

 private:
  void Start() {
    static constexpr char kHeader[] = "PGCOPY\n\377\r\n\0\0\0\0\0\0\0\0\0";  // signature, flags, extension
    buf_.assign(kHeader, 19);
    rows_ = 0;
  }
  void Put16(int16_t v) {
    uint16_t u = static_cast<uint16_t>(v);
    char b[2] = {static_cast<char>(u >> 8), static_cast<char>(u)};
    buf_.append(b, 2);
  }
  void Put32(int32_t v) {
    uint32_t u = static_cast<uint32_t>(v);
    char b[4] = {static_cast<char>(u >> 24), static_cast<char>(u >> 16), static_cast<char>(u >> 8), static_cast<char>(u)};
    buf_.append(b, 4);
  }
  void Put64(uint64_t u) {
    char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(u >> (56 - 8 * i));
    buf_.append(b, 8);
  }

  bool utf8_;
  std::string buf_;
  std::string scratch_;
  size_t rows_ = 0;
};

// Sends a finished CopyBuffer stream with `copy_sql` ("COPY t (a, b) FROM STDIN (FORMAT binary)").
Status CopyIn(PGconn* conn, const std::string& path, const std::string& copy_sql, const std::string& stream);

// Binary result fields (network byte order).
inline int64_t GetInt8(const PGresult* r, int row, int col) {
  const auto* p = reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, col));
  uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u = u << 8 | p[i];
  return static_cast<int64_t>(u);
}
inline double GetFloat8(const PGresult* r, int row, int col) {
  uint64_t u = static_cast<uint64_t>(GetInt8(r, row, col));
  double v;
  std::memcpy(&v, &u, 8);
  return v;
}
inline std::string_view GetText(const PGresult* r, int row, int col) {
  return std::string_view(PQgetvalue(r, row, col), static_cast<size_t>(PQgetlength(r, row, col)));
}
inline bool IsNull(const PGresult* r, int row, int col) { return PQgetisnull(r, row, col) != 0; }

}  // namespace grademl::store::pg
