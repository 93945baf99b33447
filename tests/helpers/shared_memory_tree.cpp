// A process tree sharing memory, for the PSS test: the parent allocates and touches MB
// megabytes, forks N children that only read them (the pages stay shared copy-on-write),
// and once all are alive and have read everything, each process appends its own
// /proc/self/smaps_rollup Pss and Rss (bytes) to TRUTH as "pss_<i>=..." / "rss_<i>=..."
// lines (i = 0 for the parent), plus "pid_<i>=...". All then hold for HOLD_MS and exit 0.
// GAP_MS (optional) spaces the forks, as a DataLoader starting its workers one by one.
// usage: shared_memory_tree TRUTH MB N HOLD_MS [GAP_MS]
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

long RollupKb(const std::string& text, const char* key) {
  std::string k = std::string("\n") + key + ":";
  size_t at = text.find(k);
  return at == std::string::npos ? -1 : std::strtol(text.c_str() + at + k.size(), nullptr, 10);
}

void WriteTruth(const char* path, int index) {
  int fd = open("/proc/self/smaps_rollup", O_RDONLY);
  std::string text = "\n";
  char buf[4096];
  ssize_t n;
  while (fd >= 0 && (n = read(fd, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  if (fd >= 0) close(fd);
  std::string line = "pid_" + std::to_string(index) + "=" + std::to_string(getpid()) + "\npss_" +
                     std::to_string(index) + "=" + std::to_string(RollupKb(text, "Pss") * 1024) + "\nrss_" +
                     std::to_string(index) + "=" + std::to_string(RollupKb(text, "Rss") * 1024) + "\n";
  int out = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (out < 0 || write(out, line.data(), line.size()) != static_cast<ssize_t>(line.size())) std::exit(3);
  close(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    std::fprintf(stderr, "usage: shared_memory_tree TRUTH MB N HOLD_MS [GAP_MS]\n");
    return 2;
  }
  const char* truth = argv[1];
  size_t bytes = static_cast<size_t>(std::atol(argv[2])) << 20;
  int children = std::atoi(argv[3]);
  useconds_t hold_us = static_cast<useconds_t>(std::atol(argv[4])) * 1000;
  useconds_t gap_us = argc > 5 ? static_cast<useconds_t>(std::atol(argv[5])) * 1000 : 0;
  auto* data = static_cast<unsigned char*>(std::malloc(bytes));
  if (data == nullptr) return 4;
  for (size_t i = 0; i < bytes; i += 4096) data[i] = static_cast<unsigned char>(i / 4096 + 1);
  // ready: each child says it has read everything; go: the parent says all have.
  int ready[2], go[2];
  if (pipe(ready) != 0 || pipe(go) != 0) return 5;
  std::vector<pid_t> pids;
  for (int c = 1; c <= children; ++c) {
    if (c > 1 && gap_us > 0) usleep(gap_us);
    pid_t pid = fork();
    if (pid < 0) return 6;
    if (pid == 0) {
      unsigned long sum = 0;
      for (size_t i = 0; i < bytes; i += 4096) sum += data[i];
      char byte = sum != 0 ? 'r' : '0';
      if (write(ready[1], &byte, 1) != 1) _exit(7);
      if (read(go[0], &byte, 1) != 1) _exit(8);
      WriteTruth(truth, c);
      usleep(hold_us);
      _exit(0);
    }
    pids.push_back(pid);
  }
  for (int c = 0; c < children; ++c) {
    char byte;
    if (read(ready[0], &byte, 1) != 1) return 9;
  }
  WriteTruth(truth, 0);
  std::string go_bytes(static_cast<size_t>(children), 'g');
  if (write(go[1], go_bytes.data(), go_bytes.size()) != static_cast<ssize_t>(go_bytes.size())) return 10;
  usleep(hold_us);
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
  }
  std::free(data);
  return failed;
}
