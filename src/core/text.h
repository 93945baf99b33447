// Text that came from outside grademl (step names, commands, phase names from a trace or a
// user program) made safe to show: valid UTF-8, and no byte that could move the cursor,
// break a line or drive the terminal. Every place that prints an untrusted string uses
// these, from spec errors to the report.
#pragma once

#include <string>
#include <string_view>

namespace grademl {

// The string as valid UTF-8: each byte of an invalid sequence becomes U+FFFD.
std::string ValidUtf8(std::string_view text);
// Whether the string is valid UTF-8 already (ValidUtf8 would return it unchanged).
bool IsValidUtf8(std::string_view text);

// The string as valid UTF-8 on one line, with every control character shown as an escape:
// "\n", "\r", "\t", and "\xNN" for the others (ESC is "\x1b", DEL "\x7f", a C1 control such
// as the one-byte CSI U+009B is "\u009b"). Printable text, backslashes included, is kept as is.
std::string EscapeControl(std::string_view text);

}  // namespace grademl
