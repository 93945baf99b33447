// libFuzzer target for the run delta codec (src/model/delta_codec.h), which the per-host
// agent uses to spool deltas to disk: arbitrary bytes are decoded as a spooled delta.
// Checks: a rejected input ends with a one-line kCorrupt error that names a byte offset; an
// accepted input is canonical (re-encoding it gives the input back, byte for byte), and that
// re-encoding decodes again to the same bytes (encode(decode(x)) is a fixed point).
// Seeds (tests/fuzz/corpus/delta_codec) are the codec's own output, written by
// DeltaCodecTest.FuzzSeedsAreCurrent (GRADEML_WRITE_DELTA_CODEC_SEEDS=1).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "model/delta_codec.h"

namespace {

[[noreturn]] void DeltaCodecFuzzFail(const char* what, const std::string& detail) {
  std::fprintf(stderr, "delta_codec_fuzz: %s: %s\n", what, detail.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  grademl::StatusOr<grademl::model::RunDelta> delta = grademl::model::DecodeRunDelta(input);
  if (!delta.ok()) {
    const grademl::Status status = delta.status();
    const std::string& m = status.message();
    if (status.code() != grademl::StatusCode::kCorrupt) DeltaCodecFuzzFail("error is not kCorrupt", m);
    if (m.empty() || m.find('\n') != std::string::npos || m.find('\r') != std::string::npos)
      DeltaCodecFuzzFail("error is not one line", m);
    if (m.rfind("run delta: ", 0) != 0 || m.find("at byte ") == std::string::npos)
      DeltaCodecFuzzFail("error does not name a byte offset", m);
    return 0;
  }
  std::string again = grademl::model::EncodeRunDelta(*delta);
  if (again != input) {
    DeltaCodecFuzzFail("accepted input is not canonical",
                       std::to_string(size) + " bytes in, " + std::to_string(again.size()) + " re-encoded");
  }
  grademl::StatusOr<grademl::model::RunDelta> back = grademl::model::DecodeRunDelta(again);
  if (!back.ok()) DeltaCodecFuzzFail("re-encoding does not decode", back.status().message());
  if (grademl::model::EncodeRunDelta(*back) != again) DeltaCodecFuzzFail("encode(decode(x)) is not a fixed point", "");
  return 0;
}
