// The event file format: how an instrumented process hands phases, counters and flows to
// grademl. The one contract between the writer (src/instrument, linked into user processes)
// and the reader (src/collect/event_collector). Plain C-compatible layout, little-endian.
//
// Transport: `grademl run` sets GRADEML_EVENTS_DIR for every process it starts. On first use,
// an instrumented process creates "<dir>/<pid>-<random hex>.gev", sizes it to
// kFileCapacity with ftruncate (sparse: only what is written takes space), mmaps it shared,
// and writes events straight into the mapping. Nothing is buffered in the process, so a
// process that crashes or is SIGKILLed loses nothing it had committed: the kernel keeps the
// pages. Without GRADEML_EVENTS_DIR every call is a cheap no-op.
//
// Layout: a FileHeader in the first kHeaderBytes, then chunks of kChunkBytes. A thread takes
// the next free chunk (atomic fetch_add on FileHeader::next_chunk) and owns it until full;
// it appends records after the ChunkHeader and publishes them by storing the new length in
// ChunkHeader::committed with release order. The reader loads `committed` with acquire order
// and may read records up to it at any time, while the writer goes on.
//
// Time: records carry raw TSC ticks (rdtsc) on x86-64, or CLOCK_MONOTONIC ns elsewhere
// (FileHeader::clock says which). FileHeader holds one anchor pair (tsc, epoch ns) taken at
// attach; the reader converts ticks with its own measurement of the TSC rate, which is the
// same for every process of the machine (constant_tsc).
#pragma once

#include <stdint.h>

namespace grademl::instrument {

inline constexpr char kFileMagic[8] = {'G', 'R', 'D', 'M', 'L', 'E', 'V', '1'};
inline constexpr uint32_t kFormatVersion = 1;
inline constexpr uint64_t kHeaderBytes = 4096;
inline constexpr uint64_t kChunkBytes = 64 * 1024;
inline constexpr uint64_t kFileCapacity = 1ull << 30;  // 1 GiB of address space, sparse on disk
inline constexpr uint64_t kMaxChunks = (kFileCapacity - kHeaderBytes) / kChunkBytes;

enum ClockKind : uint32_t {
  kClockTsc = 1,        // rdtsc ticks
  kClockMonotonic = 2,  // CLOCK_MONOTONIC ns
};

struct FileHeader {
  char magic[8];
  uint32_t version;
  uint32_t clock;            // ClockKind
  int32_t pid;
  int32_t ppid;              // the writer's parent at attach: where its events go if grademl never saw the writer
  uint64_t anchor_ticks;     // a clock reading ...
  int64_t anchor_epoch_ns;   // ... and the epoch time (ns since 1970) at that moment
  uint64_t next_chunk;       // atomic: the index of the next free chunk (may exceed kMaxChunks: file full)
  uint64_t dropped_events;   // atomic: events lost because the file was full
};
static_assert(sizeof(FileHeader) <= kHeaderBytes);

struct ChunkHeader {
  uint32_t committed;  // atomic: bytes of records published, from the end of this header
  uint32_t tid;        // the OS thread id that owns the chunk
};
inline constexpr uint64_t kChunkPayload = kChunkBytes - sizeof(ChunkHeader);

// Record types. Every record starts with a RecordHead and is padded to a multiple of 8 bytes.
enum RecordType : uint8_t {
  kRecName = 1,     // defines a name id: payload is `length` bytes of UTF-8 (RecordHead::id = the id)
  kRecBegin = 2,    // a phase begins on this thread: id = name id, then uint64 ticks
  kRecEnd = 3,      // the innermost open phase of this thread ends: id = name id or 0, then uint64 ticks
  kRecInstant = 4,  // a zero-length phase: id = name id, then uint64 ticks
  kRecCounter = 5,  // id = name id, then uint64 ticks, then double value
  kRecTag = 6,      // a key=value tag on the innermost open phase: id = key name id, then uint32 value name id (+ pad)
  kRecFlowOut = 7,  // the innermost open phase produces flow `flow_id`: id = 0, then uint64 ticks, uint64 flow_id
  kRecFlowIn = 8,   // the innermost open phase consumes flow `flow_id` (an edge from the producer's phase)
  kRecTypedBegin = 9,  // as kRecBegin with a phase type different from its name: id = name id, then uint32 type id (+pad), uint64 ticks
};

struct RecordHead {
  uint8_t type;     // RecordType
  uint8_t reserved;
  uint16_t length;  // kRecName: bytes of the name; others: 0
  uint32_t id;
};
static_assert(sizeof(RecordHead) == 8);

// Name ids are per file, start at 1, and are defined (kRecName) before any record of the
// same file uses them is committed, though possibly in another thread's chunk.

}  // namespace grademl::instrument
