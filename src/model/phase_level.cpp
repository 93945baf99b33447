#include "model/phase_level.h"

#include <array>

namespace grademl::model {

PhaseLevel LevelOfType(std::string_view t) {
  if (t == kPhaseTypeRun) return PhaseLevel::kWorkflow;
  if (t == "step") return PhaseLevel::kStep;
  if (t == kPhaseTypeProcess || t == "host" || t == "dask_worker") return PhaseLevel::kProcess;
  if (t == "forward" || t == "backward" || t == "loss" || t == "optimizer_step" || t == "module") {
    return PhaseLevel::kLayer;
  }
  if (t == "op" || t == "runtime" || t == "collective") return PhaseLevel::kOperator;
  if (t == "kernel" || t == "memcpy" || t == "memset" || t == "sync") return PhaseLevel::kKernel;
  return PhaseLevel::kFramework;
}

namespace {
constexpr std::array<std::string_view, 7> kPhaseLevelNameList = {"workflow", "step",     "process", "framework",
                                                                  "layer",    "operator", "kernel"};
}  // namespace

std::string_view PhaseLevelName(PhaseLevel level) { return kPhaseLevelNameList[static_cast<size_t>(level)]; }

std::optional<PhaseLevel> ParsePhaseLevel(std::string_view name) {
  for (size_t i = 0; i < kPhaseLevelNameList.size(); ++i) {
    if (kPhaseLevelNameList[i] == name) return static_cast<PhaseLevel>(i);
  }
  return std::nullopt;
}

}  // namespace grademl::model
