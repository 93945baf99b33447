// The streaming Chrome-trace reader: a hand-written scanner for the top level (an object's
// keys or a bare array), a 64-byte-block structural scan (quotes, escapes, braces) that finds
// each event's extent inside `traceEvents`, and simdjson ondemand for the event itself.
//
// The window: buf_ holds the uncompressed bytes from the oldest byte still needed (the start
// of the event being scanned, or of a header value being kept) to the last chunk read, plus
// simdjson's padding. Everything before that is dropped, so memory stays at the largest
// event plus one chunk.
#include "importers/chrome_json/json_event_reader.h"

// No exceptions from simdjson (SIMDJSON_EXCEPTIONS=0 for the whole importers library, see
// CMakeLists.txt): every result is checked; a conversion that would throw does not compile.
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>
#include <limits>
#include <memory>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "importers/json_text.h"

namespace grademl::importers::chrome_json {
namespace {

namespace od = simdjson::ondemand;

constexpr size_t kPadding = std::max<size_t>(simdjson::SIMDJSON_PADDING, 64);
constexpr size_t kNone = std::numeric_limits<size_t>::max();

bool IsWs(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

std::string Printable(char c) {
  auto u = static_cast<unsigned char>(c);
  if (u >= 0x21 && u < 0x7f) return fmt::format("'{}'", c);
  return fmt::format("byte 0x{:02x}", u);
}

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && IsWs(s.back())) s.remove_suffix(1);
  return s;
}

// Bits of a 64-byte block: quotes, backslashes, openers ('{' '['), closers ('}' ']').
struct BlockMasks {
  uint64_t quote = 0, backslash = 0, open = 0, close = 0;
};

inline BlockMasks Classify(const char* p) {
  BlockMasks m;
#if defined(__SSE2__)
  const __m128i q = _mm_set1_epi8('"'), bs = _mm_set1_epi8('\\'), lower = _mm_set1_epi8(0x20);
  const __m128i op = _mm_set1_epi8('{'), cl = _mm_set1_epi8('}');
  for (int k = 0; k < 4; ++k) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
    __m128i folded = _mm_or_si128(v, lower);  // '[' -> '{', ']' -> '}'
    int shift = 16 * k;
    m.quote |= static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, q)))) << shift;
    m.backslash |= static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, bs)))) << shift;
    m.open |= static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(folded, op)))) << shift;
    m.close |= static_cast<uint64_t>(static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(folded, cl)))) << shift;
  }
#else
  for (int i = 0; i < 64; ++i) {
    char c = p[i];
    uint64_t bit = uint64_t{1} << i;
    if (c == '"') m.quote |= bit;
    if (c == '\\') m.backslash |= bit;
    if (c == '{' || c == '[') m.open |= bit;
    if (c == '}' || c == ']') m.close |= bit;
  }
#endif
  return m;
}

inline uint64_t PrefixXor(uint64_t x) {
  x ^= x << 1;
  x ^= x << 2;
  x ^= x << 4;
  x ^= x << 8;
  x ^= x << 16;
  x ^= x << 32;
  return x;
}

// Which names in an object are the ones we read.
bool Is(std::string_view key, std::string_view name) { return key == name; }

// A field's key: a view of its raw text in the window when it has no escapes (the common
// case, no copy), else unescaped by simdjson. (simdjson has validated the string: its
// closing quote is there.) A key simdjson cannot unescape (a lone surrogate escape) sets
// *string_error.
[[gnu::always_inline]] inline simdjson::error_code KeyOf(od::field& field, std::string_view* key, bool* string_error) {
  const char* raw = field.key().raw();
  const char* end = raw;
  while (*end != '"' && *end != '\\') ++end;
  if (*end == '"') {
    *key = std::string_view(raw, static_cast<size_t>(end - raw));
    return simdjson::SUCCESS;
  }
  auto e = field.unescaped_key().get(*key);
  if (e == simdjson::STRING_ERROR) *string_error = true;
  return e;
}

class Reader {
 public:
  Reader(TraceInput& input, const std::function<Status(const RawTraceEvent&)>& on_event, const ReadOptions& options)
      : input_(input), on_event_(on_event), options_(options) {}

  StatusOr<TraceHeader> Run() {
    GRADEML_RETURN_IF_ERROR(Top());
    header_.bytes = base_ + len_;
    return header_;
  }

 private:
  // ---- The window ----------------------------------------------------------------------

  uint64_t Offset(size_t index) const { return base_ + index; }

  Status Error(size_t index, std::string_view what) const {
    return Corrupt("{}: byte {}: {}", input_.path(), Offset(index), what);
  }

