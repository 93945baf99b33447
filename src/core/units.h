// Human units shared by every layer that prints sizes (the reports, the workflow runner's
// status lines).
#pragma once

#include <string>

namespace grademl {

// "0 B", "512 B", "1.00 KiB", "12.3 MiB", "512 GiB": three significant digits, binary units.
std::string FormatBytes(double bytes);

}  // namespace grademl
