// A test workload with known ground truth: burns a given amount of CPU time, writes a given
// number of bytes to a file with fsync, then records what it really used (getrusage, file
// size) in a truth file for the end-to-end tests to compare GradeML's numbers against.
//
// usage: burn_and_write [--cpu SECONDS] [--write BYTES --out FILE] [--truth FILE] [--sleep SECONDS]
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

static double CpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

int main(int argc, char** argv) {
  double cpu = 0, sleep_s = 0;
  long long write_bytes = 0;
  std::string out, truth;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--cpu") cpu = std::atof(argv[i + 1]);
    else if (flag == "--write") write_bytes = std::atoll(argv[i + 1]);
    else if (flag == "--out") out = argv[i + 1];
    else if (flag == "--truth") truth = argv[i + 1];
    else if (flag == "--sleep") sleep_s = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "burn_and_write: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  volatile unsigned long long sink = 0;
  while (CpuSeconds() < cpu) {
    for (int k = 0; k < 100000; ++k) sink = sink * 6364136223846793005ULL + 1442695040888963407ULL;
  }
  if (write_bytes > 0 && !out.empty()) {
    int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
      std::perror(out.c_str());
      return 1;
    }
    std::vector<char> block(1 << 20, 'x');
    long long left = write_bytes;
    while (left > 0) {
      size_t n = static_cast<size_t>(left < static_cast<long long>(block.size()) ? left : block.size());
      if (write(fd, block.data(), n) != static_cast<ssize_t>(n)) {
        std::perror("write");
        return 1;
      }
      left -= static_cast<long long>(n);
    }
    fsync(fd);
    close(fd);
  }
  if (sleep_s > 0) {
    timespec ts{static_cast<time_t>(sleep_s), static_cast<long>((sleep_s - static_cast<long>(sleep_s)) * 1e9)};
    nanosleep(&ts, nullptr);
  }
  if (!truth.empty()) {
    struct stat st{};
    long long size = (!out.empty() && stat(out.c_str(), &st) == 0) ? static_cast<long long>(st.st_size) : 0;
    FILE* f = std::fopen(truth.c_str(), "w");
    if (!f) return 1;
    std::fprintf(f, "pid=%d\ncpu_seconds=%.6f\nfile_bytes=%lld\n", getpid(), CpuSeconds(), size);
    std::fclose(f);
  }
  return static_cast<int>(sink & 0);
}