  // Reads one more chunk, first dropping the bytes before `keep_from` (indices held by the
  // caller shift down by the returned amount). At the end of the input, eof_ is set. An
  // input error (a damaged compressed stream) also sets eof_ and is kept in input_error_:
  // what was read before it is used first, then the error is returned instead of a
  // truncation of our own.
  size_t Fill(size_t keep_from) {
    size_t drop = std::min(keep_from, len_);
    if (drop > 0) {
      std::memmove(buf_.data(), buf_.data() + drop, len_ - drop);
      len_ -= drop;
      pos_ -= std::min(pos_, drop);
      base_ += drop;
    }
    if (eof_) return drop;
    auto chunk = input_.Next();
    if (!chunk.ok()) {
      input_error_ = chunk.status();
      eof_ = true;
      return drop;
    }
    if (chunk->empty()) {
      eof_ = true;
      return drop;
    }
    size_t need = len_ + chunk->size() + kPadding;
    if (buf_.size() < need) buf_.Grow(std::max(need, buf_.size() * 2), len_);
    std::memcpy(buf_.data() + len_, chunk->data(), chunk->size());
    len_ += chunk->size();
    return drop;
  }

  // The status to return when the input ended early: the input's own error if it had one.
  Status EndedEarly(size_t index, std::string_view what) const {
    if (!input_error_.ok()) return input_error_;
    return Error(index, what);
  }

  // Makes pos_ < len_ unless the input ended (what is before pos_ may be dropped).
  bool Available() {
    while (pos_ >= len_ && !eof_) Fill(pos_);
    return pos_ < len_;
  }

  void SkipWs() {
    for (;;) {
      while (pos_ < len_ && IsWs(buf_[pos_])) ++pos_;
      if (pos_ < len_ || !Available()) return;
    }
  }

  // ---- The top level -------------------------------------------------------------------

  Status Top() {
    Fill(0);
    if (!Available()) return EndedEarly(0, "empty file, not a Chrome trace");
    // A UTF-8 byte order mark.
    while (len_ < 3 && !eof_) Fill(0);
    if (len_ >= 3 && std::memcmp(buf_.data(), "\xEF\xBB\xBF", 3) == 0) pos_ = 3;
    SkipWs();
    if (pos_ >= len_) return EndedEarly(pos_, "empty file, not a Chrome trace");
    char c = buf_[pos_];
    if (c == '[') {
      header_.bare_array = true;
      ++pos_;
      GRADEML_RETURN_IF_ERROR(Events(/*bare_array=*/true));
    } else if (c == '{') {
      ++pos_;
      GRADEML_RETURN_IF_ERROR(TopObject());
    } else {
      return Error(pos_, fmt::format("not a Chrome trace (expected '{{' or '[', found {})", Printable(c)));
    }
    SkipWs();
    if (pos_ < len_) return Error(pos_, fmt::format("unexpected {} after the end of the trace", Printable(buf_[pos_])));
    if (!input_error_.ok()) return input_error_;
    return Status::Ok();
  }

  Status TopObject() {
    bool seen_events = false;
    SkipWs();
    if (pos_ < len_ && buf_[pos_] == '}') {
      ++pos_;
    } else {
      for (;;) {
        SkipWs();
        if (pos_ >= len_) return EndedEarly(pos_, "truncated: the input ends inside the top-level object");
        if (buf_[pos_] != '"') return Error(pos_, fmt::format("expected a key, found {}", Printable(buf_[pos_])));
        std::string key;
        GRADEML_RETURN_IF_ERROR(ReadKey(&key));
        SkipWs();
        if (pos_ >= len_) return EndedEarly(pos_, "truncated: the input ends after a key");
        if (buf_[pos_] != ':') return Error(pos_, fmt::format("expected ':' after a key, found {}", Printable(buf_[pos_])));
        ++pos_;
        SkipWs();
        if (pos_ >= len_) return EndedEarly(pos_, "truncated: the input ends after a key");
        if (key == "traceEvents") {
          if (buf_[pos_] != '[') return Error(pos_, "traceEvents is not an array");
          ++pos_;
          GRADEML_RETURN_IF_ERROR(Events(/*bare_array=*/false));
          seen_events = true;
        } else if (key == "schemaVersion" || key == "displayTimeUnit" || key == "baseTimeNanoseconds" ||
                   key == "distributedInfo" || key == "deviceProperties") {
          GRADEML_RETURN_IF_ERROR(HeaderField(key));
        } else {
          GRADEML_RETURN_IF_ERROR(SkipValue(nullptr));
        }
        SkipWs();
        if (pos_ >= len_) return EndedEarly(pos_, "truncated: the input ends inside the top-level object");
        char c = buf_[pos_];
        ++pos_;
        if (c == '}') break;
        if (c != ',') return Error(pos_ - 1, fmt::format("expected ',' or '}}' in the top-level object, found {}", Printable(c)));
      }
    }
    if (!seen_events) return Error(pos_ == 0 ? 0 : pos_ - 1, "no traceEvents array in the top-level object");
    return Status::Ok();
  }

