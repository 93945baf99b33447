// A test workload that makes the kernel work, for the end-to-end tests of how GradeML
// attributes system CPU time: for about SECONDS of wall time it either
//   --fsync  writes 1 MiB blocks to FILE through the page cache (no O_DIRECT) and fsyncs
//            after each one: the kernel's time goes to storage;
//   --syscalls  makes system calls that do no I/O (getppid, and mmap/munmap of one page
//            that is never touched, so no page fault either): the kernel's time is CPU work;
//   --touch  maps anonymous memory and writes one byte to each page, with about as much
//            user work between pages as a fault costs: page faults (in the kernel) at well
//            over 100 000 per CPU-second, and half the CPU time in user space;
//   --burn   computes in user space only.
// It then writes what the kernel measured for it (getrusage: user and system CPU time, page
// faults; bytes written) to the truth file, as `key=value` lines.
//
// usage: kernel_work (--fsync|--syscalls|--touch|--burn) SECONDS [--out FILE] [--truth FILE]
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

double Seconds(const timeval& tv) { return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6; }

bool Before(std::chrono::steady_clock::time_point end) { return std::chrono::steady_clock::now() < end; }

}  // namespace

int main(int argc, char** argv) {
  std::string mode, out, truth;
  double seconds = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--fsync" || flag == "--syscalls" || flag == "--touch" || flag == "--burn") {
      mode = flag.substr(2);
      seconds = std::atof(argv[i + 1]);
    } else if (flag == "--out") {
      out = argv[i + 1];
    } else if (flag == "--truth") {
      truth = argv[i + 1];
    } else {
      std::fprintf(stderr, "kernel_work: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (mode.empty() || (mode == "fsync" && out.empty())) {
    std::fprintf(stderr, "usage: kernel_work (--fsync|--syscalls|--touch|--burn) SECONDS [--out FILE] [--truth FILE]\n");
    return 2;
  }
  auto end = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                     std::chrono::duration<double>(seconds));
  long long written = 0;
  volatile unsigned long long sink = 0;
  const long page = sysconf(_SC_PAGESIZE);
  if (mode == "fsync") {
    int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
      std::perror(out.c_str());
      return 1;
    }
    std::vector<char> block(1 << 20, 'x');
    while (Before(end)) {
      if (write(fd, block.data(), block.size()) != static_cast<ssize_t>(block.size()) || fsync(fd) != 0) {
        std::perror("write");
        return 1;
      }
      written += static_cast<long long>(block.size());
    }
    close(fd);
    unlink(out.c_str());
  } else if (mode == "syscalls") {
    while (Before(end)) {
      for (int k = 0; k < 1000; ++k) {
        sink = sink + static_cast<unsigned long long>(syscall(SYS_getppid));
        void* p = mmap(nullptr, static_cast<size_t>(page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p != MAP_FAILED) munmap(p, static_cast<size_t>(page));
      }
    }
  } else if (mode == "touch") {
    const size_t chunk = 64u << 20;
    while (Before(end)) {
      void* p = mmap(nullptr, chunk, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) {
        std::perror("mmap");
        return 1;
      }
      char* c = static_cast<char*>(p);
      for (size_t off = 0; off < chunk; off += static_cast<size_t>(page)) {
        c[off] = 1;
        for (int k = 0; k < 2000; ++k) sink = sink * 6364136223846793005ULL + 1442695040888963407ULL;
      }
      munmap(p, chunk);
    }
  } else {
    while (Before(end)) {
      for (int k = 0; k < 100000; ++k) sink = sink * 6364136223846793005ULL + 1442695040888963407ULL;
    }
  }
  if (!truth.empty()) {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    FILE* f = std::fopen(truth.c_str(), "w");
    if (!f) return 1;
    std::fprintf(f, "pid=%d\nuser_s=%.6f\nsystem_s=%.6f\nminor_faults=%ld\nwritten_bytes=%lld\n", getpid(),
                 Seconds(ru.ru_utime), Seconds(ru.ru_stime), ru.ru_minflt, written);
    std::fclose(f);
  }
  return static_cast<int>(sink & 0);
}
