// Fuzz target: the log-rule reader (LogRuleSet::Parse, src/record/log_rules.cpp) and
// matching a step's output against the rules (LogPhaseTracker). The input is a rules file,
// optionally followed by a line "#--- log" and the output lines to match. The lines are
// matched against the user rules (when they parse) followed by the built-in ones; without
// the marker the input itself is also matched, as output. Reading must end with rules or a
// one-line error; matching must end without crashing or hanging.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz/fuzz_support.h"
#include "model/run_builder.h"
#include "record/log_rules.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace grademl;
  const fuzz::SplitInput in =
      fuzz::SplitAtMarker(std::string_view(reinterpret_cast<const char*>(data), size), "#--- log");
  StatusOr<record::LogRuleSet> parsed = record::LogRuleSet::Parse(in.first, "rules.yaml");
  record::LogRuleSet rules;
  if (parsed.ok()) {
    rules = std::move(parsed).value();
  } else {
    fuzz::CheckOneLineError(parsed.status());
  }
  rules.Append(record::LogRuleSet::BuiltIn());

  model::RunBuilder builder{model::RunInfo{}};
  const model::PhaseId run = builder.BeginPhase({.parent = 0, .name = "run", .type = "run", .start_ns = 100});
  const model::PhaseId step = builder.BeginPhase({.parent = run, .name = "step", .type = "step", .start_ns = 500});
  record::LogPhaseTracker tracker(&rules, &builder, step, "host", 1);
  std::string_view log = in.found ? in.second : in.first;
  TimeNs t = 1000;
  while (!log.empty()) {
    const size_t cut = log.find('\n');
    tracker.OnLine(t += 1000, log.substr(0, cut));
    if (cut == std::string_view::npos) break;
    log.remove_prefix(cut + 1);
  }
  tracker.Finish(t + 1000);
  (void)builder.TakeDelta(true);
  return 0;
}
