#include "report/run_list.h"

#include <gtest/gtest.h>

#include "golden.h"
#include "sample_runs.h"

namespace grademl::report {
namespace {

using testing::At;

std::vector<model::RunInfo> SomeRuns() {
  std::vector<model::RunInfo> runs(5);
  runs[0] = {.id = 1, .uuid = "u1", .command = {"python3", "train.py"}, .start_ns = At(0), .end_ns = At(125),
             .exit_code = 0, .complete = true};
  runs[1] = {.id = 2, .uuid = "u2", .command = {"sh", "-c", "exit 3"}, .start_ns = At(200), .end_ns = At(200.25),
             .exit_code = 3, .complete = true};
  runs[2] = {.id = 3, .uuid = "u3", .command = {"sleep", "1000"}, .start_ns = At(300), .end_ns = At(310),
             .exit_signal = 15, .complete = true};
  runs[3] = {.id = 4, .uuid = "u4", .command = {"make", "-j4"}, .start_ns = At(400), .complete = false};
  runs[4] = {.id = 10, .uuid = "u10", .command = {"no-such-program", std::string(100, 'x')}, .start_ns = At(500),
             .end_ns = At(500.001), .complete = true, .error = "execvp: No such file or directory"};
  return runs;
}

TEST(RunListTest, TableGolden) {
  testing::UseUtc();
  testing::ExpectMatchesGolden(RenderRunList(SomeRuns()), "run_list.txt");
}

TEST(RunListTest, JsonGolden) {
  testing::ExpectMatchesGolden(RenderRunListJson(SomeRuns()).dump(2) + "\n", "run_list.json");
}

TEST(RunListTest, StatusWords) {
  testing::UseUtc();
  std::string table = RenderRunList(SomeRuns());
  for (const char* word : {"ok", "exit 3", "signal SIGTERM", "incomplete", "failed to start"}) {
    EXPECT_NE(table.find(word), std::string::npos) << word;
  }
  EXPECT_NE(table.find(std::string(60, 'x') + "…"), std::string::npos);
  EXPECT_EQ(table.find(std::string(100, 'x')), std::string::npos);
}

TEST(RunListTest, Json) {
  nlohmann::json j = RenderRunListJson(SomeRuns());
  EXPECT_EQ(j["schema"], "grademl.runs/1");
  ASSERT_EQ(j["runs"].size(), 5u);
  EXPECT_EQ(j["runs"][0]["command"], (nlohmann::json{"python3", "train.py"}));
  EXPECT_EQ(j["runs"][2]["exit_signal"], 15);
  EXPECT_TRUE(j["runs"][2]["exit_code"].is_null());
  EXPECT_TRUE(j["runs"][3]["end_ns"].is_null());
  EXPECT_TRUE(j["runs"][3]["duration_s"].is_null());
  EXPECT_EQ(j["runs"][0]["duration_s"], 125.0);
  EXPECT_EQ(j["runs"][4]["status"], "failed to start");
}

// The owner column: the name as stored, "-" when unknown, never a raw control character (a
// PostgreSQL role name is the user's to choose); --json has it as a string or null.
TEST(RunListTest, OwnersAreShownEscaped) {
  testing::UseUtc();
  std::vector<model::RunInfo> runs = SomeRuns();
  runs[0].owner = "alice";
  runs[1].owner = "ev\x1b[31mil";
  std::string table = RenderRunList(runs);
  EXPECT_NE(table.find("  alice  "), std::string::npos) << table;
  EXPECT_EQ(table.find('\x1b'), std::string::npos) << table;
  EXPECT_NE(table.find("  -  "), std::string::npos) << table;
  nlohmann::json j = RenderRunListJson(runs);
  EXPECT_EQ(j["runs"][0]["owner"], "alice");
  EXPECT_TRUE(j["runs"][2]["owner"].is_null());
}

TEST(RunListTest, Empty) {
  EXPECT_EQ(RenderRunList({}), "No runs recorded.\n");
  EXPECT_EQ(RenderRunListJson({}), (nlohmann::json{{"schema", "grademl.runs/1"}, {"runs", nlohmann::json::array()}}));
}

}  // namespace
}  // namespace grademl::report
