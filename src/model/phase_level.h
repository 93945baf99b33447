// The level of a phase in the stack it ran in (XSP's "leveled" view of a run, docs/analysis.md,
// "Levels"): from the whole workflow down to the GPU kernels, by the phase's leaf type.
//
//   workflow   the run's root (type "run")
//   step       a workflow step ("step")
//   process    a process ("process"), a host's part ("host"), a Dask worker ("dask_worker")
//   framework  what a framework or the user delimits: epochs, iterations, waits for data
//              ("epoch", "iteration", "data_wait"), Spark applications, jobs, stages and tasks,
//              Dask tasks, annotations, and every type not listed here (user phases)
//   layer      a model's layers and training steps' parts ("forward", "backward", "loss",
//              "optimizer_step", "module")
//   operator   framework operators ("op", e.g. ATen's addmm) and the runtime calls they make
//              ("runtime": cudaLaunchKernel, ...), collectives ("collective": all_reduce, ...)
//   kernel     device activity from imported traces ("kernel", "memcpy", "memset", "sync")
#pragma once

#include <optional>
#include <string_view>

#include "model/run.h"

namespace grademl::model {

enum class PhaseLevel { kWorkflow, kStep, kProcess, kFramework, kLayer, kOperator, kKernel };

// The level of a phase type's last element ("forward" -> kLayer); unknown types are kFramework.
PhaseLevel LevelOfType(std::string_view leaf_type);
inline PhaseLevel LevelOf(const Phase& phase) { return LevelOfType(phase.leaf_type()); }

// "workflow", "step", "process", "framework", "layer", "operator", "kernel".
std::string_view PhaseLevelName(PhaseLevel level);
// The inverse of PhaseLevelName; nullopt for any other text.
std::optional<PhaseLevel> ParsePhaseLevel(std::string_view name);
// The allowed names, comma-separated, from the top down (for error messages and --help).
inline constexpr std::string_view kPhaseLevelNames = "workflow, step, process, framework, layer, operator, kernel";

}  // namespace grademl::model
