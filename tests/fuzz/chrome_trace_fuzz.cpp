// libFuzzer target for the streaming Chrome-trace reader (src/importers/chrome_json) and the
// decompression in front of it (src/importers/trace_input): the input is a trace file's
// bytes (plain, gzip or zstd, detected by magic). It is read twice: through
// TraceInput::FromMemory, and (when uncompressed) in small chunks whose size comes from the
// input's length, so that every chunk boundary a real file can have is reached. Both reads
// must end (events or a one-line "PATH: byte N: what" error) and agree: chunking must not
// change which events are delivered or the error. Offsets must grow and stay inside the input.
// Seeds: tests/fuzz/corpus/chrome_trace (tests/fuzz/make_chrome_trace_seeds.py from
// tests/data/chrome_traces).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "importers/chrome_json/json_event_reader.h"
#include "importers/trace_input.h"
#include "importers/chunked_trace_input.h"

namespace {

using namespace grademl;
using namespace grademl::importers;

struct Outcome {
  std::vector<uint64_t> offsets;
  std::string error;
  bool ok = false;
};

Outcome ReadAll(TraceInput& input, uint64_t limit) {
  Outcome out;
  chrome_json::ReadOptions options;
  options.max_event_bytes = 1 << 16;  // bounded memory for the fuzzer as for real files
  auto header = chrome_json::ReadChromeTrace(
      input,
      [&](const chrome_json::RawTraceEvent& ev) {
        if (!out.offsets.empty() && ev.offset <= out.offsets.back()) std::abort();  // offsets grow
        if (limit != 0 && ev.offset >= limit) std::abort();                        // inside the input
        // Touch every view (ASan checks they point at live memory).
        size_t sum = ev.name.size() + ev.cat.size() + ev.pid_str.size() + ev.tid_str.size() + ev.id.size();
        for (const auto& [k, v] : ev.args) sum += k.size() + v.s.size();
        for (char c : ev.name) sum += static_cast<unsigned char>(c);
        if (sum == 0xFFFFFFFFFFFFull) std::abort();
        out.offsets.push_back(ev.offset);
        return Status::Ok();
      },
      options);
  out.ok = header.ok();
  if (!header.ok()) {
    fuzz::CheckOneLineError(header.status());
    out.error = header.status().message();
  } else if (header->events != static_cast<int64_t>(out.offsets.size())) {
    std::abort();
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)chrome_json::LooksLikeChromeTrace(bytes.substr(0, 4096));
  (void)chrome_json::DecimalToInt64(bytes.substr(0, 64), 3);

  auto input = TraceInput::FromMemory(bytes, "fuzz.json");
  if (!input.ok()) {
    fuzz::CheckOneLineError(input.status());
    return 0;
  }
  bool plain = (*input)->compression() == "none";
  Outcome whole = ReadAll(**input, plain ? size : 0);
  if (plain) {
    testing::ChunkedTraceInput chunked(std::string(bytes), 1 + size % 61, "fuzz.json");
    Outcome pieces = ReadAll(chunked, size);
    if (pieces.offsets != whole.offsets || pieces.ok != whole.ok || pieces.error != whole.error) std::abort();
  }
  return 0;
}
