// The event memory format: how an instrumented process hands phases, counters and flows to
// grademl. The one contract between the writer (src/instrument, linked into user processes)
// and the reader (src/collect/event_collector). Plain C-compatible layout, little-endian.
//
// Transport (version 2): sealed anonymous memory handed over a Unix socket.
// `grademl run` sets GRADEML_EVENTS_DIR for every process it starts; its collector listens
// on "<dir>/events.sock" (SOCK_SEQPACKET). On first use, an instrumented process
//   1. connects to that socket (non-blocking; through "/proc/self/fd/N/events.sock" of an
//      O_PATH descriptor of the directory when the path is too long for sockaddr_un). No
//      collector listening: the process stays disabled and every call is a cheap no-op;
//   2. creates a memfd (MFD_CLOEXEC | MFD_ALLOW_SEALING), sizes it to kFileCapacity
//      (sparse: only reserved pages take memory) and seals it with F_SEAL_SHRINK |
//      F_SEAL_GROW | F_SEAL_SEAL, so that nobody -- a clean-up script holding
//      /proc/PID/fd/N, the program itself -- can ever truncate it: neither side's mapping
//      can fault on a page beyond the end;
//   3. maps it shared, reserves the header page, fills the header;
//   4. sends the memfd to the collector with SCM_RIGHTS, synchronously, before the first
//      event: a process that dies a moment later loses nothing, since the descriptor in
//      flight keeps the memory alive until the collector receives it; then closes its own
//      descriptor (the mapping keeps the memory), except in the fallback below.
// Each chunk is reserved before a thread writes into it; when that fails (memory limit),
// the thread's events are dropped and counted in dropped_events rather than touching an
// unbacked page. Reserving goes through the mapping (madvise MADV_POPULATE_WRITE, Linux
// 5.14+), so once the memfd is handed over the writer closes it: it keeps no descriptor
// inside the program, which may close or reuse every descriptor number (a daemon's
// closerange) without harm to either side. On older kernels (or GRADEML_WRITER_RESERVE=
// descriptor) it reserves with fallocate(FALLOC_FL_KEEP_SIZE) on the memfd, moved to a
// high descriptor number (close-on-exec) and checked before every use (device, inode and
// seals, against what it created); when the program closed or replaced it, the writer
// takes no more chunks (kWriterDescriptorLost) and never touches that number again.
// Nothing lives on disk: a full disk, or deleting or truncating the events directory, cannot
// reach the memory. The collector never maps a received memfd (it reads it with pread, so
// nothing can fault there either), refuses one without F_SEAL_SHRINK, and frees (punches
// holes in) chunks it has read to their end and whose thread has moved on, so a long run's
// memory stays bounded by what is not yet read. A writer never touches a chunk after it
// moved on, and a punched page would read back as zeros, never fault.
// Why not a file on disk (version 1): its pages are not reserved by ftruncate (a full disk
// faulted the writer with SIGBUS), and anyone could truncate it under both mappings.
// After fork() the child drops the parent's memory and attaches anew (its own memfd).
//
// Layout: a FileHeader in the first kHeaderBytes, then chunks of kChunkBytes. A thread takes
// the next free chunk (atomic fetch_add on FileHeader::next_chunk) and owns it until full;
// it appends records after the ChunkHeader and publishes them by storing the new length in
// ChunkHeader::committed with release order. The reader loads `committed` with acquire order
// and may read records up to it at any time, while the writer goes on. The reader treats
// every byte as hostile: it copies each record once into its own memory, validates it there
// and only then applies it.
//
// Nesting: a thread keeps room in its chunk for the End of every open phase, so the depth
// is bounded: a Begin deeper than kMaxDepth open phases is dropped (with its End, tags,
// flows), counted in dropped_events and in dropped_too_deep, which grademl reports.
//
// Time: records carry raw TSC ticks (rdtsc) on x86-64, or CLOCK_MONOTONIC ns elsewhere
// (FileHeader::clock says which). FileHeader holds one anchor pair (tsc, epoch ns) taken at
// attach; the reader converts ticks with its own measurement of the TSC rate, which is the
// same for every process of the machine (constant_tsc).
#pragma once

#include <stdint.h>

namespace grademl::instrument {

inline constexpr char kFileMagic[8] = {'G', 'R', 'D', 'M', 'L', 'E', 'V', '1'};
inline constexpr uint32_t kFormatVersion = 2;
inline constexpr char kSocketName[] = "events.sock";  // the collector's socket in GRADEML_EVENTS_DIR
inline constexpr uint64_t kHeaderBytes = 4096;
inline constexpr uint64_t kChunkBytes = 64 * 1024;
inline constexpr uint64_t kFileCapacity = 1ull << 30;  // 1 GiB of address space, sparse
inline constexpr uint64_t kMaxChunks = (kFileCapacity - kHeaderBytes) / kChunkBytes;
// Open phases a thread may nest; deeper Begins are dropped and counted (dropped_too_deep).
// With the End reserve (16 bytes each), any record still fits a fresh chunk at this depth.
inline constexpr uint32_t kMaxDepth = 4000;

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
  uint64_t next_chunk;       // atomic: the index of the next free chunk (may exceed kMaxChunks: memory full)
  uint64_t dropped_events;   // atomic: events lost (memory full, no memory to reserve, nesting too deep)
  uint64_t dropped_too_deep; // atomic: of those, Begins dropped for nesting deeper than kMaxDepth
  uint32_t writer_flags;     // atomic: WriterFlag bits (0 in memories of writers that predate them)
  uint32_t reserved;
  uint64_t stopped_ticks;    // kWriterDescriptorLost: when the writer noticed (its clock's ticks)
};
static_assert(sizeof(FileHeader) <= kHeaderBytes);

// What the writer says of itself in FileHeader::writer_flags.
enum WriterFlag : uint32_t {
  // The program closed or replaced the descriptor the writer reserved chunks through (the
  // fallback reservation, below): the writer took no chunk after `stopped_ticks`, so the
  // process's events from then on were dropped (counted in dropped_events), and it never
  // touched that descriptor number again.
  kWriterDescriptorLost = 1,
};

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
  kRecProcessTag = 10,  // a key=value tag on the writer's process phase, whatever is open: laid out as kRecTag
  kRecTagInt = 11,      // a key=<integer> tag on the innermost open phase: id = key name id, then int64 value (no name interned for it)
};

struct RecordHead {
  uint8_t type;     // RecordType
  uint8_t reserved;
  uint16_t length;  // kRecName: bytes of the name; others: 0
  uint32_t id;
};
static_assert(sizeof(RecordHead) == 8);
inline constexpr uint32_t kMaxRecordBytes = 24;  // every record but kRecName

// Begin and End carry the ticks the writer gives them: usually the moment of the call, but
// grademl_begin_at / grademl_end_at write an operation timed elsewhere (an asynchronous
// collective, recorded by the thread that saw it complete) with its own start and end. Such
// a Begin may be earlier than the writer thread's innermost open phase: the reader nests it
// under the innermost open phase that began at or before it (the process's phase when none
// did), and the phase stays on the thread's stack until its End as any other.
//
// Name ids are per writer, start at 1, and are defined (kRecName) before any record of the
// same writer uses them is committed, though possibly in another thread's chunk.

}  // namespace grademl::instrument
