// TraceInput: opens a trace file and hands out its uncompressed bytes chunk by chunk.
//
// Compression is detected by magic bytes, not by the file name: gzip (1f 8b; concatenated
// members too) through zlib, zstd (28 b5 2f fd; several frames too) through libzstd, anything
// else is read as it is. Memory is bounded: one read buffer and one output chunk, whatever the
// file's size. Errors are one line, "PATH: byte N: what", N being the offset in the
// uncompressed stream where the damage was met (a truncated or corrupt compressed stream).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace grademl::importers {

class TraceInput {
 public:
  // Opens `path` ("" or an unreadable file: an error naming it).
  static StatusOr<std::unique_ptr<TraceInput>> Open(const std::string& path);
  // Reads from memory (tests, the fuzzer): the same detection and decompression as a file;
  // `name` stands for the path in errors. The bytes must outlive the TraceInput.
  static StatusOr<std::unique_ptr<TraceInput>> FromMemory(std::string_view bytes, std::string name);
  // Reads `paths` one after the other as one stream, each decompressed on its own (the files
  // of a directory format, e.g. Spark's rolling event logs); errors name the file and the
  // offset inside it; `name` stands for the whole.
  static StatusOr<std::unique_ptr<TraceInput>> OpenFiles(std::vector<std::string> paths, std::string name);

  virtual ~TraceInput() = default;

  // The next chunk of uncompressed bytes (valid until the next call); an empty span at the
  // end of the input. An error ("PATH: byte N: what") is final.
  virtual StatusOr<std::span<const char>> Next() = 0;
  // "none", "gzip" or "zstd".
  virtual std::string_view compression() const = 0;
  const std::string& path() const { return path_; }
  // Uncompressed bytes handed out so far.
  uint64_t offset() const { return offset_; }
  // For OpenFiles: which file the last chunk came from (its index in the list, and its path),
  // so that a reader can number lines per file and name the file in its errors. A single
  // input is its own only part: 0 and path().
  virtual size_t part_index() const { return 0; }
  virtual const std::string& part_path() const { return path_; }
  // For OpenFiles: every file, in the order read; empty for a single input.
  virtual std::span<const std::string> parts() const { return {}; }

 protected:
  explicit TraceInput(std::string path) : path_(std::move(path)) {}
  std::string path_;
  uint64_t offset_ = 0;
};

// The compression the first bytes of a file announce: "gzip", "zstd" or "none" (too few
// bytes count as none).
std::string_view CompressionOf(std::string_view first_bytes);

// Up to `max` uncompressed bytes from the start of `input`, for sniffing the format. Stops
// early at the end or at an error, which goes to `*error` when given (what came before it is
// returned).
std::string ReadHead(TraceInput& input, size_t max, Status* error = nullptr);

}  // namespace grademl::importers
