// Fuzz target: GradeML's own pipeline format (src/workflow/grademl_yaml.cpp) through
// LoadWorkflowSpec, which reads a path: the input is written to pipeline.yaml in a scratch
// directory. Loading must end (a spec or a one-line error) without crashing, hanging or
// growing without bound; a loaded spec's order must cover each step once.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "workflow/workflow_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace grademl;
  const std::string path =
      fuzz::WriteScratch("pipeline.yaml", std::string_view(reinterpret_cast<const char*>(data), size));
  fuzz::CheckLoadedSpec(workflow::LoadWorkflowSpec(path));
  return 0;
}
