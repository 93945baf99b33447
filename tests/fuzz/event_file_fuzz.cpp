// libFuzzer target for the event reader (collect::EventCollector): arbitrary bytes become
// one writer's event memory, handed to the collector as the socket would hand it.
// Layout of an input (compact, so that inputs stay small): its first 64 bytes are the
// FileHeader (offset 0); the rest is cut into pieces of kPiece bytes, piece i laid at the
// start of chunk i (ChunkHeader, then records). The memory is sealed like a writer's.
// Seeds (tests/fuzz/corpus/event_file) are real writer output in this layout
// (tests/fuzz/make_event_seeds.py).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "collect/event_collector.h"
#include "instrument/event_format.h"
#include "model/run_builder.h"

namespace {

namespace ev = grademl::instrument;
constexpr size_t kHeaderPart = 64;
constexpr size_t kPiece = 2048;
constexpr size_t kMaxPieces = 16;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = memfd_create("fuzz-events", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return 0;
  size_t header = std::min(size, kHeaderPart);
  size_t pieces = size > kHeaderPart ? std::min(kMaxPieces, (size - kHeaderPart + kPiece - 1) / kPiece) : 0;
  uint64_t mem_size = ev::kHeaderBytes + std::max<size_t>(pieces, 1) * ev::kChunkBytes;
  if (ftruncate(fd, static_cast<off_t>(mem_size)) != 0 || pwrite(fd, data, header, 0) != static_cast<ssize_t>(header)) {
    close(fd);
    return 0;
  }
  for (size_t i = 0; i < pieces; ++i) {
    size_t at = kHeaderPart + i * kPiece;
    size_t n = std::min(kPiece, size - at);
    (void)!pwrite(fd, data + at, n, static_cast<off_t>(ev::kHeaderBytes + i * ev::kChunkBytes));
  }
  fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);

  // Twice: with the default bounds, and with bounds so small that every drop path runs
  // (a store backlog that fills after a few phases, a few bytes of open phases, a kept type).
  for (int bounded = 0; bounded < 2; ++bounded) {
    grademl::model::RunBuilder builder(grademl::model::RunInfo{});
    grademl::model::PhaseId run = builder.BeginPhase({.name = "run", .type = "run", .start_ns = 1});
    grademl::model::PhaseId proc =
        builder.BeginPhase({.parent = run, .name = "proc", .type = "process", .start_ns = 1, .pid = 1});
    grademl::collect::EventCollectorOptions options;
    options.tsc_ticks_per_ns = 2.5;
    options.name_wait_polls = 2;
    if (bounded) {
      options.max_backlog_bytes = 2048;
      options.max_open_bytes = 1024;
      options.keep_type = [](std::string_view type) { return !type.empty() && type[0] == 'k'; };
      options.max_kept_phases = 4;
    }
    grademl::collect::EventCollector collector(&builder, "", "host", [proc](pid_t) {
      return grademl::collect::EventCollector::ProcessInfo{.phase = proc, .resource = 0, .end_ns = 0};
    }, options);
    collector.AddWriterMemory(bounded ? fd : fcntl(fd, F_DUPFD_CLOEXEC, 0));  // the collector owns what it gets
    for (int i = 0; i < 3; ++i) {
      collector.Poll(2);
      (void)builder.TakeDelta();
    }
    collector.Finish(3);
    (void)builder.TakeDelta(true);
    // Once finished and handed out, no event phase stays in memory but the kept ones (and
    // the phases they were in): nothing leaks, whatever the memory held.
    size_t held = builder.phases_in_memory();
    if (held > 2 + (bounded ? options.max_kept_phases + grademl::instrument::kMaxDepth : 0) ||
        (!bounded && held != 2)) {
      __builtin_trap();
    }
    auto s = collector.stats();
    if (s.pending != 0 || s.too_deep > s.dropped || s.phases_dropped > s.dropped) __builtin_trap();
  }
  return 0;
}
