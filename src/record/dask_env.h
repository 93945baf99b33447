// DaskEnvironment: the variables `grademl run` adds to a launched command's environment so
// that every Dask distributed scheduler it starts loads grademl's scheduler plugin
// (python/grademl/dask_plugin.py), with no change to the program (docs/engines.md, "Dask").
//
// Dask reads DASK_DISTRIBUTED__SCHEDULER__PRELOAD as a Python literal (ast.literal_eval,
// else the plain string). grademl never replaces a user's value: it appends its module to
// the user's list (or makes a list of the user's single preload and its own), and appends an
// empty argv to a per-preload DASK_DISTRIBUTED__SCHEDULER__PRELOAD_ARGV so that the lengths
// still match. When the user had no such variable, grademl's replaces the preloads that the
// user's YAML configuration may list; GRADEML_DASK_PRELOAD_REPLACED=1 tells the Python side
// (grademl/auto/dask.py) to put those back. grademl then also sets the argv variable to []
// (when the user has none), so that a per-preload argv in the YAML can never mismatch the
// list Dask sees, and says so with GRADEML_DASK_ARGV_REPLACED=1: the Python side restores
// the YAML's argv with its preloads.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace grademl::record {

inline constexpr char kDaskPreloadVar[] = "DASK_DISTRIBUTED__SCHEDULER__PRELOAD";
inline constexpr char kDaskPreloadArgvVar[] = "DASK_DISTRIBUTED__SCHEDULER__PRELOAD_ARGV";
inline constexpr char kDaskPreloadReplacedVar[] = "GRADEML_DASK_PRELOAD_REPLACED";
inline constexpr char kDaskArgvReplacedVar[] = "GRADEML_DASK_ARGV_REPLACED";
inline constexpr char kDaskPluginModule[] = "grademl.dask_plugin";

// The preload value with grademl's module added to `user` (nullopt: the user has none).
std::string MergeDaskPreload(std::optional<std::string_view> user);
// The user's per-preload argv (a list of lists) with an empty entry for grademl's module;
// any other value is returned as it is.
std::string MergeDaskPreloadArgv(std::string_view user);

// The variables to set, given the user's values of the two Dask variables (nullopt: unset).
std::vector<std::pair<std::string, std::string>> DaskEnvironment(std::optional<std::string_view> user_preload,
                                                                 std::optional<std::string_view> user_argv);

// A Python string literal for `text` (single quotes; backslash, quote and control bytes
// escaped), as ast.literal_eval reads it back.
std::string PythonStringLiteral(std::string_view text);

}  // namespace grademl::record
