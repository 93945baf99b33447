// The Dask variables grademl adds to a launched command's environment (record/dask_env.h):
// grademl's plugin is appended to the user's own preload list, never replacing it. Each
// expected value is what Python's ast.literal_eval must read back (checked by hand).
#include <gtest/gtest.h>

#include "record/dask_env.h"

namespace grademl::record {
namespace {

TEST(DaskEnvTest, MergesTheUsersPreloads) {
  EXPECT_EQ(MergeDaskPreload(std::nullopt), "['grademl.dask_plugin']");
  EXPECT_EQ(MergeDaskPreload(""), "['grademl.dask_plugin']");
  EXPECT_EQ(MergeDaskPreload("[]"), "['grademl.dask_plugin']");
  EXPECT_EQ(MergeDaskPreload("mymod"), "['mymod', 'grademl.dask_plugin']");
  EXPECT_EQ(MergeDaskPreload("'mymod'"), "['mymod', 'grademl.dask_plugin']");
  EXPECT_EQ(MergeDaskPreload("\"a.py\""), "[\"a.py\", 'grademl.dask_plugin']");
  EXPECT_EQ(MergeDaskPreload("['a', 'b']"), "['a', 'b', 'grademl.dask_plugin']");
  EXPECT_EQ(MergeDaskPreload(" ['a',] "), "['a', 'grademl.dask_plugin']");
  EXPECT_EQ(MergeDaskPreload("('a',)"), "['a', 'grademl.dask_plugin']");
  // Already there (a nested grademl run): unchanged.
  EXPECT_EQ(MergeDaskPreload("['a', 'grademl.dask_plugin']"), "['a', 'grademl.dask_plugin']");
  // A script's text with quotes and a newline (Dask runs a preload with a space as code).
  EXPECT_EQ(MergeDaskPreload("print('hi')\nx = 1"), "['print(\\'hi\\')\\nx = 1', 'grademl.dask_plugin']");
}

TEST(DaskEnvTest, PerPreloadArgvGetsAnEntry) {
  EXPECT_EQ(MergeDaskPreloadArgv("[['--x', '1']]"), "[['--x', '1'], []]");
  EXPECT_EQ(MergeDaskPreloadArgv("[('--x',), ('--y',)]"), "[('--x',), ('--y',), []]");
  // One argv for every preload, or none: unchanged.
  EXPECT_EQ(MergeDaskPreloadArgv("['--x']"), "['--x']");
  EXPECT_EQ(MergeDaskPreloadArgv("[]"), "[]");
}

TEST(DaskEnvTest, TheMarkerSaysWhetherTheYamlsPreloadsWereReplaced) {
  using Env = std::vector<std::pair<std::string, std::string>>;
  // Nothing of the user's: grademl's list, and an empty argv (a per-preload argv in the
  // user's YAML cannot mismatch it); the Python side restores the YAML's.
  EXPECT_EQ(DaskEnvironment(std::nullopt, std::nullopt),
            (Env{{kDaskPreloadVar, "['grademl.dask_plugin']"},
                 {kDaskPreloadReplacedVar, "1"},
                 {kDaskPreloadArgvVar, "[]"},
                 {kDaskArgvReplacedVar, "1"}}));
  EXPECT_EQ(DaskEnvironment("mod", "[['--a']]"), (Env{{kDaskPreloadVar, "['mod', 'grademl.dask_plugin']"},
                                                      {kDaskPreloadArgvVar, "[['--a'], []]"},
                                                      {kDaskPreloadReplacedVar, "0"},
                                                      {kDaskArgvReplacedVar, "0"}}));
  EXPECT_EQ(DaskEnvironment("mod", std::nullopt), (Env{{kDaskPreloadVar, "['mod', 'grademl.dask_plugin']"},
                                                       {kDaskPreloadReplacedVar, "0"},
                                                       {kDaskArgvReplacedVar, "0"}}));
  // The user's argv without a preload of theirs is left alone (grademl/auto/dask.py pads it).
  EXPECT_EQ(DaskEnvironment(std::nullopt, "[['--a']]"),
            (Env{{kDaskPreloadVar, "['grademl.dask_plugin']"}, {kDaskPreloadReplacedVar, "1"}, {kDaskArgvReplacedVar, "0"}}));
}

TEST(DaskEnvTest, PythonStringLiterals) {
  EXPECT_EQ(PythonStringLiteral("a\\b'c\td\x01"), "'a\\\\b\\'c\\td\\x01'");
  EXPECT_EQ(PythonStringLiteral("é"), "'é'");
}

}  // namespace
}  // namespace grademl::record