  // At a '"': reads the key (raw bytes; top-level keys we look for have no escapes). Keys
  // longer than 256 bytes are not kept (none of ours is that long).
  Status ReadKey(std::string* key) {
    const uint64_t start = Offset(pos_);  // an offset: the window may move under an index
    ++pos_;
    bool escaped = false;
    for (;;) {
      if (pos_ >= len_ && !Available()) {
        if (!input_error_.ok()) return input_error_;
        return Corrupt("{}: byte {}: truncated: the input ends inside a key", input_.path(), start);
      }
      char c = buf_[pos_++];
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        return Status::Ok();
      }
      if (key->size() < 256) key->push_back(c);
    }
  }

  // Skips one JSON value (bracket matching, strings with escapes; not validated further).
  // With `keep` set, nothing from *keep on is dropped (a value captured whole, bounded by
  // max_event_bytes); *keep follows the window's shifts.
  Status SkipValue(size_t* keep) {
    const uint64_t start = Offset(pos_);
    bool consumed = false;
    int64_t depth = 0;
    bool in_string = false, escaped = false;
    auto avail = [&]() {
      while (pos_ >= len_ && !eof_) {
        size_t drop = Fill(keep != nullptr ? *keep : pos_);
        if (keep != nullptr) *keep -= drop;
      }
      return pos_ < len_;
    };
    auto error_at = [&](uint64_t offset, std::string_view what) {
      return Corrupt("{}: byte {}: {}", input_.path(), offset, what);
    };
    for (;;) {
      if (!avail()) {
        if (depth == 0 && !in_string && consumed) return Status::Ok();  // a number at the very end
        if (!input_error_.ok()) return input_error_;
        return error_at(start, "truncated: the input ends inside a value");
      }
      if (keep != nullptr && pos_ - *keep > options_.max_event_bytes) {
        return error_at(start, fmt::format("value larger than {} bytes", options_.max_event_bytes));
      }
      char c = buf_[pos_];
      if (in_string) {
        ++pos_;
        if (escaped) {
          escaped = false;
        } else if (c == '\\') {
          escaped = true;
        } else if (c == '"') {
          in_string = false;
          if (depth == 0) return Status::Ok();
        }
        continue;
      }
      if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (depth == 0) {
          if (!consumed) return Error(pos_, fmt::format("expected a value, found {}", Printable(c)));
          return Status::Ok();  // the end of a scalar before the container's end
        }
        if (--depth == 0) {
          ++pos_;
          return Status::Ok();
        }
      } else if (depth == 0 && (c == ',' || IsWs(c))) {
        if (!consumed) return Error(pos_, fmt::format("expected a value, found {}", Printable(c)));
        return Status::Ok();
      }
      ++pos_;
      consumed = true;
    }
  }

  // ---- Strings simdjson refuses ------------------------------------------------------

  // get_string, noting a string simdjson could not unescape (a lone surrogate escape).
  // (Inlined: they are on the path of every string of every event.)
  template <typename V>
  [[gnu::always_inline]] simdjson::error_code Str(V&& v, std::string_view* out) {
    auto e = std::forward<V>(v).get_string().get(*out);
    if (e == simdjson::STRING_ERROR) string_error_ = true;
    return e;
  }
  // unescaped_key, the same.
  template <typename F>
  [[gnu::always_inline]] simdjson::error_code Key(F& field, std::string_view* out) {
    auto e = field.unescaped_key().get(*out);
    if (e == simdjson::STRING_ERROR) string_error_ = true;
    return e;
  }

  // A top-level field we read: its value is kept whole (bounded) and parsed by simdjson.
  Status HeaderField(const std::string& key) {
    size_t start = pos_;
    GRADEML_RETURN_IF_ERROR(SkipValue(&start));
    std::string_view text(buf_.data() + start, pos_ - start);
    const size_t devices = header_.device_names.size();
    string_error_ = false;
    bool utf8_error = false;
    Status st;
    {
      // A copy with simdjson's own zero padding: what follows the value in the buffer (the rest
      // of the file, or of a chunk) must not change how a malformed value is read.
      simdjson::padded_string value(text.data(), text.size());
      st = ParseHeaderField(key, start, value, &utf8_error);
    }
    if ((string_error_ || utf8_error) && RepairJsonText(text, &repaired_)) {
      // A lone surrogate escape or bytes that are not UTF-8: read again repaired (U+FFFD).
      header_.device_names.resize(devices);
      string_error_ = false;
      simdjson::padded_string value(repaired_.data(), repaired_.size());
      st = ParseHeaderField(key, start, value, &utf8_error);
    }
    return st;
  }

  Status ParseHeaderField(const std::string& key, size_t start, simdjson::padded_string& value, bool* utf8_error) {
    od::document doc;
    if (auto error = parser_.iterate(value).get(doc)) {
      if (error == simdjson::UTF8_ERROR) *utf8_error = true;
      return Error(start, fmt::format("invalid JSON in {} ({})", key, simdjson::error_message(error)));
    }
    auto bad = [&](simdjson::error_code e) {
      return Error(start, fmt::format("invalid JSON in {} ({})", key, simdjson::error_message(e)));
    };
    if (key == "schemaVersion") {
      int64_t v;
      if (!doc.get_int64().get(v)) header_.schema_version = v;
    } else if (key == "displayTimeUnit") {
      std::string_view s;
      if (!Str(doc, &s)) {
        header_.display_time_unit = std::string(s);
        if (!in_events_seen_ && s == "ns") header_.ts_unit_ns = true;
      }
    } else if (key == "baseTimeNanoseconds") {
      std::string_view raw;
      if (!doc.raw_json_token().get(raw)) {
        if (auto v = DecimalToInt64(TrimRight(raw), 0)) header_.base_time_ns = *v;
      }
    } else if (key == "distributedInfo") {
      od::object obj;
      if (!doc.get_object().get(obj)) {
        for (auto field : obj) {
          std::string_view k;
          if (auto e = Key(field, &k)) return bad(e);
          od::value v;
          if (auto e = field.value().get(v)) return bad(e);
          if (k == "rank" || k == "world_size") {
            int64_t i;
            if (!v.get_int64().get(i)) (k == "rank" ? header_.rank : header_.world_size) = i;
          } else if (k == "backend") {
            std::string_view s;
            if (!Str(v, &s)) header_.backend = std::string(s);
          }
        }
      }
    } else if (key == "deviceProperties") {
      od::array arr;
      if (!doc.get_array().get(arr)) {
        for (auto element : arr) {
          od::object obj;
          if (element.get_object().get(obj)) continue;
          std::string name;
          for (auto field : obj) {
            std::string_view k;
            if (auto e = Key(field, &k)) return bad(e);
            if (k == "name") {
              std::string_view s;
              if (!Str(field.value(), &s)) name = std::string(s);
            }
          }
          header_.device_names.push_back(std::move(name));
        }
      }
    }
    return Status::Ok();
  }

  // ---- The events ----------------------------------------------------------------------

  // Checks the bytes between two elements of the events array [from, to): whitespace and
  // at most one comma (none before the first element). Sets *comma when it saw one.
  Status Gap(size_t from, size_t to, bool* comma, bool first) {
    for (size_t i = from; i < to; ++i) {
      char c = buf_[i];
      if (IsWs(c)) continue;
      if (c == ',' && !*comma && !first) {
        *comma = true;
        continue;
      }
      return Error(i, fmt::format("expected an event object in traceEvents, found {}", Printable(c)));
    }
    return Status::Ok();
  }

  // After the '[' of the events array: scans 64-byte blocks, delivers each event as soon
  // as its closing brace is seen, and returns after the array's ']' (pos_ just past it).
  Status Events(bool bare_array) {
    in_events_seen_ = true;
    scale_pow10_ = header_.ts_unit_ns ? 0 : 3;
    size_t scan = pos_;        // the next block starts here
    size_t gap_start = pos_;   // bytes after the last element (or '[') not yet checked
    bool comma = false;        // a comma seen in the current gap
    bool first = true;         // no element yet
    size_t open = kNone;       // the current event's '{'
    int64_t depth = 0;
    uint64_t prev_in_string = 0;  // all ones when the previous block ended inside a string
    uint64_t prev_escaped = 0;    // 1 when the previous block ended with an unescaped backslash

    for (;;) {
      // Enough for a block? Otherwise read more, keeping the current event (or the gap).
      while (len_ - scan < 64 && !eof_) {
        size_t keep = open != kNone ? open : scan;
        if (open == kNone) {  // check what the gap holds so far, then forget it
          GRADEML_RETURN_IF_ERROR(Gap(gap_start, scan, &comma, first));
          gap_start = scan;
        }
        size_t drop = Fill(keep);
        scan -= drop;
        gap_start -= std::min(gap_start, drop);
        if (open != kNone) open -= drop;
      }
      if (scan >= len_) break;  // the end of the input
      bool last = len_ - scan < 64;
      if (last) std::memset(buf_.data() + len_, ' ', 64);  // the padding stands for the rest

      const char* p = buf_.data() + scan;
      BlockMasks m = Classify(p);
      uint64_t escaped = 0;
      if (m.backslash != 0 || prev_escaped != 0) {
        uint64_t carry = prev_escaped;
        escaped = carry;  // bit 0 is escaped by the previous block's last backslash
        carry = 0;
        uint64_t bs = m.backslash;
        while (bs != 0) {
          int i = __builtin_ctzll(bs);
          bs &= bs - 1;
          if ((escaped >> i) & 1) continue;  // an escaped backslash
          if (i == 63) {
            carry = 1;
          } else {
            escaped |= uint64_t{1} << (i + 1);
          }
        }
        prev_escaped = carry;
      }
      uint64_t quotes = m.quote & ~escaped;
      uint64_t in_string = PrefixXor(quotes) ^ prev_in_string;
      prev_in_string = static_cast<uint64_t>(static_cast<int64_t>(in_string) >> 63);
      uint64_t structural = (m.open | m.close) & ~in_string;
      while (structural != 0) {
        int i = __builtin_ctzll(structural);
        structural &= structural - 1;
        size_t at = scan + static_cast<size_t>(i);
        if ((m.open >> i) & 1) {
          if (depth == 0) {
            GRADEML_RETURN_IF_ERROR(Gap(gap_start, at, &comma, first));
            if (buf_[at] != '{') return Error(at, "expected an event object in traceEvents, found '['");
            if (!first && !comma) return Error(at, "expected ',' between events");
            open = at;
          }
          ++depth;
        } else {
          if (depth == 0) {
            GRADEML_RETURN_IF_ERROR(Gap(gap_start, at, &comma, first));
            if (buf_[at] != ']') return Error(at, "unexpected '}' in traceEvents");
            pos_ = at + 1;
            return Status::Ok();
          }
          if (--depth == 0) {
            GRADEML_RETURN_IF_ERROR(Event(open, at));
            open = kNone;
            first = false;
            comma = false;
            gap_start = at + 1;
          }
        }
      }
      if (open != kNone && scan + 64 - open > options_.max_event_bytes) {
        return Error(open, fmt::format("event larger than {} bytes", options_.max_event_bytes));
      }
      scan += 64;
      if (last) break;
    }
    // The input ended inside the array.
    if (open != kNone) {
      if (!input_error_.ok()) return input_error_;
      return Error(open, fmt::format("truncated: the input ends inside this event (at byte {})", Offset(len_)));
    }
    if (!input_error_.ok()) return input_error_;
    GRADEML_RETURN_IF_ERROR(Gap(gap_start, len_, &comma, first));  // a string here starts with '"': an error
    pos_ = len_;
    // The Chrome format lets a bare array end without its ']' (a trace cut short by a crash).
    if (bare_array) return Status::Ok();
    return Error(len_, "truncated: the input ends inside traceEvents");
  }

  Status BadEvent(size_t open, simdjson::error_code e) const {
    return Error(open, fmt::format("invalid JSON in an event ({})", simdjson::error_message(e)));
  }

  // Reads a pid or tid: an integer, or a string (or a number that is not an int64) as text.
  bool ReadIdField(od::value& v, bool* is_int, int64_t* i, std::string_view* s) {
    od::json_type type;
    if (v.type().get(type)) return false;
    if (type == od::json_type::number) {
      std::string_view raw = TrimRight(v.raw_json_token());
      auto [end, ec] = std::from_chars(raw.data(), raw.data() + raw.size(), *i);
      if (ec == std::errc() && end == raw.data() + raw.size()) {
        *is_int = true;
      } else {
        *s = raw;
      }
      return true;
    }
    if (type == od::json_type::string) return !Str(v, s);
    return false;
  }

  // A time field: a number or a string holding one, in µs (or ns, see the header).
  bool ReadTimeField(od::value& v, std::optional<int64_t>* out, bool* is_float) {
    od::json_type type;
    if (v.type().get(type)) return false;
    std::string_view text;
    if (type == od::json_type::number) {
      text = TrimRight(v.raw_json_token());
    } else if (type == od::json_type::string) {
      if (Str(v, &text)) return false;
    } else {
      return false;
    }
    auto ns = DecimalToInt64(text, scale_pow10_);
    if (!ns) return false;
    *out = ns;
    if (is_float) *is_float = text.find_first_of(".eE") != std::string_view::npos;
    return true;
  }

  // An id as text: a number's digits or a string.
  bool ReadIdText(od::value& v, std::string_view* out) {
    od::json_type type;
    if (v.type().get(type)) return false;
    if (type == od::json_type::string) return !Str(v, out);
    if (type == od::json_type::number) {
      *out = TrimRight(v.raw_json_token());
      return true;
    }
    return false;
  }

  // The event in buf_[open, close]: parsed and delivered.
  Status Event(size_t open, size_t close) {
    size_t n = close - open + 1;
    string_error_ = false;
    bool utf8_error = false;
    Status st = ParseEvent(open, simdjson::padded_string_view(buf_.data() + open, n, buf_.size() - open), &utf8_error);
    if (string_error_ || utf8_error) [[unlikely]] {
      // A string simdjson refused (a lone surrogate escape) or bytes that are not UTF-8: the
      // event is read again repaired, each such character U+FFFD, the rest of it as written.
      if (RepairJsonText(std::string_view(buf_.data() + open, n), &repaired_)) {
        string_error_ = false;
        size_t len = repaired_.size();
        repaired_.resize(len + kPadding, '\0');
        st = ParseEvent(open, simdjson::padded_string_view(repaired_.data(), len, repaired_.size()), &utf8_error);
      }
    }
    GRADEML_RETURN_IF_ERROR(st);
    ++header_.events;
    return on_event_(event_);
  }

  // Parses one event (its text in `view`, its '{' at buf_[open]) into event_. Sets
  // *utf8_error when simdjson refused its bytes as not UTF-8 (string_error_ is set by Str
  // and Key).
  Status ParseEvent(size_t open, simdjson::padded_string_view view, bool* utf8_error) {
    od::document doc;
    if (auto e = parser_.iterate(view).get(doc)) {
      if (e == simdjson::UTF8_ERROR) *utf8_error = true;
      return BadEvent(open, e);
    }
    od::object obj;
    if (auto e = doc.get_object().get(obj)) return BadEvent(open, e);

    RawTraceEvent& ev = event_;
    ev.offset = Offset(open);
    ev.ph = 0;
    ev.name = ev.cat = ev.pid_str = ev.tid_str = ev.id = ev.bp = ev.s = ev.bad_field = {};
    ev.pid_is_int = ev.tid_is_int = ev.ts_float = false;
    ev.pid = ev.tid = 0;
    ev.ts_ns.reset();
    ev.dur_ns.reset();
    ev.args.clear();
    auto bad = [&](std::string_view field) {
      if (ev.bad_field.empty()) ev.bad_field = field;
    };

    for (auto result : obj) {
      od::field field;
      if (auto e = std::move(result).get(field)) return BadEvent(open, e);
      std::string_view key;
      if (auto e = KeyOf(field, &key, &string_error_)) return BadEvent(open, e);
      od::value& v = field.value();
      if (key.size() <= 4) {
        if (Is(key, "ph")) {
          std::string_view s;
          if (Str(v, &s)) {
            bad("ph");
          } else {
            ev.ph = s.empty() ? 0 : s[0];
          }
        } else if (Is(key, "ts")) {
          if (!ReadTimeField(v, &ev.ts_ns, &ev.ts_float)) bad("ts");
        } else if (Is(key, "dur")) {
          if (!ReadTimeField(v, &ev.dur_ns, nullptr)) bad("dur");
        } else if (Is(key, "pid")) {
          if (!ReadIdField(v, &ev.pid_is_int, &ev.pid, &ev.pid_str)) bad("pid");
        } else if (Is(key, "tid")) {
          if (!ReadIdField(v, &ev.tid_is_int, &ev.tid, &ev.tid_str)) bad("tid");
        } else if (Is(key, "name")) {
          if (Str(v, &ev.name)) bad("name");
        } else if (Is(key, "cat")) {
          if (Str(v, &ev.cat)) bad("cat");
        } else if (Is(key, "args")) {
          GRADEML_RETURN_IF_ERROR(Args(open, v));
        } else if (Is(key, "id")) {
          if (!ReadIdText(v, &ev.id)) bad("id");
        } else if (Is(key, "id2")) {
          od::object id2;
          if (v.get_object().get(id2)) {
            bad("id");
          } else {
            for (auto f : id2) {
              std::string_view k;
              if (auto e = Key(f, &k)) return BadEvent(open, e);
              od::value iv;
              if (auto e = f.value().get(iv)) return BadEvent(open, e);
              if ((k == "local" || k == "global") && !ReadIdText(iv, &ev.id)) bad("id");
            }
          }
        } else if (Is(key, "bp")) {
          if (Str(v, &ev.bp)) bad("bp");
        } else if (Is(key, "s")) {
          if (Str(v, &ev.s)) bad("s");
        }
      }
    }
    return Status::Ok();
  }

  Status Args(size_t open, od::value& v) {
    od::object args;
    if (v.get_object().get(args)) {
      if (event_.bad_field.empty()) event_.bad_field = "args";
      return Status::Ok();
    }
    for (auto result : args) {
      od::field field;
      if (auto e = std::move(result).get(field)) return BadEvent(open, e);
      std::string_view key;
      if (auto e = KeyOf(field, &key, &string_error_)) return BadEvent(open, e);
      od::value& av = field.value();
      od::json_type type;
      if (auto e = av.type().get(type)) return BadEvent(open, e);
      ArgValue out;
      switch (type) {
        case od::json_type::number: {
          out.s = TrimRight(av.raw_json_token());
          od::number_type nt;
          if (auto e = av.get_number_type().get(nt)) return BadEvent(open, e);
          if (nt == od::number_type::signed_integer) {
            if (auto e = av.get_int64().get(out.i)) return BadEvent(open, e);
            out.kind = ArgValue::kInt;
            out.d = static_cast<double>(out.i);
          } else if (nt == od::number_type::unsigned_integer) {
            out.kind = ArgValue::kOther;  // beyond int64: the text
          } else {
            if (auto e = av.get_double().get(out.d)) return BadEvent(open, e);
            out.kind = ArgValue::kDouble;
          }
          break;
        }
        case od::json_type::string:
          if (auto e = Str(av, &out.s)) return BadEvent(open, e);
          out.kind = ArgValue::kString;
          break;
        case od::json_type::boolean: {
          bool b;
          if (auto e = av.get_bool().get(b)) return BadEvent(open, e);
          out.kind = ArgValue::kBool;
          out.i = b ? 1 : 0;
          break;
        }
        case od::json_type::null: {
          bool is_null = false;
          if (auto e = av.is_null().get(is_null)) return BadEvent(open, e);
          if (!is_null) return Error(open, "invalid JSON in an event (a bad literal)");
          out.kind = ArgValue::kNull;
          break;
        }
        case od::json_type::object: {
          od::object o;
          if (auto e = av.get_object().get(o)) return BadEvent(open, e);
          if (auto e = o.raw_json().get(out.s)) return BadEvent(open, e);
          out.s = TrimRight(out.s);
          out.kind = ArgValue::kOther;
          break;
        }
        case od::json_type::array: {
          od::array a;
          if (auto e = av.get_array().get(a)) return BadEvent(open, e);
          if (auto e = a.raw_json().get(out.s)) return BadEvent(open, e);
          out.s = TrimRight(out.s);
          out.kind = ArgValue::kOther;
          break;
        }
      }
      event_.args.emplace_back(key, out);
    }
    return Status::Ok();
  }

  TraceInput& input_;
  const std::function<Status(const RawTraceEvent&)>& on_event_;
  const ReadOptions& options_;
  // Like std::vector<char> without zero-filling what it adds.
  class Buffer {
   public:
    char* data() { return data_.get(); }
    const char* data() const { return data_.get(); }
    size_t size() const { return size_; }
    char& operator[](size_t i) { return data_[i]; }
    char operator[](size_t i) const { return data_[i]; }
    void Grow(size_t size, size_t keep) {
      std::unique_ptr<char[]> bigger(new char[size]);
      if (keep > 0) std::memcpy(bigger.get(), data_.get(), keep);
      data_ = std::move(bigger);
      size_ = size;
    }

   private:
    std::unique_ptr<char[]> data_;
    size_t size_ = 0;
  };
  Buffer buf_;
  size_t pos_ = 0, len_ = 0;
  uint64_t base_ = 0;  // offset in the input of buf_[0]
  bool eof_ = false;
  Status input_error_;
  bool in_events_seen_ = false;
  int scale_pow10_ = 3;
  od::parser parser_;
  bool string_error_ = false;  // Str or Key met a string simdjson could not unescape
  std::string repaired_;       // an event (or header value) repaired by RepairJsonText, padded
  RawTraceEvent event_;
  TraceHeader header_;
};

}  // namespace

