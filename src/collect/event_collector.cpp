#include "collect/event_collector.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <deque>
#include <string_view>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define GRADEML_HAVE_TSC 1
#else
#define GRADEML_HAVE_TSC 0
#endif

#include "core/sanitizers.h"
#include "instrument/event_format.h"

namespace grademl::collect {

namespace ev = grademl::instrument;

namespace {

constexpr size_t kChunkHeaderBytes = sizeof(ev::ChunkHeader);
constexpr int kBadMagicPolls = 10;  // a wrong magic is final after this many polls (a torn write otherwise)
constexpr int kConnectionPolls = 50;  // a connection that sends nothing for this many polls is closed
constexpr size_t kMaxConnections = 1024;  // more wait in the listen backlog

// Bounds on what hostile memories can make this side hold (docs/event-collection.md).
constexpr size_t kMaxLiveMemories = 4096;          // memories read at once; more are refused
constexpr size_t kMaxNameBytes = 1024;             // a longer name is cut (the writer's own cut)
constexpr size_t kNameOverhead = 64;               // a held name's bookkeeping, estimated
constexpr size_t kMaxNameBytesPerMemory = size_t{16} << 20;
constexpr size_t kMaxNameBytesInAll = size_t{128} << 20;
constexpr size_t kMaxQueuedRecords = size_t{1} << 20;  // waiting for names, all threads ...
constexpr size_t kMaxQueuedPerThread = size_t{1} << 14;  // ... and one thread
constexpr size_t kMaxFlows = size_t{1} << 20;      // producers known; consumers waiting
// What accepting one phase costs, beyond its texts: the model's row and the path of its type.
constexpr size_t kPhaseCost = sizeof(model::Phase) + 64;

// Copies `n` bytes at `offset` of a writer's memory; false when they are not all there
// (a memory shorter than it claims). pread, not a mapping: nothing can fault. The acquire
// fence orders it after an earlier read of a `committed` (the writer's release store); the
// system call itself orders it too, which is all a ThreadSanitizer build (where g++ refuses
// standalone fences) relies on: TSan cannot see into the kernel's copy anyway.
bool ReadShared(int fd, uint64_t offset, void* out, size_t n) {
#if !GRADEML_THREAD_SANITIZER
  std::atomic_thread_fence(std::memory_order_acquire);
#endif
  size_t done = 0;
  while (done < n) {
    ssize_t r = pread(fd, static_cast<char*>(out) + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    done += static_cast<size_t>(r);
  }
  return true;
}

template <typename T>
T ReadAt(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The size of a record from its head, 0 when the head is invalid.
size_t RecordSize(const ev::RecordHead& h) {
  if (h.type == ev::kRecName) return sizeof(ev::RecordHead) + ((static_cast<size_t>(h.length) + 7) & ~size_t{7});
  if (h.length != 0) return 0;
  switch (h.type) {
    case ev::kRecBegin:
    case ev::kRecEnd:
    case ev::kRecInstant:
    case ev::kRecTag:
    case ev::kRecProcessTag:
    case ev::kRecTagInt:
      return 16;
    case ev::kRecCounter:
    case ev::kRecFlowOut:
    case ev::kRecFlowIn:
    case ev::kRecTypedBegin:
      return 24;
    default:
      return 0;
  }
}

// A phase type is one element of a type path: no '/'.
std::string TypeOf(std::string_view name) {
  if (name.empty()) return "event";
  std::string type(name);
  std::replace(type.begin(), type.end(), '/', '_');
  return type;
}

struct ClockPair {
  uint64_t tsc = 0;
  int64_t mono = 0;
};

ClockPair ReadClockPair() {
  ClockPair best;
#if GRADEML_HAVE_TSC
  uint64_t best_width = UINT64_MAX;
  for (int i = 0; i < 3; ++i) {
    uint64_t t1 = __rdtsc();
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t t2 = __rdtsc();
    if (t2 - t1 < best_width) {
      best_width = t2 - t1;
      best.tsc = t1 + (t2 - t1) / 2;
      best.mono = static_cast<int64_t>(ts.tv_sec) * kNsPerSec + ts.tv_nsec;
    }
  }
#else
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  best.mono = static_cast<int64_t>(ts.tv_sec) * kNsPerSec + ts.tv_nsec;
#endif
  return best;
}

}  // namespace

struct EventCollector::Chunk {
  uint64_t index = 0;
  uint64_t offset = 0;    // of the ChunkHeader in the memory
  uint32_t tid = 0;
  uint32_t scanned = 0;   // payload bytes copied and validated
  bool stopped = false;   // a bad record or `committed`: nothing more is read
  uint64_t scanned_pass = 0;  // the last pass that read it
};

// One record, copied out of the shared memory once and validated (never a name).
struct EventCollector::Record {
  uint8_t type = 0;
  uint32_t id = 0;
  uint32_t aux = 0;    // tag value id, typed begin's type id
  uint64_t ticks = 0;
  uint64_t flow = 0;   // flows
  double value = 0;    // counters
};

// A phase open on a thread.
struct EventCollector::Open {
  model::PhaseId id = 0;
  TimeNs start = 0;
  size_t bytes = 0;   // counted in open_bytes_
  bool keep = false;  // stays in the builder's memory once ended (a kept type, or holds one)
};

struct EventCollector::Thread {
  uint32_t tid = 0;
  std::vector<Open> stack;            // open phases, innermost last
  uint32_t skipped = 0;               // phases dropped here, still open above the stack: what
                                      // is written inside them (to their Ends) is dropped too
  std::deque<Chunk*> chunks;          // not yet read to their end, in index order
  std::deque<Record> records;         // read, not yet applied (bounded: kMaxQueuedPerThread)
  int stall_polls = 0;                // polls its next record has waited for a name
};

// Polls to wait for the process monitor to discover a writer before using its parent.
constexpr int kUnknownWriterPolls = 10;

struct EventCollector::File {
  File() = default;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  ~File() {
    if (fd >= 0) close(fd);  // whichever way it was refused or closed
  }
  enum class State { kOpening, kReading, kClosed };
  State state = State::kOpening;
  int fd = -1;        // the writer's memory (owned)
  uint64_t size = 0;  // its size when received (sealed: it cannot shrink)
  int bad_magic_polls = 0;
  bool valid = false;  // the header was good

  int32_t pid = 0;
  int32_t ppid = 0;          // the writer's parent (header), for writers grademl never saw
  int unknown_polls = 0;     // polls that found the writer unknown to the process monitor
  uint32_t clock = 0;
  uint64_t anchor_ticks = 0;
  int64_t anchor_epoch_ns = 0;
  uint64_t writer_dropped = 0;
  uint64_t writer_too_deep = 0;
  bool descriptor_lost = false;  // the writer lost its descriptor (kWriterDescriptorLost) ...
  uint64_t stopped_ticks = 0;    // ... at this moment

  ProcessInfo proc;
  bool proc_is_parent = false;  // proc is the writer's parent's (grademl never saw the writer)
  uint64_t known_chunks = 0;
  std::vector<std::unique_ptr<Chunk>> chunks;  // every chunk seen, owner
  std::vector<Chunk*> unclaimed;               // no record committed yet
  std::unordered_map<uint32_t, std::unique_ptr<Thread>> threads;
  std::vector<Thread*> thread_order;
  std::unordered_map<uint32_t, std::string> names;
  size_t name_bytes = 0;    // held in `names`, estimated
  bool names_full = false;  // a name was refused (bounds): unknown names are placeholders at once
  std::unordered_map<uint32_t, model::SeriesId> counter_series;  // name id -> series
  size_t pending = 0;  // records read, not applied
};

EventCollector::EventCollector(model::RunBuilder* builder, std::string dir, std::string host,
                               std::function<ProcessInfo(pid_t)> process_of, Options options)
    : builder_(builder),
      dir_(std::move(dir)),
      host_(std::move(host)),
      process_of_(std::move(process_of)),
      options_(options) {
  ClockPair p = ReadClockPair();
  tsc0_ = p.tsc;
  mono0_ = p.mono;
  if (options_.tsc_ticks_per_ns > 0) ticks_per_ns_ = options_.tsc_ticks_per_ns;
  cpus_ = std::max(1u, std::thread::hardware_concurrency());
  if (!dir_.empty()) Listen();
}

EventCollector::~EventCollector() {
  for (Connection& c : connections_) close(c.fd);
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(socket_path_.c_str());
  }
}

double EventCollector::tsc_ticks_per_ns() const { return ticks_per_ns_; }

void EventCollector::MeasureRate(DurationNs min_span) {
  if (options_.tsc_ticks_per_ns > 0) return;
#if GRADEML_HAVE_TSC
  ClockPair p = ReadClockPair();
  int64_t span = p.mono - mono0_;
  if (span >= min_span && p.tsc > tsc0_) {
    ticks_per_ns_ = static_cast<double>(p.tsc - tsc0_) / static_cast<double>(span);
    rate_span_ns_ = span;
  }
#else
  (void)min_span;
#endif
}

void EventCollector::Listen() {
  socket_path_ = dir_ + "/" + ev::kSocketName;
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    listen_error_ = std::string("socket: ") + std::strerror(errno);
    return;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // A long directory is reached through an O_PATH descriptor of it (sun_path is 108 bytes).
  int dir_fd = -1;
  std::string path = socket_path_;
  if (path.size() >= sizeof(addr.sun_path)) {
    dir_fd = open(dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    path = "/proc/self/fd/" + std::to_string(dir_fd) + "/" + ev::kSocketName;
  }
  int rc = -1;
  if (path.size() < sizeof(addr.sun_path)) {
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    unlink(socket_path_.c_str());  // a stale socket of an earlier collector in this directory
    rc = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    if (rc == 0) rc = listen(fd, SOMAXCONN);
  } else {
    errno = ENAMETOOLONG;
  }
  if (dir_fd >= 0) close(dir_fd);
  if (rc != 0) {
    listen_error_ = "cannot listen on " + socket_path_ + ": " + std::strerror(errno);
    close(fd);
    return;
  }
  listen_fd_ = fd;
}

void EventCollector::AcceptWriters() {
  if (listen_fd_ < 0) return;
  while (connections_.size() < kMaxConnections) {
    int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      break;  // EAGAIN: none waiting (or out of descriptors: try again next time)
    }
    connections_.push_back({c, 0});
  }
  for (Connection& conn : connections_) {
    bool done = false;
    while (!done) {
      char byte;
      iovec iov{&byte, 1};
      alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      ssize_t n = recvmsg(conn.fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      if (n <= 0) {  // the writer closed (its memory was sent before, or never), or an error
        done = true;
        break;
      }
      // Every descriptor passed is taken (a hostile sender may pass several), never leaked.
      for (cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
        if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
        size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
          if (i == 0) {
            AddWriterMemory(fd);
          } else {
            close(fd);
          }
        }
      }
      done = true;  // one message per connection
    }
    if (done || ++conn.polls > kConnectionPolls) {
      close(conn.fd);
      conn.fd = -1;
    }
  }
  std::erase_if(connections_, [](const Connection& c) { return c.fd < 0; });
}

bool EventCollector::AddWriterMemory(int fd) {
  struct stat st;
  int seals = fcntl(fd, F_GET_SEALS);
  // Sealed against shrinking: the memory holds what it claims, for as long as it is read.
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    close(fd);
    return false;
  }
  if (files_.size() >= kMaxLiveMemories) {  // a sender of endless memories: bounded, and said
    close(fd);
    ++own_dropped_;
    return false;
  }
  auto f = std::make_unique<File>();
  f->fd = fd;
  f->size = std::min<uint64_t>(static_cast<uint64_t>(st.st_size), ev::kFileCapacity);
  files_.push_back(std::move(f));
  return true;
}

bool EventCollector::TryReadHeader(File* f) {
  if (f->size < ev::kHeaderBytes) {
    f->state = File::State::kClosed;
    return false;
  }
  // The writer fills the header, then stores the magic (release): the magic is read first.
  uint64_t magic = 0;
  if (!ReadShared(f->fd, 0, &magic, sizeof magic)) {
    f->state = File::State::kClosed;
    return false;
  }
  if (magic == 0) return false;  // not written yet
  if (std::memcmp(&magic, ev::kFileMagic, sizeof magic) != 0) {
    if (++f->bad_magic_polls >= kBadMagicPolls) f->state = File::State::kClosed;
    return false;
  }
  ev::FileHeader h;
  if (!ReadShared(f->fd, 0, &h, sizeof h)) {
    f->state = File::State::kClosed;
    return false;
  }
  bool clock_ok = h.clock == ev::kClockMonotonic || (h.clock == ev::kClockTsc && GRADEML_HAVE_TSC);
  if (h.version != ev::kFormatVersion || !clock_ok || h.pid <= 0) {
    f->state = File::State::kClosed;
    return false;
  }
  f->pid = h.pid;
  f->ppid = h.ppid;
  f->clock = h.clock;
  f->anchor_ticks = h.anchor_ticks;
  f->anchor_epoch_ns = h.anchor_epoch_ns;
  f->valid = true;
  f->state = File::State::kReading;
  return true;
}

uint64_t EventCollector::PlausibleCount(uint64_t claimed) const {
  // No thread makes more than one call a nanosecond: a count past that, on every CPU since
  // the collector started (before which no writer could reach it), is a lie.
  ClockPair now = ReadClockPair();
  uint64_t elapsed = now.mono > mono0_ ? static_cast<uint64_t>(now.mono - mono0_) : 0;
  uint64_t possible = elapsed > UINT64_MAX / cpus_ ? UINT64_MAX : elapsed * cpus_;
  return std::min(claimed, possible);
}

void EventCollector::ScanChunk(File* f, Thread* t, Chunk* c, Mode mode) {
  if (c->stopped) return;
  uint32_t committed = 0;
  if (!ReadShared(f->fd, c->offset, &committed, sizeof committed) || committed > ev::kChunkPayload) {
    c->stopped = true;
    return;
  }
  if (committed <= c->scanned) return;
  // The new bytes, copied once: from here on nothing the writer does can change them.
  std::vector<uint8_t> buf(committed - c->scanned);
  if (!ReadShared(f->fd, c->offset + kChunkHeaderBytes + c->scanned, buf.data(), buf.size())) {
    c->stopped = true;
    return;
  }
  size_t at = 0;
  while (at + sizeof(ev::RecordHead) <= buf.size()) {
    const uint8_t* p = buf.data() + at;
    auto head = ReadAt<ev::RecordHead>(p);
    size_t size = RecordSize(head);
    if (size == 0) {
      c->stopped = true;
      break;
    }
    if (at + size > buf.size()) break;  // never committed that way: read again later (harmless if never)
    if (head.type == ev::kRecName) {
      // Names are held within bounds: past them, the memory's unknown names become
      // placeholders at once (a name is never needed to count what is dropped).
      if (head.id != 0 && mode != Mode::kDiscard && !f->names.contains(head.id)) {
        size_t n = std::min<size_t>(head.length, kMaxNameBytes);
        size_t cost = n + kNameOverhead;
        if (f->name_bytes + cost > kMaxNameBytesPerMemory || name_bytes_ + cost > kMaxNameBytesInAll) {
          f->names_full = true;
        } else {
          f->names.emplace(head.id, std::string(reinterpret_cast<const char*>(p + sizeof head), n));
          f->name_bytes += cost;
          name_bytes_ += cost;
        }
      }
    } else {
      Record r;
      r.type = head.type;
      r.id = head.id;
      switch (head.type) {
        case ev::kRecBegin:
        case ev::kRecEnd:
        case ev::kRecInstant:
          r.ticks = ReadAt<uint64_t>(p + 8);
          break;
        case ev::kRecTypedBegin:
          r.aux = ReadAt<uint32_t>(p + 8);
          r.ticks = ReadAt<uint64_t>(p + 16);
          break;
        case ev::kRecTag:
        case ev::kRecProcessTag:
          r.aux = ReadAt<uint32_t>(p + 8);
          break;
        case ev::kRecTagInt:
          r.flow = ReadAt<uint64_t>(p + 8);  // the int64 value, as its bits
          break;
        case ev::kRecCounter:
          r.ticks = ReadAt<uint64_t>(p + 8);
          r.value = ReadAt<double>(p + 16);
          break;
        case ev::kRecFlowOut:
        case ev::kRecFlowIn:
          r.ticks = ReadAt<uint64_t>(p + 8);
          r.flow = ReadAt<uint64_t>(p + 16);
          break;
        default:
          break;
      }
      t->records.push_back(r);
      ++f->pending;
      ++queued_;
    }
    at += size;
  }
  c->scanned += static_cast<uint32_t>(at);
}

// A chunk read to its end whose thread has moved on: its memory is given back to the
// system (the writer never touches it again; if it did, it would read zeros, not fault).
void EventCollector::ReleaseChunk(File* f, Chunk* c) {
  (void)fallocate(f->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(c->offset),
                  static_cast<off_t>(ev::kChunkBytes));
}

void EventCollector::ClaimChunks(File* f) {
  // The header's counts, believed only as far as possible: never more than what could have
  // happened, never less than what was seen (the writer only adds), and never more chunks
  // than the format or the memory's real size holds.
  ev::FileHeader h{};
  if (!ReadShared(f->fd, 0, &h, sizeof h)) return;
  f->writer_dropped = std::max(f->writer_dropped, PlausibleCount(h.dropped_events));
  f->writer_too_deep = std::min(std::max(f->writer_too_deep, PlausibleCount(h.dropped_too_deep)), f->writer_dropped);
  if ((h.writer_flags & ev::kWriterDescriptorLost) != 0 && !f->descriptor_lost) {
    f->descriptor_lost = true;
    f->stopped_ticks = h.stopped_ticks;
  }
  uint64_t fit = f->size < ev::kHeaderBytes ? 0 : (f->size - ev::kHeaderBytes) / ev::kChunkBytes;
  uint64_t n = std::min({h.next_chunk, ev::kMaxChunks, fit});
  for (uint64_t i = f->known_chunks; i < n; ++i) {
    auto c = std::make_unique<Chunk>();
    c->index = i;
    c->offset = ev::kHeaderBytes + i * ev::kChunkBytes;
    f->unclaimed.push_back(c.get());
    f->chunks.push_back(std::move(c));
  }
  f->known_chunks = std::max(f->known_chunks, n);

  // Chunks whose first record is committed now belong to their thread. Read from the
  // highest index down: a thread fills a chunk before it takes a later one, so once a later
  // chunk of a thread is seen committed, its earlier ones are visible too, and each
  // thread's chunks join its list in index order. (At most one thread per chunk: the
  // number of threads is bounded by the memory's chunks.)
  std::vector<Chunk*> claimed;
  for (size_t k = f->unclaimed.size(); k-- > 0;) {
    Chunk* c = f->unclaimed[k];
    ev::ChunkHeader ch{};
    if (!ReadShared(f->fd, c->offset, &ch, sizeof ch) || ch.committed == 0) continue;
    c->tid = ch.tid;
    claimed.push_back(c);
    f->unclaimed[k] = nullptr;
  }
  if (!claimed.empty()) {
    std::erase(f->unclaimed, nullptr);
    std::sort(claimed.begin(), claimed.end(), [](const Chunk* a, const Chunk* b) { return a->index < b->index; });
    for (Chunk* c : claimed) {
      auto& t = f->threads[c->tid];
      if (!t) {
        t = std::make_unique<Thread>();
        t->tid = c->tid;
        f->thread_order.push_back(t.get());
      }
      t->chunks.push_back(c);
    }
  }
}

bool EventCollector::PumpThread(File* f, Thread* t, Mode mode) {
  bool progress = false;
  while (true) {
    size_t waiting = t->records.size();
    bool drained = ApplyThread(f, t, mode);
    progress |= t->records.size() != waiting;
    // A thread waiting for a name reads on (the name may come later in its own records)
    // until its queue, or all queues together, hold their bound: the rest waits in the
    // writer's memory.
    if (t->chunks.empty()) return progress;
    if (!drained && (t->records.size() >= kMaxQueuedPerThread || queued_ >= kMaxQueuedRecords)) return progress;
    Chunk* c = t->chunks.front();
    // Each chunk is read at most once a pass: a writer that goes on writing cannot keep a
    // pass (or the last one) going.
    if (c->scanned_pass == pass_) return progress;
    c->scanned_pass = pass_;
    uint32_t scanned = c->scanned;
    ScanChunk(f, t, c, mode);
    progress |= c->scanned != scanned;
    // A chunk followed by a later one of its thread is final (the later one's commit was
    // seen after it): read to its end once, it is released. The last one may still grow.
    if (t->chunks.size() > 1 || c->stopped) {
      ReleaseChunk(f, c);
      t->chunks.pop_front();
    } else if (t->records.empty()) {
      return progress;
    }
  }
}

// Times come from an untrusted writer: saturate instead of overflowing (a hostile anchor or
// tick value must not be undefined behaviour; such a phase is simply far off).
TimeNs EventCollector::TimeOf(const File* f, uint64_t ticks) const {
  auto d = static_cast<int64_t>(ticks - f->anchor_ticks);
  if (f->clock != ev::kClockMonotonic) {
    double scaled = ticks_per_ns_ > 0 ? static_cast<double>(d) / ticks_per_ns_ : 0.0;
    constexpr double kLimit = 9.0e18;  // inside int64_t's range
    d = scaled >= kLimit ? int64_t(kLimit) : scaled <= -kLimit ? -int64_t(kLimit) : std::llround(scaled);
  }
  TimeNs t = 0;
  if (__builtin_add_overflow(f->anchor_epoch_ns, d, &t)) {
    t = d > 0 ? std::numeric_limits<TimeNs>::max() : std::numeric_limits<TimeNs>::min();
  }
  return t;
}

bool EventCollector::TakeBudget(size_t bytes) {
  if (bytes > budget_) return false;
  budget_ -= bytes;
  return true;
}

void EventCollector::DropRecord(uint8_t type, bool over_backlog) {
  ++own_dropped_;
  if (type == ev::kRecBegin || type == ev::kRecTypedBegin || type == ev::kRecInstant) ++phases_dropped_;
  if (over_backlog) ++over_backlog_;
}

EventCollector::Apply EventCollector::ApplyRecord(File* f, Thread* t, const Record& rec, Mode mode) {
  const Record& head = rec;
  if (mode == Mode::kDiscard) {  // its process was never known: nowhere to put it
    DropRecord(head.type, false);
    return Apply::kDone;
  }
  const bool final = mode == Mode::kFinal;
  auto name_of = [&](uint32_t id, std::string* out) {
    auto it = f->names.find(id);
    if (it != f->names.end()) {
      *out = it->second;
      return true;
    }
    if (!final && !f->names_full && t->stall_polls < options_.name_wait_polls) return false;
    *out = "#" + std::to_string(id);  // never defined (or past the bounds): a placeholder rather than a stuck thread
    return true;
  };
  auto time_of = [&](uint64_t ticks) { return TimeOf(f, ticks); };
  // Inside a phase dropped here, everything that belongs to the innermost open phase goes
  // with it (Begins nest deeper, an End closes one of them).
  if (t->skipped > 0) {
    switch (head.type) {
      case ev::kRecBegin:
      case ev::kRecTypedBegin:
        if (t->stack.size() + t->skipped >= ev::kMaxDepth) ++own_too_deep_;  // as the writer counts
        ++t->skipped;
        DropRecord(head.type, false);
        return Apply::kDone;
      case ev::kRecEnd:
        --t->skipped;
        DropRecord(head.type, false);
        return Apply::kDone;
      case ev::kRecInstant:
      case ev::kRecTag:
      case ev::kRecTagInt:
      case ev::kRecFlowOut:
      case ev::kRecFlowIn:
        DropRecord(head.type, false);
        return Apply::kDone;
      default:
        break;  // process tags and counters do not belong to a phase
    }
  }
  model::PhaseId innermost = t->stack.empty() ? f->proc.phase : t->stack.back().id;

  switch (head.type) {
    case ev::kRecBegin:
    case ev::kRecTypedBegin:
    case ev::kRecInstant: {
      const bool instant = head.type == ev::kRecInstant;
      // Dropped (with what nests inside) before its names are needed: too deep, too many
      // bytes open at once, or the store's backlog full.
      bool too_deep = !instant && t->stack.size() >= ev::kMaxDepth;
      bool too_open = !instant && open_bytes_ + kPhaseCost > options_.max_open_bytes;
      bool over = budget_ < kPhaseCost;
      if (too_deep || too_open || over) {
        if (too_deep) ++own_too_deep_;
        if (!instant) ++t->skipped;
        DropRecord(head.type, over && !too_deep && !too_open);
        return Apply::kDone;
      }
      std::string name, type;
      if (!name_of(head.id, &name)) return Apply::kWait;
      if (head.type == ev::kRecTypedBegin) {
        if (!name_of(rec.aux, &type)) return Apply::kWait;
      } else {
        type = name;
      }
      type = TypeOf(type);
      const size_t cost = kPhaseCost + name.size() + 2 * type.size() + host_.size();
      if (!TakeBudget(cost)) {
        if (!instant) ++t->skipped;
        DropRecord(head.type, true);
        return Apply::kDone;
      }
      TimeNs start = time_of(rec.ticks);
      // A Begin timed before the innermost open phase began (grademl_begin_at: an operation
      // recorded once it completed) nests under the innermost one that contains its start.
      model::PhaseId parent = innermost;
      for (size_t k = t->stack.size(); k > 0 && t->stack[k - 1].start > start; --k) {
        parent = k >= 2 ? t->stack[k - 2].id : f->proc.phase;
      }
      // Kept in memory once ended (what the end of the run reads), with the phases it is in.
      bool keep = options_.keep_type && kept_ < options_.max_kept_phases && options_.keep_type(type);
      if (keep) {
        ++kept_;
        for (size_t k = t->stack.size(); k > 0 && !t->stack[k - 1].keep; --k) {
          t->stack[k - 1].keep = true;
          ++kept_;
        }
      }
      model::PhaseSpec spec{.parent = parent, .name = std::move(name), .type = std::move(type),
                            .start_ns = start, .host = host_, .pid = f->pid, .tags = {}};
      model::PhaseId id = builder_->BeginPhase(spec);
      ++phases_;
      if (instant) {
        builder_->EndPhase(id, start, keep ? model::RunBuilder::Keep::kInMemory : model::RunBuilder::Keep::kUntilHandedOut);
      } else {
        t->stack.push_back({.id = id, .start = start, .bytes = cost, .keep = keep});
        open_bytes_ += cost;
      }
      break;
    }
    case ev::kRecEnd: {
      if (!t->stack.empty()) {  // an unmatched end has nothing to end
        EndOpen(t, time_of(rec.ticks));
      }
      break;
    }
    case ev::kRecTag:
    case ev::kRecTagInt: {
      std::string key, value;
      if (!name_of(head.id, &key)) return Apply::kWait;
      if (head.type == ev::kRecTag) {
        if (!name_of(rec.aux, &value)) return Apply::kWait;
      } else {
        value = std::to_string(static_cast<int64_t>(rec.flow));
      }
      const size_t bytes = key.size() + value.size() + sizeof(std::pair<std::string, std::string>);
      if (!t->stack.empty() && open_bytes_ + bytes > options_.max_open_bytes) {
        DropRecord(head.type, false);
        return Apply::kDone;
      }
      model::RunBuilder::TagResult r = builder_->SetPhaseTag(innermost, key, value);
      if (r == model::RunBuilder::TagResult::kRefused) {  // the phase has its most keys
        DropRecord(head.type, false);
        return Apply::kDone;
      }
      if (r == model::RunBuilder::TagResult::kAdded && !t->stack.empty()) {
        t->stack.back().bytes += bytes;
        open_bytes_ += bytes;
      }
      break;
    }
    case ev::kRecProcessTag: {
      std::string key, value;
      if (!name_of(head.id, &key) || !name_of(rec.aux, &value)) return Apply::kWait;
      // Only the writer's own process phase: a writer grademl never saw (its events under
      // its parent's phase) would tag its parent.
      if (f->proc_is_parent || builder_->SetPhaseTag(f->proc.phase, key, value) == model::RunBuilder::TagResult::kRefused) {
        DropRecord(head.type, false);
        return Apply::kDone;
      }
      break;
    }
    case ev::kRecCounter: {
      if (f->proc.resource == 0) {  // nowhere to put it
        DropRecord(head.type, false);
        return Apply::kDone;
      }
      model::SeriesId sid = 0;
      auto it = f->counter_series.find(head.id);
      if (it != f->counter_series.end()) {
        sid = it->second;
      } else {
        std::string name;
        if (!name_of(head.id, &name)) return Apply::kWait;
        std::string series_name = "user." + name;
        auto sit = series_.find({f->proc.resource, series_name});
        if (sit == series_.end()) {
          if (!TakeBudget(sizeof(model::SeriesInfo) + series_name.size())) {
            DropRecord(head.type, true);
            return Apply::kDone;
          }
          model::SeriesInfo info;
          info.resource = f->proc.resource;
          info.name = series_name;
          info.unit = "value";
          info.kind = model::SeriesKind::kGauge;
          sit = series_.emplace(std::make_pair(f->proc.resource, series_name), builder_->AddSeries(info)).first;
        }
        sid = sit->second;
        f->counter_series.emplace(head.id, sid);
      }
      if (!TakeBudget(sizeof(model::SampleRecord))) {
        DropRecord(head.type, true);
        return Apply::kDone;
      }
      TimeNs ts = time_of(rec.ticks);
      // Samples of a series go out in time order; threads are read one after the other,
      // so a sample older than the series' last one is moved up to it.
      TimeNs& last = series_last_t_[sid];
      ts = std::max(ts, last);
      last = ts;
      builder_->AddSample(sid, ts, rec.value);
      break;
    }
    case ev::kRecFlowOut: {
      uint64_t flow = rec.flow;
      if (flow_producer_.contains(flow)) break;  // the first producer wins
      auto w = flow_waiting_.find(flow);
      size_t edges = w == flow_waiting_.end() ? 0 : w->second.size();
      if (flow_producer_.size() >= kMaxFlows || !TakeBudget((edges + 1) * (sizeof(model::Edge) + 8))) {
        DropRecord(head.type, flow_producer_.size() < kMaxFlows);
        return Apply::kDone;
      }
      flow_producer_.emplace(flow, innermost);
      if (w != flow_waiting_.end()) {
        for (model::PhaseId consumer : w->second) {
          if (consumer != innermost) builder_->AddEdge({innermost, consumer, "flow"});
        }
        flow_waiting_count_ -= w->second.size();
        flow_waiting_.erase(w);
      }
      break;
    }
    case ev::kRecFlowIn: {
      uint64_t flow = rec.flow;
      auto it = flow_producer_.find(flow);
      if (it != flow_producer_.end()) {
        if (!TakeBudget(sizeof(model::Edge) + 8)) {
          DropRecord(head.type, true);
          return Apply::kDone;
        }
        if (it->second != innermost) builder_->AddEdge({it->second, innermost, "flow"});
      } else {
        if (flow_waiting_count_ >= kMaxFlows) {
          DropRecord(head.type, false);
          return Apply::kDone;
        }
        flow_waiting_[flow].push_back(innermost);
        ++flow_waiting_count_;
      }
      break;
    }
    default:
      break;  // validated by the scan: not reached
  }
  ++events_;
  return Apply::kDone;
}

bool EventCollector::ApplyThread(File* f, Thread* t, Mode mode) {
  while (!t->records.empty()) {
    if (ApplyRecord(f, t, t->records.front(), mode) == Apply::kWait) return false;
    t->records.pop_front();
    --f->pending;
    --queued_;
    t->stall_polls = 0;
  }
  return true;
}

void EventCollector::EndOpen(Thread* t, TimeNs end) {
  const Open& open = t->stack.back();
  builder_->EndPhase(open.id, end, open.keep ? model::RunBuilder::Keep::kInMemory : model::RunBuilder::Keep::kUntilHandedOut);
  open_bytes_ -= std::min(open_bytes_, open.bytes);
  t->stack.pop_back();
}

void EventCollector::CloseFile(File* f, TimeNs end) {
  for (Thread* t : f->thread_order) {
    while (!t->stack.empty()) EndOpen(t, end);
    queued_ -= std::min(queued_, t->records.size());
  }
  own_dropped_ += f->pending;  // what could never be applied
  f->pending = 0;
  // Said on the process's phase: when its in-process events stopped, and why.
  if (f->descriptor_lost && f->proc.phase != 0 && !f->proc_is_parent) {
    builder_->SetPhaseTag(f->proc.phase, "grademl.events_stopped",
                          "the program closed or replaced grademl's event descriptor");
    builder_->SetPhaseTag(f->proc.phase, "grademl.events_stopped_at", std::to_string(TimeOf(f, f->stopped_ticks)));
  }
  if (f->fd >= 0) close(f->fd);
  f->fd = -1;
  f->chunks.clear();
  f->unclaimed.clear();
  f->threads.clear();
  f->thread_order.clear();
  name_bytes_ -= std::min(name_bytes_, f->name_bytes);
  f->name_bytes = 0;
  f->names.clear();
  f->counter_series.clear();
  f->state = File::State::kClosed;
}

void EventCollector::PollFile(File* f, bool final, TimeNs end) {
  if (f->state == File::State::kOpening && !TryReadHeader(f)) {
    if (final && f->state != File::State::kClosed) CloseFile(f, end);
    return;
  }
  if (f->state != File::State::kReading) return;

  // What the process monitor knows, read before the records: once it says the process
  // ended, everything the process committed is visible to the loads below.
  ProcessInfo info = process_of_(static_cast<pid_t>(f->pid));
  // A process that lived and died between two passes of the process monitor is never a
  // phase of its own: its events go under its parent's phase (tagged with their pid).
  bool parent = false;
  if (info.phase == 0 && f->ppid > 0 && (final || ++f->unknown_polls > kUnknownWriterPolls)) {
    info = process_of_(static_cast<pid_t>(f->ppid));
    parent = true;
  }
  if (f->proc.phase == 0) {
    f->proc = info;
    f->proc_is_parent = parent && info.phase != 0;
  } else {
    f->proc.end_ns = info.end_ns;
    if (f->proc.resource == 0) f->proc.resource = info.resource;
  }

  bool can_apply = f->proc.phase != 0 && (f->clock != ev::kClockTsc || ticks_per_ns_ > 0);
  // Records are copied out only when they can be applied (or at the end, to count them):
  // until then they wait in the writer's memory, not in ours.
  bool drained = true;
  if (can_apply || final) {
    ClaimChunks(f);
    Mode mode = !can_apply ? Mode::kDiscard : final ? Mode::kFinal : Mode::kPoll;
    // Threads one after the other, again while any moves on: a record waiting for a name
    // that a thread read later defines goes on in the next round. At the end, the same
    // rounds first as a poll (a name defined in another thread's chunk, read later in this
    // very pass, is waited for), then once more where nothing waits (placeholders for the
    // names never defined).
    auto pump_all = [&](Mode m) {
      ++pass_;
      for (bool progress = true; progress;) {
        progress = false;
        for (Thread* t : f->thread_order) progress |= PumpThread(f, t, m);
      }
    };
    if (mode == Mode::kFinal) pump_all(Mode::kPoll);
    pump_all(mode);
    for (Thread* t : f->thread_order) {
      if (!t->records.empty()) {
        ++t->stall_polls;
        drained = false;
      }
    }
  }
  if (final) {
    CloseFile(f, f->proc.end_ns != 0 ? f->proc.end_ns : end);
  } else if (can_apply && drained && f->proc.end_ns != 0) {
    CloseFile(f, f->proc.end_ns);  // the process is gone and all it wrote is read
  }
}

void EventCollector::Poll(TimeNs now) {
  if (finished_) return;
  MeasureRate(options_.min_rate_span_ns);
  AcceptWriters();
  size_t backlog = options_.backlog_bytes ? options_.backlog_bytes() : builder_->unsent_bytes();
  budget_ = options_.max_backlog_bytes > backlog ? options_.max_backlog_bytes - backlog : 0;
  for (auto& f : files_) {
    if (f->state != File::State::kClosed) PollFile(f.get(), false, now);
  }
  UpdateStats();
}

void EventCollector::Finish(TimeNs end) {
  if (finished_) return;
  AcceptWriters();
  MeasureRate(options_.min_rate_span_ns);
  if (ticks_per_ns_ == 0 && GRADEML_HAVE_TSC && !files_.empty()) {
    // A run shorter than min_rate_span_ns, with events to convert. Every event of the run
    // lies between the first clock pair (the collector's construction, before any writer
    // could connect) and this one, so the rate over this shorter span converts each of them
    // with no more error than the two pairs' own read widths: an event d ns from its
    // anchor is off by d x (relative rate error) <= span x (w0 + w1) / span. Waiting out
    // the 20 ms (what Python's start-up under grademl paid) buys nothing. Only a span under
    // kFinishRateSpanNs is waited out, up to that.
    MeasureRate(kFinishRateSpanNs);
    if (ticks_per_ns_ == 0) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(kFinishRateSpanNs));
      MeasureRate(kFinishRateSpanNs);
    }
  }
  size_t backlog = options_.backlog_bytes ? options_.backlog_bytes() : builder_->unsent_bytes();
  budget_ = options_.max_backlog_bytes > backlog ? options_.max_backlog_bytes - backlog : 0;
  for (auto& f : files_) {
    if (f->state != File::State::kClosed) PollFile(f.get(), true, end);
  }
  finished_ = true;
  UpdateStats();
}

