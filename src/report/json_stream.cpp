#include "report/json_stream.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/text.h"

namespace grademl::report {
namespace {

constexpr size_t kChunk = size_t{1} << 20;

// "\n" and the spaces of an indentation, whatever its depth (longer ones are built from it).
constexpr std::string_view kNewlineSpaces =
    "\n                                                                                "
    "                                                                                ";

// The bytes a JSON string cannot hold as they are (nlohmann escapes exactly these).
struct EscapeTable {
  bool needs[256] = {};
  constexpr EscapeTable() {
    for (int c = 0; c < 0x20; ++c) needs[c] = true;
    needs[static_cast<unsigned char>('"')] = true;
    needs[static_cast<unsigned char>('\\')] = true;
  }
};
constexpr EscapeTable kEscape;

// Whether none of 8 bytes needs escaping: no byte below 0x20, no '"', no '\\' (the classic
// "has a byte less than n" and "has a zero byte" word tricks; exact for "any").
inline bool EightClean(const char* p) {
  uint64_t x;
  std::memcpy(&x, p, sizeof x);
  constexpr uint64_t kOnes = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
  uint64_t below_space = (x - kOnes * 0x20) & ~x & kHigh;
  uint64_t q = x ^ (kOnes * '"');
  uint64_t quote = (q - kOnes) & ~q & kHigh;
  uint64_t b = x ^ (kOnes * '\\');
  uint64_t backslash = (b - kOnes) & ~b & kHigh;
  return (below_space | quote | backslash) == 0;
}

}  // namespace

JsonStream::JsonStream(std::function<void(std::string_view)> sink, int indent) : sink_(std::move(sink)), indent_(indent) {
  buf_.reserve(kChunk + 4096);
}

JsonStream::~JsonStream() { Flush(); }

void JsonStream::Flush() {
  if (!buf_.empty()) {
    sink_(buf_);
    buf_.clear();
  }
}

void JsonStream::MaybeFlush() {
  if (buf_.size() >= kChunk) Flush();
}

void JsonStream::NewlineIndent(size_t depth) {
  size_t n = depth * static_cast<size_t>(indent_) + 1;
  if (n <= kNewlineSpaces.size()) {
    buf_.append(kNewlineSpaces.data(), n);
  } else {
    buf_.push_back('\n');
    buf_.append(n - 1, ' ');
  }
}

void JsonStream::BeforeValue() {
  MaybeFlush();
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (levels_.empty()) return;
  Level& l = levels_.back();
  if (!l.empty) buf_.push_back(',');
  l.empty = false;
  NewlineIndent(levels_.size());
}

void JsonStream::Key(std::string_view key) {
  Level& l = levels_.back();
  if (!l.empty) buf_.push_back(',');
  l.empty = false;
  NewlineIndent(levels_.size());
  Escaped(key);
  buf_.append(": ", 2);
  after_key_ = true;
}

void JsonStream::BeginObject() {
  BeforeValue();
  buf_.push_back('{');
  levels_.push_back({.object = true, .empty = true});
}

void JsonStream::BeginArray() {
  BeforeValue();
  buf_.push_back('[');
  levels_.push_back({.object = false, .empty = true});
}

void JsonStream::EndObject() {
  bool empty = levels_.back().empty;
  levels_.pop_back();
  if (!empty) NewlineIndent(levels_.size());
  buf_.push_back('}');
  MaybeFlush();
}

void JsonStream::EndArray() {
  bool empty = levels_.back().empty;
  levels_.pop_back();
  if (!empty) NewlineIndent(levels_.size());
  buf_.push_back(']');
  MaybeFlush();
}

void JsonStream::Null() {
  BeforeValue();
  buf_.append("null", 4);
}

void JsonStream::Bool(bool v) {
  BeforeValue();
  if (v) {
    buf_.append("true", 4);
  } else {
    buf_.append("false", 5);
  }
}

void JsonStream::Int(int64_t v) {
  BeforeValue();
  char tmp[24];
  auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
  buf_.append(tmp, r.ptr);
}

void JsonStream::UInt(uint64_t v) {
  BeforeValue();
  char tmp[24];
  auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
  buf_.append(tmp, r.ptr);
}

void JsonStream::Double(double v) {
  BeforeValue();
  if (!std::isfinite(v)) {
    buf_.append("null", 4);
    return;
  }
  if (v == 0) {
    if (std::signbit(v)) {
      buf_.append("-0.0", 4);
    } else {
      buf_.append("0.0", 3);
    }
    return;
  }
  char tmp[64];
  char* end = nlohmann::detail::to_chars(tmp, tmp + sizeof tmp, v);
  buf_.append(tmp, end);
}

void JsonStream::String(std::string_view s) {
  BeforeValue();
  Escaped(s);
}

void JsonStream::Text(std::string_view text) {
  if (IsValidUtf8(text)) {
    String(text);
  } else {
    String(ValidUtf8(text));
  }
}

void JsonStream::Escaped(std::string_view s) {
  buf_.push_back('"');
  size_t plain = 0;  // start of the run of bytes written as they are
  size_t i = 0;
  while (i + 8 <= s.size() && EightClean(s.data() + i)) i += 8;
  for (; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (!kEscape.needs[c]) continue;
    buf_.append(s.data() + plain, i - plain);
    plain = i + 1;
    switch (c) {
      case '"': buf_.append("\\\"", 2); break;
      case '\\': buf_.append("\\\\", 2); break;
      case '\b': buf_.append("\\b", 2); break;
      case '\f': buf_.append("\\f", 2); break;
      case '\n': buf_.append("\\n", 2); break;
      case '\r': buf_.append("\\r", 2); break;
      case '\t': buf_.append("\\t", 2); break;
      default: {
        static constexpr char kHex[] = "0123456789abcdef";
        char u[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
        buf_.append(u, sizeof u);
      }
    }
  }
  buf_.append(s.data() + plain, s.size() - plain);
  buf_.push_back('"');
}

void JsonStream::Value(const nlohmann::json& v) {
  BeforeValue();
  nlohmann::detail::serializer<nlohmann::json> s(nlohmann::detail::output_adapter<char>(buf_), ' ',
                                                 nlohmann::json::error_handler_t::strict);
  s.dump(v, indent_ >= 0, false, static_cast<unsigned int>(indent_), static_cast<unsigned int>(levels_.size() * indent_));
  MaybeFlush();
}

}  // namespace grademl::report
