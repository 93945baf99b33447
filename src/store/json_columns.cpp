#include "store/json_columns.h"

#include <charconv>
#include <cstdint>

namespace grademl::store {
namespace {

// JSON string text of `s`, appended. Runs of characters that need no escape are appended
// at once (nearly every tag and command is one such run).
void AppendString(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  size_t plain = 0;  // start of the run not yet appended
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + plain, i - plain);
    plain = i + 1;
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        out += "\\u00";
        out += kHex[u >> 4];
        out += kHex[u & 0xf];
    }
  }
  out.append(s.data() + plain, s.size() - plain);
  out += '"';
}

void AppendUtf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

// Reads the JSON shapes the store writes: a cursor over the text with token readers that
// report where the text stopped making sense.
class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : s_(text) {}

  // Skips whitespace, then consumes `c` if it is next.
  bool Consume(char c) {
    SkipSpace();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  Status Expect(char c) { return Consume(c) ? Status::Ok() : Error(fmt::format("expected '{}'", c)); }

  Status ExpectEnd() {
    SkipSpace();
    return pos_ == s_.size() ? Status::Ok() : Error("unexpected text after the value");
  }

  Status ReadString(std::string& out) {
    GRADEML_RETURN_IF_ERROR(Expect('"'));
    while (true) {
      if (pos_ >= s_.size()) return Error("unterminated string");
      char c = s_[pos_++];
      if (c == '"') return Status::Ok();
      if (static_cast<unsigned char>(c) < 0x20) return Error("control character in string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) return Error("unterminated string");
      switch (char e = s_[pos_++]) {
        case '"': case '\\': case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = 0;
          GRADEML_RETURN_IF_ERROR(ReadHex4(cp));
          if (cp >= 0xdc00 && cp <= 0xdfff) return Error("lone low surrogate");
          if (cp >= 0xd800 && cp <= 0xdbff) {
            uint32_t low = 0;
            if (pos_ + 2 > s_.size() || s_[pos_] != '\\' || s_[pos_ + 1] != 'u') return Error("lone high surrogate");
            pos_ += 2;
            GRADEML_RETURN_IF_ERROR(ReadHex4(low));
            if (low < 0xdc00 || low > 0xdfff) return Error("lone high surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          }
          AppendUtf8(out, cp);
          break;
        }
        default: return Error("bad escape");
      }
    }
  }

  // An integer (no fraction, no exponent) that fits int64_t.
  Status ReadInt64(int64_t& out) {
    SkipSpace();
    size_t start = pos_;
    if (pos_ < s_.size() && s_[pos_] == '-') ++pos_;
    size_t digits = pos_;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    if (pos_ == digits) return Error("expected an integer");
    if (s_[digits] == '0' && pos_ - digits > 1) return Error("leading zero in a number");
    if (pos_ < s_.size() && (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E')) {
      return Error("expected an integer, not a fraction");
    }
    auto [end, ec] = std::from_chars(s_.data() + start, s_.data() + pos_, out);
    if (ec != std::errc() || end != s_.data() + pos_) return Error("integer out of range");
    return Status::Ok();
  }

  Status ReadBool(bool& out) {
    SkipSpace();
    if (s_.substr(pos_, 4) == "true") {
      pos_ += 4;
      out = true;
      return Status::Ok();
    }
    if (s_.substr(pos_, 5) == "false") {
      pos_ += 5;
      out = false;
      return Status::Ok();
    }
    return Error("expected true or false");
  }

  // Where the next error would be reported.
  size_t pos() const { return pos_; }
  Status ErrorAt(size_t at, std::string_view what) const { return Corrupt("bad JSON at byte {}: {}", at, what); }

 private:
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }

  Status ReadHex4(uint32_t& cp) {
    if (pos_ + 4 > s_.size()) return Error("short \\u escape");
    for (int i = 0; i < 4; ++i) {
      char h = s_[pos_++];
      uint32_t d;
      if (h >= '0' && h <= '9') {
        d = h - '0';
      } else if (h >= 'a' && h <= 'f') {
        d = h - 'a' + 10;
      } else if (h >= 'A' && h <= 'F') {
        d = h - 'A' + 10;
      } else {
        return Error("bad \\u escape");
      }
      cp = cp << 4 | d;
    }
    return Status::Ok();
  }

  Status Error(std::string_view what) const { return Corrupt("bad JSON at byte {}: {}", pos_, what); }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

std::string EncodeStringArray(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    AppendString(out, items[i]);
  }
  out += ']';
  return out;
}

StatusOr<std::vector<std::string>> DecodeStringArray(std::string_view json) {
  JsonReader r(json);
  std::vector<std::string> items;
  GRADEML_RETURN_IF_ERROR(r.Expect('['));
  if (!r.Consume(']')) {
    do {
      GRADEML_RETURN_IF_ERROR(r.ReadString(items.emplace_back()));
    } while (r.Consume(','));
    GRADEML_RETURN_IF_ERROR(r.Expect(']'));
  }
  GRADEML_RETURN_IF_ERROR(r.ExpectEnd());
  return items;
}

std::string EncodeTags(const model::Tags& tags) {
  std::string out;
  EncodeTagsInto(out, tags);
  return out;
}

void EncodeTagsInto(std::string& out, const model::Tags& tags) {
  out.assign(1, '{');
  for (size_t i = 0; i < tags.size(); ++i) {
    if (i > 0) out += ',';
    AppendString(out, tags[i].first);
    out += ':';
    AppendString(out, tags[i].second);
  }
  out += '}';
}

StatusOr<model::Tags> DecodeTags(std::string_view json) {
  JsonReader r(json);
  model::Tags tags;
  GRADEML_RETURN_IF_ERROR(r.Expect('{'));
  if (!r.Consume('}')) {
    do {
      auto& [key, value] = tags.emplace_back();
      GRADEML_RETURN_IF_ERROR(r.ReadString(key));
      GRADEML_RETURN_IF_ERROR(r.Expect(':'));
      GRADEML_RETURN_IF_ERROR(r.ReadString(value));
    } while (r.Consume(','));
    GRADEML_RETURN_IF_ERROR(r.Expect('}'));
  }
  GRADEML_RETURN_IF_ERROR(r.ExpectEnd());
  return tags;
}

std::string EncodeArtifacts(const std::vector<model::StepArtifact>& artifacts) {
  std::string out = "[";
  for (size_t i = 0; i < artifacts.size(); ++i) {
    const auto& [path, hash, size, directory] = artifacts[i];
    if (i > 0) out += ',';
    out += "{\"path\":";
    AppendString(out, path);
    out += ",\"hash\":";
    AppendString(out, hash);
    out += ",\"size\":";
    out += std::to_string(size);
    out += directory ? ",\"directory\":true}" : ",\"directory\":false}";
  }
  out += ']';
  return out;
}

StatusOr<std::vector<model::StepArtifact>> DecodeArtifacts(std::string_view json) {
  JsonReader r(json);
  std::vector<model::StepArtifact> artifacts;
  GRADEML_RETURN_IF_ERROR(r.Expect('['));
  if (!r.Consume(']')) {
    do {
      model::StepArtifact& a = artifacts.emplace_back();
      GRADEML_RETURN_IF_ERROR(r.Expect('{'));
      if (!r.Consume('}')) {
        do {
          std::string key;
          const size_t at = r.pos();
          GRADEML_RETURN_IF_ERROR(r.ReadString(key));
          GRADEML_RETURN_IF_ERROR(r.Expect(':'));
          if (key == "path") {
            a.path.clear();
            GRADEML_RETURN_IF_ERROR(r.ReadString(a.path));
          } else if (key == "hash") {
            a.hash.clear();
            GRADEML_RETURN_IF_ERROR(r.ReadString(a.hash));
          } else if (key == "size") {
            GRADEML_RETURN_IF_ERROR(r.ReadInt64(a.size));
          } else if (key == "directory") {
            GRADEML_RETURN_IF_ERROR(r.ReadBool(a.directory));
          } else {
            return r.ErrorAt(at, "unknown key in an artifact (expected path, hash, size, directory)");
          }
        } while (r.Consume(','));
        GRADEML_RETURN_IF_ERROR(r.Expect('}'));
      }
    } while (r.Consume(','));
    GRADEML_RETURN_IF_ERROR(r.Expect(']'));
  }
  GRADEML_RETURN_IF_ERROR(r.ExpectEnd());
  return artifacts;
}

}  // namespace grademl::store
