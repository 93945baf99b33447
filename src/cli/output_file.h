// Where a verb writes a file it was asked for (`export --perfetto FILE`, `report --html FILE`):
// FILE, or stdout for "-". The one place that opens and closes it, names it in errors and
// removes a partial file when writing failed.
#pragma once

#include <cstdio>
#include <functional>
#include <string>

#include "core/status.h"

namespace grademl::cli {

// Runs `write` on the opened output and closes it. Returns the bytes written to the file (0 for
// stdout); an error's message is "FILE: reason" (FILE made terminal-safe). On an error a
// partially written regular file is removed, never a device such as /dev/full.
StatusOr<long> WriteOutputFile(const std::string& path, const std::function<Status(std::FILE*)>& write);

}  // namespace grademl::cli