void EventCollector::UpdateStats() {
  // Closed memories leave their counts behind and go.
  std::erase_if(files_, [this](const std::unique_ptr<File>& f) {
    if (f->state != File::State::kClosed) return false;
    if (f->valid) ++closed_valid_;
    if (f->descriptor_lost) ++closed_descriptor_lost_;
    closed_writer_dropped_ += f->writer_dropped;
    closed_writer_too_deep_ += f->writer_too_deep;
    return true;
  });
  Stats s;
  uint64_t writer_dropped = closed_writer_dropped_, writer_too_deep = closed_writer_too_deep_;
  s.files = closed_valid_;
  s.descriptor_lost = closed_descriptor_lost_;
  for (const auto& f : files_) {
    if (f->valid) ++s.files;
    writer_dropped += f->writer_dropped;
    writer_too_deep += f->writer_too_deep;
    s.descriptor_lost += f->descriptor_lost ? 1 : 0;
    s.pending += f->pending;
  }
  // Every writer shares the machine's CPUs: together they cannot have dropped more than one.
  writer_dropped = PlausibleCount(writer_dropped);
  writer_too_deep = std::min(writer_too_deep, writer_dropped);
  s.events = events_;
  s.phases = phases_;
  s.dropped = writer_dropped + own_dropped_;
  s.too_deep = writer_too_deep + own_too_deep_;
  s.phases_dropped = phases_dropped_;
  s.over_backlog = over_backlog_;
  std::lock_guard lock(stats_mu_);
  stats_ = s;
}

EventCollector::Stats EventCollector::stats() const {
  std::lock_guard lock(stats_mu_);
  return stats_;
}

}  // namespace grademl::collect
