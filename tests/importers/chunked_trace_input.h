// A TraceInput over bytes in memory handed out `chunk` bytes at a time, so that tests and the
// fuzzer can put chunk boundaries anywhere (inside a token, an escape, a multi-byte character).
#pragma once

#include <algorithm>
#include <span>
#include <string>

#include "importers/trace_input.h"

namespace grademl::importers::testing {

class ChunkedTraceInput final : public TraceInput {
 public:
  ChunkedTraceInput(std::string data, size_t chunk, std::string name = "chunked.json")
      : TraceInput(std::move(name)), data_(std::move(data)), chunk_(chunk) {}
  StatusOr<std::span<const char>> Next() override {
    size_t n = std::min(chunk_, data_.size() - at_);
    std::span<const char> out(data_.data() + at_, n);
    at_ += n;
    offset_ += n;
    return out;
  }
  std::string_view compression() const override { return "none"; }

 private:
  std::string data_;
  size_t chunk_;
  size_t at_ = 0;
};

}  // namespace grademl::importers::testing
