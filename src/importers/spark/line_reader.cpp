#include "importers/spark/line_reader.h"

#include <algorithm>
#include <cstring>

namespace grademl::importers::spark {

LineReader::LineReader(TraceInput& input, Options options) : input_(input), options_(options) {
  options_.max_line_bytes = std::max<size_t>(options_.max_line_bytes, 1);
  Reserve(0);
}

void LineReader::Reserve(size_t size) {
  size_t need = size + kLinePadding;
  if (buf_.size() >= need) return;
  buf_.resize(std::max(need, buf_.size() * 2));
}

LineReader::Line LineReader::MakeLine(size_t begin, size_t end, bool newline) {
  Line line;
  line.bytes = end - begin;
  if (end > begin && buf_[end - 1] == '\r') --end;
  line.text = std::string_view(buf_.data() + begin, end - begin);
  line.file = part_path_;
  line.number = ++line_;
  line.newline = newline;
  return line;
}

StatusOr<std::optional<LineReader::Line>> LineReader::Next() {
  for (;;) {
    // A whole line in the buffer, or the end of one being skipped.
    if (!skipping_) {
      const void* nl = scan_ < len_ ? std::memchr(buf_.data() + scan_, '\n', len_ - scan_) : nullptr;
      if (nl != nullptr) {
        size_t end = static_cast<size_t>(static_cast<const char*>(nl) - buf_.data());
        Line line = MakeLine(start_, end, true);
        start_ = scan_ = end + 1;
        return std::optional<Line>(line);
      }
      scan_ = len_;
      if (len_ - start_ > options_.max_line_bytes) {
        skipping_ = true;
        skipped_prefix_.assign(buf_.data() + start_, std::min(options_.skipped_prefix_bytes, len_ - start_));
        skipped_bytes_ = len_ - start_;
        start_ = scan_ = len_;
      }
    } else {
      const void* nl = start_ < len_ ? std::memchr(buf_.data() + start_, '\n', len_ - start_) : nullptr;
      if (nl != nullptr) {
        size_t end = static_cast<size_t>(static_cast<const char*>(nl) - buf_.data());
        skipped_bytes_ += end - start_;
        start_ = scan_ = end + 1;
        skipping_ = false;
        Line line;
        line.text = skipped_prefix_;
        line.file = part_path_;
        line.number = ++line_;
        line.skipped = true;
        line.bytes = skipped_bytes_;
        return std::optional<Line>(line);
      }
      skipped_bytes_ += len_ - start_;
      start_ = scan_ = len_;
    }

    auto pending_last_line = [&]() -> std::optional<Line> {
      if (skipping_) {
        skipping_ = false;
        Line line;
        line.text = skipped_prefix_;
        line.file = part_path_;
        line.number = ++line_;
        line.skipped = true;
        line.newline = false;
        line.bytes = skipped_bytes_;
        return line;
      }
      if (start_ < len_) {
        Line line = MakeLine(start_, len_, false);
        start_ = scan_ = len_;
        return line;
      }
      return std::nullopt;
    };

    if (eof_) {
      if (!error_.ok()) return error_;
      return pending_last_line();
    }

    // More input: a chunk held back at a file boundary, or the next one.
    std::span<const char> chunk;
    size_t part = 0;
    if (has_held_) {
      chunk = held_;
      part = held_part_;
      has_held_ = false;
    } else {
      auto next = input_.Next();
      if (!next.ok()) {
        // The lines before the damage were handed out; an unfinished line is not.
        eof_ = true;
        error_ = next.status();
        return error_;
      }
      chunk = *next;
      if (chunk.empty()) {
        eof_ = true;
        continue;
      }
      part = input_.part_index();
      if (!started_) {
        started_ = true;
        part_ = part;
        part_path_ = input_.part_path();
      } else if (part != part_) {
        held_path_ = input_.part_path();
        if (std::optional<Line> last = pending_last_line()) {
          // The previous file ended without a newline: its last line ends there.
          held_ = chunk;
          held_part_ = part;
          has_held_ = true;
          return last;
        }
      }
    }
    if (part != part_) {
      part_ = part;
      part_path_ = held_path_;
      line_ = 0;
    }
    // Drop what was handed out, then append.
    if (start_ > 0) {
      std::memmove(buf_.data(), buf_.data() + start_, len_ - start_);
      len_ -= start_;
      scan_ -= start_;
      start_ = 0;
    }
    Reserve(len_ + chunk.size());
    std::memcpy(buf_.data() + len_, chunk.data(), chunk.size());
    len_ += chunk.size();
  }
}

}  // namespace grademl::importers::spark
