// LineReader: splits a TraceInput (a file, or the files of a directory read as one chain)
// into lines, for JSON-lines formats such as Spark's event logs.
//
// Memory is bounded by the longest line kept (Options::max_line_bytes) plus one input
// chunk, whatever the input's size: a longer line is not kept but skipped to its newline,
// and handed out with only its first bytes (Line::skipped). Lines are numbered from 1 within
// each file of a chain, and a file whose last line has no newline ends that line there (it
// is not joined with the next file's first line). Every line handed out is followed in
// memory by at least kLinePadding readable bytes, so that simdjson can parse it in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "importers/trace_input.h"

namespace grademl::importers::spark {

// Readable bytes after every line handed out (simdjson's SIMDJSON_PADDING is 64).
inline constexpr size_t kLinePadding = 64;

class LineReader {
 public:
  struct Options {
    size_t max_line_bytes = size_t{64} << 20;  // longer lines are skipped
    size_t skipped_prefix_bytes = 256;         // what is kept of a skipped line
  };
  struct Line {
    std::string_view text;   // without the newline (nor a '\r' before it); valid until the next call
    std::string_view file;   // the file the line is in (TraceInput::part_path)
    int64_t number = 0;      // 1-based, within that file
    bool newline = true;     // false: the file ended without a newline after it
    bool skipped = false;    // longer than max_line_bytes: text holds its first bytes only
    uint64_t bytes = 0;      // the line's length in the file (a skipped line's full length)
  };

  explicit LineReader(TraceInput& input) : LineReader(input, Options{}) {}
  LineReader(TraceInput& input, Options options);

  // The next line, nullopt at the end of the input, or the input's error (a damaged
  // compressed stream: "PATH: byte N: what"), which is final; the lines before the damage
  // were all handed out.
  StatusOr<std::optional<Line>> Next();

 private:
  void Reserve(size_t size);
  Line MakeLine(size_t begin, size_t end, bool newline);

  TraceInput& input_;
  Options options_;
  std::vector<char> buf_;   // [0, len_) data, then at least kLinePadding bytes
  size_t len_ = 0;
  size_t start_ = 0;        // the start of the line not yet handed out
  size_t scan_ = 0;         // where the search for its newline goes on
  // A chunk of the next file, read before the previous file's unfinished last line was
  // handed out (valid: the input is not read again before it is used).
  std::span<const char> held_;
  size_t held_part_ = 0;
  std::string held_path_;
  bool has_held_ = false;
  bool started_ = false;
  bool eof_ = false;
  Status error_;
  size_t part_ = 0;
  std::string part_path_;
  int64_t line_ = 0;
  bool skipping_ = false;   // inside a line longer than the limit: dropping its bytes
  std::string skipped_prefix_;
  uint64_t skipped_bytes_ = 0;
};

}  // namespace grademl::importers::spark
