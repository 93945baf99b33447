// Fuzz target: the redactor (model/redactor.h). The input's first line is a user pattern
// (RE2; an invalid one must be a one-line error), the rest a text redacted as a log line, as
// an argv (split at spaces) and as a tag value. Redaction must end without crashing or
// hanging, never grow a text by more than "[redacted]" per secret, leave a text without a
// secret untouched, and be idempotent (a redacted text redacts to itself, counting 0).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "model/redactor.h"

namespace {
void Check(bool ok) {
  if (!ok) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace grademl;
  std::string_view input(reinterpret_cast<const char*>(data), size);
  size_t nl = input.find('\n');
  std::string pattern(input.substr(0, nl == std::string_view::npos ? input.size() : nl));
  std::string text(nl == std::string_view::npos ? std::string_view() : input.substr(nl + 1));
  std::shared_ptr<const model::Redactor> redactor = model::Redactor::BuiltIn();
  auto made = model::Redactor::Make({pattern});
  if (made.ok()) {
    redactor = *made;
  } else {
    fuzz::CheckOneLineError(made.status());
  }
  for (const auto& r : {model::Redactor::BuiltIn(), redactor}) {
    std::string once = text;
    int n = r->Redact(once);
    Check(n >= 0);
    Check(n > 0 || once == text);
    Check(once.size() <= text.size() + static_cast<size_t>(n) * model::kRedacted.size());
    if (r == model::Redactor::BuiltIn()) {
      std::string twice = once;
      Check(r->Redact(twice) == 0 && twice == once);
    }
    std::vector<std::string> argv;
    std::string_view rest = text;
    while (!rest.empty() && argv.size() < 64) {
      size_t sp = rest.find(' ');
      argv.emplace_back(rest.substr(0, sp));
      rest = sp == std::string_view::npos ? std::string_view() : rest.substr(sp + 1);
    }
    Check(r->RedactArgv(argv) >= 0);
    std::string value = text;
    Check(r->RedactTag(pattern, value) >= 0);
  }
  return 0;
}
