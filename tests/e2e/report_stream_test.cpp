// End-to-end: `grademl report --json` of a large run streams. A run of 100,000 phases
// recorded through the Python API is reported whole (every phase in the output, in order,
// the output ending as nlohmann's dump does), and the report's peak RSS (the kernel's
// ru_maxrss of the process) stays below the size of the JSON it wrote: a report holding its
// output, or a DOM of it (about ten times the output), could not.
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "e2e/command.h"

extern char** environ;

namespace grademl::testing {
namespace {

TEST(ReportStreamE2E, AHundredThousandPhasesStreamInLessMemoryThanTheirJson) {
  std::string dir = FreshDir("report_stream");
  std::string db = dir + "/g.db";
  std::ofstream(dir + "/phases.py") << R"(import grademl, time
for i in range(100000):
    with grademl.phase("p", i=i):
        pass
    if i % 5000 == 4999:
        time.sleep(0.05)  # lets the store keep up: no phase is dropped
)";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--", "/usr/bin/python3",
                                dir + "/phases.py"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(r.err.find("dropped"), std::string::npos) << r.err;

  std::string out_path = dir + "/report.json";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::string binary = GrademlBinary();
  std::string store = TestStoreLocation(db);
  std::vector<std::string> args = {binary, "--db", store, "report", "--json"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, binary.c_str(), &actions, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  rusage ru{};
  ASSERT_EQ(wait4(pid, &status, 0, &ru), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;

  std::string text = ReadFile(out_path);
  ASSERT_GT(text.size(), 50u << 20) << "a phase is about 1.2 KB of JSON";
  // Every phase, in order of its tag (the recording order), with the output's last bytes.
  size_t count = 0, at = 0;
  int64_t last = -1;
  bool ordered = true;
  const std::string key = "\"i\": \"";
  while ((at = text.find(key, at)) != std::string::npos) {
    at += key.size();
    int64_t i = std::strtoll(text.c_str() + at + (text[at] == '#' ? 1 : 0), nullptr, 10);
    ordered = ordered && i == last + 1;
    last = i;
    ++count;
  }
  EXPECT_EQ(count, 100000u);
  EXPECT_TRUE(ordered);
  EXPECT_EQ(text.substr(text.size() - 3), "\n}\n");
  double peak = static_cast<double>(ru.ru_maxrss) * 1024;
  EXPECT_LT(peak, 0.9 * static_cast<double>(text.size()))
      << "report --json peaked at " << peak / (1 << 20) << " MiB for " << text.size() / (1 << 20) << " MiB of JSON";
}

}  // namespace
}  // namespace grademl::testing
