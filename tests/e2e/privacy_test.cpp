// End-to-end tests of redaction (docs/privacy.md): secrets given to a real `grademl run` (a
// --password flag, an API_KEY in the environment, a workflow step printing token=..., a tag
// from the Python API, an imported trace's names and args) reach neither the store file nor
// anything made from it (report, report --json, the HTML page, the Perfetto export), while the
// workload's own output to its terminal keeps them; --no-redact keeps them in the store;
// --redact adds patterns; a bad pattern is a one-line usage error. And outside processes of
// another OS user (made with useradd here) keep no command line.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/command.h"

namespace grademl::testing {
namespace {

using nlohmann::json;

// Everything a reader of the store can get of its latest run, as one text: the store's files,
// report, report --json, report --html, export --perfetto.
std::string EverythingFromTheStore(const std::string& dir, const std::string& db) {
  std::string all;
  for (const char* suffix : {"", "-wal", "-shm"}) all += ReadFile(db + suffix);
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "report"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  all += r.out + r.err;
  r = RunCommand({GrademlBinary(), "--db", db, "report", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  all += r.out;
  r = RunCommand({GrademlBinary(), "--db", db, "report", "--html", dir + "/page.html"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  all += ReadFile(dir + "/page.html");
  r = RunCommand({GrademlBinary(), "--db", db, "export", "--perfetto", dir + "/trace.json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  all += ReadFile(dir + "/trace.json");
  return all;
}

int64_t SecretsRedactedOf(const std::string& db) {
  json report = ReportJson(db);
  return report["run"]["secrets_redacted"].get<int64_t>();
}

TEST(PrivacyE2E, ACommandLineAndItsEnvironmentNeverReachTheStore) {
  std::string dir = FreshDir("privacy_command");
  std::string db = dir + "/g.db";
  // The secrets in the command's arguments (both flag forms) and in grademl's environment;
  // the command prints one of them on its own output.
  CommandResult r = RunCommand({"/usr/bin/env", "API_KEY=S3CRET_ENV_4", GrademlBinary(), "--db", db, "run",
                                "--no-report", "--", "/bin/sh", "-c", "echo \"$1 token=S3CRET_OUT_1\"; echo \"$API_KEY\"",
                                "sh", "--password=S3CRET_PASS_2", "--api-key", "S3CRET_KEY_3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The workload's own output is its own: unchanged.
  EXPECT_NE(r.out.find("--password=S3CRET_PASS_2 token=S3CRET_OUT_1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("S3CRET_ENV_4"), std::string::npos) << r.out;
  std::string all = EverythingFromTheStore(dir, db);
  EXPECT_EQ(all.find("S3CRET"), std::string::npos) << all.substr(all.find("S3CRET") - 200, 400);
  EXPECT_NE(all.find("--password=[redacted]"), std::string::npos);
  EXPECT_NE(all.find("--api-key"), std::string::npos);
  // At least the two arguments (the run's command and the process phase's name each have them).
  EXPECT_GE(SecretsRedactedOf(db), 2);
}

TEST(PrivacyE2E, AStepsLogLinesAndATagFromThePythonApiAreRedacted) {
  std::string dir = FreshDir("privacy_step");
  std::string db = dir + "/g.db";
  std::ofstream(dir + "/tagger.py") << "import grademl\nwith grademl.phase('train', api_key='S3CRET_TAG_5'):\n"
                                       "    grademl.tag('note', 'login password=S3CRET_TAG_6')\n";
  std::ofstream(dir + "/pipeline.yaml") << "steps:\n  talk:\n    cmd: echo token=S3CRET_LOG_7; echo ok\n"
                                           "  tag:\n    cmd: /usr/bin/python3 tagger.py\n";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", dir + "/pipeline.yaml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string all = EverythingFromTheStore(dir, db);
  EXPECT_EQ(all.find("S3CRET"), std::string::npos) << all.substr(all.find("S3CRET") - 200, 400);
  EXPECT_NE(all.find("token=[redacted]"), std::string::npos);
  json report = ReportJson(db);
  bool tagged = false;
  for (const json& p : report["phases"]) {
    if (p["name"] == "train") {
      tagged = true;
      EXPECT_EQ(p["tags"]["api_key"], "[redacted]");
      EXPECT_EQ(p["tags"]["note"], "login password=[redacted]");
    }
  }
  EXPECT_TRUE(tagged) << "no phase 'train': is Debian's python3 with the grademl package usable?";
  EXPECT_GE(report["run"]["secrets_redacted"].get<int64_t>(), 3);
}

TEST(PrivacyE2E, AnImportedTracesNamesAndArgsAreRedacted) {
  std::string dir = FreshDir("privacy_import");
  std::string db = dir + "/g.db";
  std::ofstream(dir + "/trace.json")
      << R"({"traceEvents": [{"name": "GET https://u:S3CRET_URL_8@host/x", "ph": "X", "ts": 1, "dur": 5, "pid": 1,)"
      << R"( "tid": 1, "args": {"auth_token": "S3CRET_ARG_9", "n": 3}}]})";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "import", dir + "/trace.json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string all = EverythingFromTheStore(dir, db);
  EXPECT_EQ(all.find("S3CRET"), std::string::npos) << all.substr(all.find("S3CRET") - 200, 400);
  EXPECT_NE(all.find("https://u:[redacted]@host/x"), std::string::npos);
  EXPECT_GE(SecretsRedactedOf(db), 1);  // the URL (args that the importer keeps as tags are redacted too)
}

TEST(PrivacyE2E, NoRedactKeepsTextsAndRedactAddsPatterns) {
  std::string dir = FreshDir("privacy_flags");
  std::string db = dir + "/g.db";
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--no-redact", "--", "/bin/echo",
                                "--password=S3CRET_KEPT"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(ReadFile(db).find("S3CRET_KEPT"), std::string::npos);
  EXPECT_EQ(SecretsRedactedOf(db), 0);
  r = RunCommand({GrademlBinary(), "--db", db, "run", "--no-report", "--redact", "proj-[0-9]+", "--redact",
                  "customer=(\\w+)", "--", "/bin/echo", "proj-1234", "customer=acme", "--lr", "0.1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("proj-1234 customer=acme"), std::string::npos) << r.out;  // the terminal's own
  json report = ReportJson(db);
  EXPECT_EQ(report["run"]["command"], json({"/bin/echo", "[redacted]", "customer=[redacted]", "--lr", "0.1"}));
  // At least the run's command and the process phase's name, each with 2 (a text the recorder
  // writes again, as a process phase's name when it execs, counts again).
  EXPECT_GE(report["run"]["secrets_redacted"].get<int>(), 2 * 2) << report["run"].dump();
  // A bad pattern is a usage error, before anything runs.
  ExpectErrors({GrademlBinary(), "--db", db, "run"},
               {{{"--no-report", "--redact", "(unclosed", "--", "/bin/true"}, 2},
                {{"--no-redact", "--redact", "x", "--", "/bin/true"}, 2}});
  ExpectErrors({GrademlBinary(), "--db", db, "import"}, {{{"--redact", "(", dir + "/none.json"}, 2}});
}

// A user made for the test (useradd), removed when it ends, even when it fails.
class TestUser {
 public:
  TestUser() : name_("gm_redact_" + std::to_string(getpid())) {
    CommandResult r = RunCommand({"/usr/sbin/useradd", "--no-create-home", "--shell", "/bin/sh", name_});
    ok_ = r.exit_code == 0;
    error_ = r.err;
  }
  ~TestUser() {
    if (ok_) RunCommand({"/usr/sbin/userdel", name_});
  }
  bool ok() const { return ok_; }
  const std::string& name() const { return name_; }
  const std::string& error() const { return error_; }

 private:
  std::string name_;
  bool ok_ = false;
  std::string error_;
};

// A shell loop burning about `iterations` of CPU as `user` (via setpriv), its $0 `arg`.
pid_t StartBurner(const std::string& user, const std::string& arg, int iterations) {
  std::string loop = "i=0; while [ $i -lt " + std::to_string(iterations) + " ]; do i=$((i+1)); done";
  if (user.empty()) return StartCommand({"/bin/sh", "-c", loop, arg});
  return StartCommand({"/usr/bin/setpriv", "--reuid=" + user, "--regid=" + user, "--init-groups", "/bin/sh", "-c",
                       loop, arg});
}

void CheckOutsideProcessesOfAnotherUser(bool details) {
  if (getuid() != 0) SKIP_OR_FAIL_IN_CI("needs root to make a second OS user");
  TestUser colleague;
  ASSERT_TRUE(colleague.ok()) << colleague.error();
  std::string dir = FreshDir(details ? "privacy_outside_details" : "privacy_outside");
  std::filesystem::permissions(dir, std::filesystem::perms::all);
  std::string db = dir + "/g.db";
  // The run waits until both burners are done, so that their whole lives lie inside it.
  std::string script = "touch " + dir + "/started; i=0; while [ ! -e " + dir + "/done ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done";
  std::vector<std::string> argv = {GrademlBinary(), "--db", db, "run", "--no-report"};
  if (details) argv.push_back("--outside-details");
  argv.insert(argv.end(), {"--", "/bin/sh", "-c", script});
  pid_t grademl = StartCommand(argv);
  for (int i = 0; i < 600 && !std::filesystem::exists(dir + "/started"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  // Enough CPU each (a few seconds of a loaded core) to be among the 5 outside processes that used most.
  pid_t theirs = StartBurner(colleague.name(), "their-S3CRET-arg", 3000000);
  pid_t mine = StartBurner("", "my-own-arg", 3000000);
  EXPECT_EQ(WaitCommand(theirs), 0);
  EXPECT_EQ(WaitCommand(mine), 0);
  std::ofstream(dir + "/done") << "";
  ASSERT_EQ(WaitCommand(grademl), 0);
  json report = ReportJson(db);
  ASSERT_FALSE(report["hosts"].empty());
  const json& top = report["hosts"][0]["other_processes"]["top"];
  const json* their_entry = nullptr;
  const json* my_entry = nullptr;
  for (const json& p : top) {
    if (p["pid"] == theirs) their_entry = &p;
    if (p["pid"] == mine) my_entry = &p;
  }
  ASSERT_NE(their_entry, nullptr) << top.dump();
  ASSERT_NE(my_entry, nullptr) << top.dump();
  EXPECT_EQ((*their_entry)["user"], colleague.name());
  EXPECT_EQ((*my_entry)["user"], "root");
  EXPECT_NE((*my_entry)["command"].get<std::string>().find("my-own-arg"), std::string::npos);
  std::string all = EverythingFromTheStore(dir, db);
  if (details) {
    EXPECT_NE((*their_entry)["command"].get<std::string>().find("their-S3CRET-arg"), std::string::npos);
  } else {
    std::string sh = std::filesystem::canonical("/bin/sh").filename().string();
    EXPECT_EQ((*their_entry)["command"], sh);
    EXPECT_EQ(all.find("their-S3CRET-arg"), std::string::npos);
  }
}

TEST(PrivacyE2E, AnotherUsersProcessesKeepOnlyTheirExecutableAndUser) { CheckOutsideProcessesOfAnotherUser(false); }
TEST(PrivacyE2E, OutsideDetailsKeepsTheirCommandLines) { CheckOutsideProcessesOfAnotherUser(true); }

}  // namespace
}  // namespace grademl::testing
