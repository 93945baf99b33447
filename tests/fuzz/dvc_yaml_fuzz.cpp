// Fuzz target: DVC's dvc.yaml (src/workflow/dvc_yaml.cpp) through LoadWorkflowSpec. The
// input is dvc.yaml, optionally followed by a line "#--- params.yaml" and the params.yaml
// written beside it (interpolation, `vars`, foreach/matrix read it). Loading must end (a
// spec or a one-line error) without crashing, hanging or growing without bound.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_support.h"
#include "workflow/workflow_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace grademl;
  const fuzz::SplitInput in =
      fuzz::SplitAtMarker(std::string_view(reinterpret_cast<const char*>(data), size), "#--- params.yaml");
  if (in.found) {
    fuzz::WriteScratch("params.yaml", in.second);
  } else {
    fuzz::RemoveScratch("params.yaml");
  }
  const std::string path = fuzz::WriteScratch("dvc.yaml", in.first);
  fuzz::CheckLoadedSpec(workflow::LoadWorkflowSpec(path));
  return 0;
}
