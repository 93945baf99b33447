#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include <gtest/gtest.h>

#include "e2e/command.h"
#include "pg_test_server.h"

namespace grademl::testing {

static int DecodeStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// GRADEML_TEST_BACKEND=postgresql (`make test-postgres`): every `--db PATH` a test passes
// to grademl becomes a database of its own on the tests' PostgreSQL server, the same
// database each time the test names the same path, so that the end-to-end suite runs
// unchanged against the second backend.
std::string TestStoreLocation(const std::string& path) {
  const char* backend = std::getenv("GRADEML_TEST_BACKEND");
  if (backend == nullptr || std::string(backend) != "postgresql" || path.rfind("postgres", 0) == 0) return path;
  static std::mutex mu;
  static std::map<std::string, std::string> urls;
  std::lock_guard lock(mu);
  auto it = urls.find(path);
  if (it == urls.end()) {
    std::string why;
    std::string url = FreshPgDatabase(why);
    if (url.empty()) {
      ADD_FAILURE() << "GRADEML_TEST_BACKEND=postgresql: " << why;
      return path;
    }
    it = urls.emplace(path, url).first;
  }
  return it->second;
}

// `--db PATH` inside a shell command line (sh -c "cd X && grademl --db PATH ..."): PATH
// bare or in single quotes, replaced by the mapped location in single quotes.
static std::string WithTestBackendInShell(const std::string& line) {
  std::string out;
  size_t i = 0;
  while (true) {
    size_t at = line.find("--db ", i);
    if (at == std::string::npos) break;
    size_t start = at + 5;
    size_t end;
    std::string path;
    if (start < line.size() && line[start] == '\'') {
      end = line.find('\'', start + 1);
      if (end == std::string::npos) break;
      path = line.substr(start + 1, end - start - 1);
      ++end;
    } else {
      end = line.find(' ', start);
      if (end == std::string::npos) end = line.size();
      path = line.substr(start, end - start);
    }
    out += line.substr(i, start - i) + "'" + TestStoreLocation(path) + "'";
    i = end;
  }
  return out + line.substr(i);
}

static std::vector<std::string> WithTestBackend(const std::vector<std::string>& argv) {
  const char* backend = std::getenv("GRADEML_TEST_BACKEND");
  if (backend == nullptr || std::string(backend) != "postgresql") return argv;
  std::vector<std::string> out = argv;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == "--db" && i + 1 < out.size()) {
      out[i + 1] = TestStoreLocation(out[i + 1]);
      ++i;
    } else if (out[i].find("--db ") != std::string::npos) {
      out[i] = WithTestBackendInShell(out[i]);
    }
  }
  return out;
}

CommandResult RunCommand(const std::vector<std::string>& original_argv, const std::string& stdin_text) {
  const std::vector<std::string> argv = WithTestBackend(original_argv);
  int in[2], out[2], err[2];
  if (pipe(in) || pipe(out) || pipe(err)) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(err[1], 2);
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) close(fd);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  close(err[1]);
  if (!stdin_text.empty()) {
    ssize_t n = write(in[1], stdin_text.data(), stdin_text.size());
    (void)n;
  }
  close(in[1]);
  CommandResult result;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? result.out : result.err).append(buf, static_cast<size_t>(n));
      }
    }
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = DecodeStatus(status);
  return result;
}

pid_t StartCommand(const std::vector<std::string>& original_argv) {
  const std::vector<std::string> argv = WithTestBackend(original_argv);
  pid_t pid = fork();
  if (pid == 0) {
    int null_fd = open("/dev/null", O_RDWR);
    dup2(null_fd, 0);
    dup2(null_fd, 1);
    dup2(null_fd, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

int WaitCommand(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return DecodeStatus(status);
}

std::string GrademlBinary() { return std::string(GRADEML_BINARY_DIR) + "/grademl"; }
std::string HelperBinary(const std::string& name) { return std::string(GRADEML_BINARY_DIR) + "/tests/" + name; }

std::string FreshDir(const std::string& name) {
  std::filesystem::path dir = std::filesystem::path(GRADEML_BINARY_DIR) / "test-output" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

nlohmann::json ReportJson(const std::string& db) {
  CommandResult r = RunCommand({GrademlBinary(), "--db", db, "report", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

double ReadTruth(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + "=", 0) == 0) return std::stod(line.substr(key.size() + 1));
  }
  return NAN;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void ExpectErrors(const std::vector<std::string>& command, const std::vector<ErrorCase>& cases) {
  for (const ErrorCase& c : cases) {
    std::vector<std::string> argv = command;
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    CommandResult e = RunCommand(argv);
    std::string what = c.args.empty() ? "(no arguments)" : c.args.back();
    EXPECT_EQ(e.exit_code, c.exit_code) << what << ": " << e.err;
    EXPECT_TRUE(e.err.rfind("grademl: ", 0) == 0) << what << ": " << e.err;
    if (c.exit_code == 1) {
      EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << what << ": " << e.err;
    }
    EXPECT_TRUE(e.out.empty()) << what << ": " << e.out;
  }
}

// The four fields of the shell's `times` ("0m0.010000s 0m0.000000s\n0m1.040000s
// 0m0.020000s"), summed: the shell's own CPU and that of every child it reaped. NaN if the
// file is not that.
double TimesTotal(const std::string& path) {
  std::ifstream in(path);
  std::string field;
  double total = 0;
  int fields = 0;
  while (in >> field) {
    double minutes = 0, seconds = 0;
    if (std::sscanf(field.c_str(), "%lfm%lfs", &minutes, &seconds) != 2) return NAN;
    total += minutes * 60 + seconds;
    ++fields;
  }
  return fields == 4 ? total : NAN;
}

bool HavePythonModules(const std::string& modules) {
  static std::mutex mu;
  static std::map<std::string, bool> known;
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(modules);
  if (it != known.end()) return it->second;
  bool have = RunCommand({"/usr/bin/python3", "-c", "import " + modules}).exit_code == 0;
  known.emplace(modules, have);
  return have;
}

std::vector<std::string> PrivateMountNamespace() {
  static const std::vector<std::string> chosen = [] {
    for (std::vector<std::string> argv : {std::vector<std::string>{"/usr/bin/unshare", "-m"},
                                          std::vector<std::string>{"/usr/bin/unshare", "-Urm"}}) {
      std::vector<std::string> probe = argv;
      probe.insert(probe.end(), {"/bin/sh", "-c", "d=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs \"$d\"; r=$?; "
                                                   "umount \"$d\" 2>/dev/null; rmdir \"$d\"; exit $r"});
      if (RunCommand(probe).exit_code == 0) return argv;
    }
    return std::vector<std::string>{};
  }();
  return chosen;
}

}  // namespace grademl::testing
