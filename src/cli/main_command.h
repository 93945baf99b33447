// The `grademl` command line: parses the verb and its options and runs it.
#pragma once

namespace grademl::cli {

// Runs grademl with the given arguments and returns the process exit code.
int Main(int argc, char** argv);

}  // namespace grademl::cli