StatusOr<TraceHeader> ReadChromeTrace(TraceInput& input, const std::function<Status(const RawTraceEvent&)>& on_event,
                                      const ReadOptions& options) {
  Reader reader(input, on_event, options);
  return reader.Run();
}

bool LooksLikeChromeTrace(std::string_view b) {
  size_t i = 0;
  if (b.substr(0, 3) == "\xEF\xBB\xBF") i = 3;
  while (i < b.size() && IsWs(b[i])) ++i;
  if (i >= b.size()) return false;
  if (b[i] == '[') {
    ++i;
    while (i < b.size() && IsWs(b[i])) ++i;
    return i >= b.size() || b[i] == '{' || b[i] == ']';
  }
  if (b[i] != '{') return false;
  if (b.find("\"traceEvents\"") != std::string_view::npos) return true;
  ++i;
  while (i < b.size() && IsWs(b[i])) ++i;
  if (i >= b.size() || b[i] != '"') return false;
  size_t end = b.find('"', i + 1);
  if (end == std::string_view::npos) return false;
  std::string_view key = b.substr(i + 1, end - i - 1);
  static constexpr std::array<std::string_view, 9> kKeys = {
      "traceEvents", "schemaVersion", "deviceProperties", "distributedInfo", "displayTimeUnit",
      "baseTimeNanoseconds", "traceName", "otherData", "systemTraceEvents"};
  return std::find(kKeys.begin(), kKeys.end(), key) != kKeys.end();
}

