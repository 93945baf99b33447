#include "core/text.h"

#include <cstdint>
#include <cstdio>

namespace grademl {

namespace {

// The length of the valid UTF-8 sequence at text[i], or 0 when it is not one (overlong forms,
// surrogates and code points past U+10FFFF are not).
size_t ValidSequenceAt(std::string_view text, size_t i) {
  auto b = static_cast<unsigned char>(text[i]);
  size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  bool ok = len > 0 && i + len <= text.size();
  for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
  if (ok && len > 1) {
    uint32_t cp = b & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    ok = cp >= kMin[len] && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF);
  }
  return ok ? len : 0;
}

}  // namespace

bool IsValidUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t len = ValidSequenceAt(text, i);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string ValidUtf8(std::string_view text) {
  if (IsValidUtf8(text)) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    size_t len = ValidSequenceAt(text, i);
    if (len > 0) {
      out.append(text.substr(i, len));
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

std::string EscapeControl(std::string_view text) {
  std::string valid = ValidUtf8(text);
  std::string out;
  out.reserve(valid.size());
  char buf[8];
  for (size_t i = 0; i < valid.size(); ++i) {
    auto u = static_cast<unsigned char>(valid[i]);
    if (u == '\n') {
      out += "\\n";
    } else if (u == '\r') {
      out += "\\r";
    } else if (u == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out += buf;
    } else if (u == 0xC2 && i + 1 < valid.size() && static_cast<unsigned char>(valid[i + 1]) < 0xA0) {
      std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned char>(valid[i + 1]));
      out += buf;  // a C1 control character (U+0080..U+009F), e.g. the one-byte CSI
      ++i;
    } else {
      out += valid[i];
    }
  }
  return out;
}

}  // namespace grademl
