// An instrumented program that does to its descriptors what careless and daemon-like
// programs do, while it and a second thread record phases: opens files, writes them, closes
// them, closes numbers it never opened (grademl's, maybe), dup2's its files over random
// numbers (grademl's, maybe), closes everything above stderr at once (a daemon's
// closerange). The sequence is a function of SEED alone, never of what the calls return, so
// a run without grademl writes the same files: the test compares them byte for byte.
// usage: instrumented_fd_chaos SEED OUT_DIR [STEPS]
// Writes OUT_DIR/f<k> (the files), then OUT_DIR/truth ("phases=N": the phases both threads
// began, each with a tag), prints "chaos done" and exits 0.
#include <fcntl.h>
#include <grademl/grademl_c.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <thread>

namespace {

constexpr int kHighestNumber = 1100;     // beyond any number grademl's writer picks (<= 1000)
constexpr int kOtherThreadPhases = 8000;

void Phases(int n, const char* name) {
  const uint32_t id = grademl_intern(name), key = grademl_intern("k");
  for (int i = 0; i < n; ++i) {
    grademl_begin(id);
    grademl_tag_int(key, i);
    grademl_end();
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: instrumented_fd_chaos SEED OUT_DIR [STEPS]\n");
    return 2;
  }
  std::mt19937_64 rng(std::strtoull(argv[1], nullptr, 10));
  const std::string out = argv[2];
  const int steps = argc > 3 ? std::atoi(argv[3]) : 300;
  auto below = [&](uint64_t n) { return int(rng() % n); };

  long phases = 0;
  Phases(100, "start");  // the writer attaches (and, in its fallback, keeps a descriptor)
  phases += 100;
  // Phases on another thread all along: chunks are taken while descriptors change.
  std::thread other([] { Phases(kOtherThreadPhases, "other"); });

  std::set<int> mine;  // the numbers this program opened (or dup2'ed onto) and not closed
  int files = 0;
  auto any_mine = [&]() {
    auto it = mine.begin();
    std::advance(it, below(mine.size()));
    return *it;
  };
  for (int step = 0; step < steps; ++step) {
    const int op = below(100);
    if (op < 25) {  // a new file: the lowest free number
      std::string path = out + "/f" + std::to_string(files++);
      int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) mine.insert(fd);
    } else if (op < 50 && !mine.empty()) {  // bytes into one of them
      int fd = any_mine();
      std::string bytes = "step " + std::to_string(step) + " fd-slot " + std::to_string(below(1000)) + "\n";
      (void)!write(fd, bytes.data(), bytes.size());
    } else if (op < 60 && !mine.empty()) {  // closes one
      int fd = any_mine();
      close(fd);
      mine.erase(fd);
    } else if (op < 70) {  // closes a number it never opened: grademl's, maybe
      int n = 3 + below(kHighestNumber - 3);
      if (!mine.count(n)) close(n);
    } else if (op < 78 && !mine.empty()) {  // dup2 one of its files over a random number
      int n = 3 + below(kHighestNumber - 3);
      int fd = any_mine();
      if (dup2(fd, n) == n) mine.insert(n);
    } else if (op < 80) {  // a daemon's clean slate
      syscall(SYS_close_range, 3u, ~0u, 0u);
      mine.clear();
    } else {  // a burst of phases: new chunks, each taken through whatever grademl holds
      int n = below(1500);
      Phases(n, "chaos");
      phases += n;
    }
  }
  other.join();
  phases += kOtherThreadPhases;
  for (int fd : mine) {
    (void)!write(fd, "end\n", 4);
    close(fd);
  }
  std::string truth = out + "/truth";
  if (FILE* f = std::fopen(truth.c_str(), "w")) {
    std::fprintf(f, "phases=%ld\n", phases);
    std::fclose(f);
  }
  std::printf("chaos done\n");
  return 0;
}