std::optional<int64_t> DecimalToInt64(std::string_view text, int scale_pow10) {
  // The common case first: [-]digits[.digits] with at most 19 digits, whose fraction fits
  // the scale (no rounding): one pass in 64-bit integers, overflow checked.
  if (scale_pow10 >= 0 && scale_pow10 <= 3 && !text.empty() && text.size() <= 21) {
    size_t k = 0;
    bool neg = text[0] == '-';
    if (neg) k = 1;
    uint64_t acc = 0;
    int frac = -1;  // digits after the point, -1: no point
    int digits_seen = 0;
    bool simple = k < text.size();
    for (; k < text.size(); ++k) {
      char c = text[k];
      if (c >= '0' && c <= '9') {
        acc = acc * 10 + static_cast<uint64_t>(c - '0');  // 19 digits < 2^64
        ++digits_seen;
        if (frac >= 0) ++frac;
      } else if (c == '.' && frac < 0) {
        frac = 0;
      } else {
        simple = false;
        break;
      }
    }
    int shift = scale_pow10 - std::max(frac, 0);
    if (simple && digits_seen > 0 && digits_seen <= 19 && frac != 0 && shift >= 0) {
      static constexpr uint64_t kPow10[] = {1, 10, 100, 1000};
      uint64_t scaled;
      if (!__builtin_mul_overflow(acc, kPow10[shift], &scaled) &&
          scaled <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return neg ? -static_cast<int64_t>(scaled) : static_cast<int64_t>(scaled);
      }
    }
  }
  size_t i = 0;
  while (i < text.size() && IsWs(text[i])) ++i;
  text = TrimRight(text);
  bool negative = false;
  if (i < text.size() && (text[i] == '-' || text[i] == '+')) negative = text[i++] == '-';
  // Significant digits (leading zeros dropped) and the power of ten of the last one.
  std::array<char, 40> digits{};
  int nd = 0;            // significant digits seen
  int64_t exp10 = 0;     // value = digits * 10^exp10 (digits beyond the array only move exp10)
  bool any_digit = false, seen_point = false;
  for (; i < text.size(); ++i) {
    char c = text[i];
    if (c >= '0' && c <= '9') {
      any_digit = true;
      if (nd == 0 && c == '0') {
        if (seen_point) --exp10;
        continue;
      }
      if (nd < static_cast<int>(digits.size())) {
        digits[static_cast<size_t>(nd++)] = static_cast<char>(c - '0');
        if (seen_point) --exp10;
      } else if (!seen_point) {
        ++exp10;  // a digit we cannot hold: the value is far beyond int64 anyway
      }
    } else if (c == '.' && !seen_point) {
      seen_point = true;
    } else {
      break;
    }
  }
  if (!any_digit) return std::nullopt;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool eneg = false;
    if (i < text.size() && (text[i] == '-' || text[i] == '+')) eneg = text[i++] == '-';
    if (i >= text.size()) return std::nullopt;
    int64_t e = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) e = std::min<int64_t>(e * 10 + (text[i] - '0'), 100000);
    exp10 += eneg ? -e : e;
  }
  if (i != text.size()) return std::nullopt;
  exp10 += scale_pow10;
  if (nd == 0) return 0;
  // Keep the digits down to 10^0; round on the first dropped one (ties away from zero).
  int64_t keep = nd + std::min<int64_t>(exp10, 0);
  unsigned __int128 acc = 0;
  const unsigned __int128 limit = negative ? (unsigned __int128)1 << 63 : ((unsigned __int128)1 << 63) - 1;
  for (int64_t k = 0; k < keep; ++k) {
    acc = acc * 10 + static_cast<unsigned>(digits[static_cast<size_t>(k)]);
    if (acc > limit) return std::nullopt;
  }
  if (exp10 > 0) {
    for (int64_t k = 0; k < exp10; ++k) {
      acc *= 10;
      if (acc > limit) return std::nullopt;
    }
  } else if (keep >= 0 && keep < nd && digits[static_cast<size_t>(keep)] >= 5) {
    acc += 1;
    if (acc > limit) return std::nullopt;
  }
  if (negative) return acc == ((unsigned __int128)1 << 63) ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(acc);
  return static_cast<int64_t>(acc);
}

}  // namespace grademl::importers::chrome_json
