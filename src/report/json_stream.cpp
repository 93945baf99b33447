#include "report/json_stream.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/text.h"

namespace grademl::report {
namespace {

constexpr size_t kChunk = size_t{1} << 20;
constexpr size_t kSlack = size_t{64} << 10;  // room past a chunk for the value that ends it

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

JsonStream::JsonStream(std::function<void(std::string_view)> sink, int indent)
    : sink_(std::move(sink)), indent_(indent), capacity_(kChunk + kSlack), data_(new char[capacity_]), pos_(data_.get()), end_(pos_ + capacity_) {}

JsonStream::~JsonStream() { Flush(); }

void JsonStream::Flush() {
  size_t n = static_cast<size_t>(pos_ - data_.get());
  if (n > 0) {
    sink_(std::string_view(data_.get(), n));
    pos_ = data_.get();
  }
}

void JsonStream::MaybeFlush() {
  if (static_cast<size_t>(pos_ - data_.get()) >= kChunk) Flush();
}

char* JsonStream::MakeRoom(size_t n) {
  Flush();
  if (capacity_ < n) {  // one value larger than the buffer (a long string, a big DOM part)
    capacity_ = n + kChunk;
    data_.reset(new char[capacity_]);
    pos_ = data_.get();
    end_ = pos_ + capacity_;
  }
  return pos_;
}

void JsonStream::NewlineIndent(size_t depth) {
  size_t n = depth * static_cast<size_t>(indent_) + 1;
  char* out = Room(n);
  if (n <= kNewlineSpaces.size()) {
    std::memcpy(out, kNewlineSpaces.data(), n);
  } else {
    out[0] = '\n';
    std::memset(out + 1, ' ', n - 1);
  }
  pos_ = out + n;
}

void JsonStream::Separator() {
  Level& l = levels_.back();
  if (!l.empty) Put(",", 1);
  l.empty = false;
  NewlineIndent(levels_.size());
}

void JsonStream::BeforeValue() {
  MaybeFlush();
  if (after_key_) {
    after_key_ = false;
    return;
  }
  if (levels_.empty()) return;
  Separator();
}

void JsonStream::Key(std::string_view key) {
  MaybeFlush();
  Separator();
  Escaped(key);
  Put(": ", 2);
  after_key_ = true;
}

void JsonStream::BeginObject() {
  BeforeValue();
  Put("{", 1);
  levels_.push_back({.empty = true});
}

void JsonStream::BeginArray() {
  BeforeValue();
  Put("[", 1);
  levels_.push_back({.empty = true});
}

void JsonStream::EndObject() {
  bool empty = levels_.back().empty;
  levels_.pop_back();
  if (!empty) NewlineIndent(levels_.size());
  Put("}", 1);
}

void JsonStream::EndArray() {
  bool empty = levels_.back().empty;
  levels_.pop_back();
  if (!empty) NewlineIndent(levels_.size());
  Put("]", 1);
}

void JsonStream::Null() {
  BeforeValue();
  Put("null", 4);
}

void JsonStream::Bool(bool v) {
  BeforeValue();
  if (v) {
    Put("true", 4);
  } else {
    Put("false", 5);
  }
}

void JsonStream::Int(int64_t v) {
  BeforeValue();
  char* out = Room(24);
  pos_ = std::to_chars(out, out + 24, v).ptr;
}

void JsonStream::UInt(uint64_t v) {
  BeforeValue();
  char* out = Room(24);
  pos_ = std::to_chars(out, out + 24, v).ptr;
}

void JsonStream::Double(double v) {
  BeforeValue();
  if (!std::isfinite(v)) {
    Put("null", 4);
    return;
  }
  if (v == 0) {
    if (std::signbit(v)) {
      Put("-0.0", 4);
    } else {
      Put("0.0", 3);
    }
    return;
  }
  char* out = Room(64);
  pos_ = nlohmann::detail::to_chars(out, out + 64, v);
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
  // At most six bytes for one (\u00XX), and the quotes.
  char* out = Room(6 * s.size() + 2);
  *out++ = '"';
  const char* p = s.data();
  const char* end = p + s.size();
  while (end - p >= 8 && EightClean(p)) {
    std::memcpy(out, p, 8);
    out += 8;
    p += 8;
  }
  for (; p < end; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (!kEscape.needs[c]) {
      *out++ = static_cast<char>(c);
      continue;
    }
    *out++ = '\\';
    switch (c) {
      case '"': *out++ = '"'; break;
      case '\\': *out++ = '\\'; break;
      case '\b': *out++ = 'b'; break;
      case '\f': *out++ = 'f'; break;
      case '\n': *out++ = 'n'; break;
      case '\r': *out++ = 'r'; break;
      case '\t': *out++ = 't'; break;
      default: {
        static constexpr char kHex[] = "0123456789abcdef";
        out[0] = 'u';
        out[1] = '0';
        out[2] = '0';
        out[3] = kHex[c >> 4];
        out[4] = kHex[c & 15];
        out += 5;
      }
    }
  }
  *out++ = '"';
  pos_ = out;
}

void JsonStream::Value(const nlohmann::json& v) {
  BeforeValue();
  scratch_.clear();
  nlohmann::detail::serializer<nlohmann::json> s(nlohmann::detail::output_adapter<char>(scratch_), ' ',
                                                 nlohmann::json::error_handler_t::strict);
  s.dump(v, indent_ >= 0, false, static_cast<unsigned int>(indent_), static_cast<unsigned int>(levels_.size() * indent_));
  Put(scratch_.data(), scratch_.size());
}

}  // namespace grademl::report
