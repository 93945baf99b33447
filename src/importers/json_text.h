// Repairs JSON text from other tools that a strict parser (simdjson) refuses for the sake of
// one character, so that the importers keep the record and lose only that character: every
// byte of an invalid UTF-8 sequence becomes U+FFFD (as ValidUtf8 does), and every \u escape
// of a lone UTF-16 surrogate (a high one not followed by the escape of a low one, or a low
// one alone, e.g. what Python's json.dumps writes for a name decoded with surrogateescape)
// becomes the escape \ufffd. Everything else is left byte for byte, so a record that is
// damaged in another way stays damaged (and is reported as such by the reader).
//
// The importers call this only after simdjson refused a record (UTF8_ERROR, STRING_ERROR):
// the common, valid record costs nothing.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace grademl::importers {

// Rewrites each \u escape of a lone surrogate in text[0, size) as \ufffd, in place (the same
// length: offsets do not move). Escapes are followed from the start of the text, so "\\ud800"
// (an escaped backslash, then "ud800") is left alone. Returns how many were rewritten.
size_t ReplaceLoneSurrogateEscapes(char* text, size_t size);

// `text` repaired into *out (invalid UTF-8 bytes and lone surrogate escapes replaced, see
// above). Returns false, with *out unspecified, when there was nothing to repair.
bool RepairJsonText(std::string_view text, std::string* out);

}  // namespace grademl::importers
