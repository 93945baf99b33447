#include "importers/json_text.h"

#include <cstdint>

#include "core/text.h"

namespace grademl::importers {

namespace {

// The value of four hex digits at p, or -1.
int32_t Hex4(const char* p) {
  int32_t v = 0;
  for (int k = 0; k < 4; ++k) {
    char c = p[k];
    int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

bool IsHigh(int32_t cp) { return cp >= 0xD800 && cp <= 0xDBFF; }
bool IsLow(int32_t cp) { return cp >= 0xDC00 && cp <= 0xDFFF; }

}  // namespace

size_t ReplaceLoneSurrogateEscapes(char* text, size_t size) {
  size_t replaced = 0;
  size_t i = 0;
  while (i < size) {
    if (text[i] != '\\') {
      ++i;
      continue;
    }
    if (i + 1 >= size) break;
    if (text[i + 1] != 'u' || i + 6 > size) {
      i += 2;  // another escape (or a \u cut short: left to the parser)
      continue;
    }
    int32_t cp = Hex4(text + i + 2);
    if (IsHigh(cp) && i + 12 <= size && text[i + 6] == '\\' && text[i + 7] == 'u' && IsLow(Hex4(text + i + 8))) {
      i += 12;  // a pair
      continue;
    }
    if (IsHigh(cp) || IsLow(cp)) {
      text[i + 2] = 'f';
      text[i + 3] = 'f';
      text[i + 4] = 'f';
      text[i + 5] = 'd';
      ++replaced;
    }
    i += 6;
  }
  return replaced;
}

bool RepairJsonText(std::string_view text, std::string* out) {
  *out = ValidUtf8(text);
  bool utf8 = *out != text;
  size_t surrogates = ReplaceLoneSurrogateEscapes(out->data(), out->size());
  return utf8 || surrogates > 0;
}

}  // namespace grademl::importers
