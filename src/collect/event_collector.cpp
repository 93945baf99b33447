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

#include "instrument/event_format.h"

namespace grademl::collect {

namespace ev = grademl::instrument;

namespace {

constexpr size_t kChunkHeaderBytes = sizeof(ev::ChunkHeader);
constexpr int kBadMagicPolls = 10;  // a wrong magic is final after this many polls (a torn write otherwise)
constexpr int kConnectionPolls = 50;  // a connection that sends nothing for this many polls is closed
constexpr size_t kMaxConnections = 1024;  // more wait in the listen backlog

// Copies `n` bytes at `offset` of a writer's memory; false when they are not all there
// (a memory shorter than it claims). pread, not a mapping: nothing can fault. The acquire
// fence orders it after an earlier read of a `committed` (the writer's release store); the
// system call itself orders it too, which is all a ThreadSanitizer build (where g++ refuses
// standalone fences) relies on: TSan cannot see into the kernel's copy anyway.
bool ReadShared(int fd, uint64_t offset, void* out, size_t n) {
#if !defined(__SANITIZE_THREAD__)
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

struct EventCollector::Thread {
  uint32_t tid = 0;
  std::vector<model::PhaseId> stack;  // open phases, innermost last
  std::vector<TimeNs> starts;         // their start times
  std::deque<Chunk*> chunks;          // not yet read to their end, in index order
  std::deque<Record> records;         // read, not yet applied
  int stall_polls = 0;                // polls its next record has waited for a name
};

// Polls to wait for the process monitor to discover a writer before using its parent.
constexpr int kUnknownWriterPolls = 10;

struct EventCollector::File {
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
  if (!dir_.empty()) Listen();
}

EventCollector::~EventCollector() {
  for (auto& f : files_) {
    if (f->fd >= 0) close(f->fd);
  }
  for (Connection& c : connections_) close(c.fd);
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(socket_path_.c_str());
  }
}

double EventCollector::tsc_ticks_per_ns() const { return ticks_per_ns_; }

void EventCollector::MeasureRate() {
  if (options_.tsc_ticks_per_ns > 0) return;
#if GRADEML_HAVE_TSC
  ClockPair p = ReadClockPair();
  int64_t span = p.mono - mono0_;
  if (span >= options_.min_rate_span_ns && p.tsc > tsc0_) {
    ticks_per_ns_ = static_cast<double>(p.tsc - tsc0_) / static_cast<double>(span);
  }
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

void EventCollector::ScanChunk(File* f, Thread* t, Chunk* c) {
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
      if (head.id != 0) f->names.try_emplace(head.id, reinterpret_cast<const char*>(p + sizeof head), head.length);
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

void EventCollector::ScanChunks(File* f) {
  // New chunks: those claimed since the last pass, within what the memory really holds.
  ev::FileHeader h{};
  if (!ReadShared(f->fd, 0, &h, sizeof h)) return;
  f->writer_dropped = h.dropped_events;
  f->writer_too_deep = h.dropped_too_deep;
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
  // thread's chunks join its list in index order.
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

  // New records of every thread's chunks. A chunk followed by a later one of its thread is
  // final (the later one's commit was seen after it): read it to its end once, release it.
  for (Thread* t : f->thread_order) {
    while (!t->chunks.empty()) {
      Chunk* c = t->chunks.front();
      ScanChunk(f, t, c);
      if (t->chunks.size() == 1 && !c->stopped) break;  // its thread may still append to it
      ReleaseChunk(f, c);
      t->chunks.pop_front();
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

EventCollector::Apply EventCollector::ApplyRecord(File* f, Thread* t, const Record& rec, bool final) {
  const Record& head = rec;
  auto name_of = [&](uint32_t id, std::string* out) {
    auto it = f->names.find(id);
    if (it != f->names.end()) {
      *out = it->second;
      return true;
    }
    if (!final && t->stall_polls < options_.name_wait_polls) return false;
    *out = "#" + std::to_string(id);  // never defined: a placeholder rather than a stuck thread
    return true;
  };
  auto time_of = [&](uint64_t ticks) { return TimeOf(f, ticks); };
  model::PhaseId innermost = t->stack.empty() ? f->proc.phase : t->stack.back();

  switch (head.type) {
    case ev::kRecBegin:
    case ev::kRecTypedBegin:
    case ev::kRecInstant: {
      std::string name, type;
      if (!name_of(head.id, &name)) return Apply::kWait;
      uint64_t ticks;
      if (head.type == ev::kRecTypedBegin) {
        if (!name_of(rec.aux, &type)) return Apply::kWait;
      } else {
        type = name;
      }
      ticks = rec.ticks;
      TimeNs start = time_of(ticks);
      // A Begin timed before the innermost open phase began (grademl_begin_at: an operation
      // recorded once it completed) nests under the innermost one that contains its start.
      model::PhaseId parent = innermost;
      for (size_t k = t->stack.size(); k > 0 && t->starts[k - 1] > start; --k) {
        parent = k >= 2 ? t->stack[k - 2] : f->proc.phase;
      }
      model::PhaseSpec spec{.parent = parent, .name = std::move(name), .type = TypeOf(type),
                            .start_ns = start, .host = host_, .pid = f->pid, .tags = {}};
      model::PhaseId id = builder_->BeginPhase(spec);
      ++phases_;
      if (head.type == ev::kRecInstant) {
        builder_->EndPhase(id, start);
      } else {
        t->stack.push_back(id);
        t->starts.push_back(start);
      }
      break;
    }
    case ev::kRecEnd: {
      if (!t->stack.empty()) {  // an unmatched end has nothing to end
        builder_->EndPhase(t->stack.back(), time_of(rec.ticks));
        t->stack.pop_back();
        t->starts.pop_back();
      }
      break;
    }
    case ev::kRecTag: {
      std::string key, value;
      if (!name_of(head.id, &key) || !name_of(rec.aux, &value)) return Apply::kWait;
      builder_->SetPhaseTag(innermost, key, value);
      break;
    }
    case ev::kRecTagInt: {
      std::string key;
      if (!name_of(head.id, &key)) return Apply::kWait;
      builder_->SetPhaseTag(innermost, key, std::to_string(static_cast<int64_t>(rec.flow)));
      break;
    }
    case ev::kRecProcessTag: {
      std::string key, value;
      if (!name_of(head.id, &key) || !name_of(rec.aux, &value)) return Apply::kWait;
      // Only the writer's own process phase: a writer grademl never saw (its events under
      // its parent's phase) would tag its parent.
      if (f->proc_is_parent) {
        ++own_dropped_;
        break;
      }
      builder_->SetPhaseTag(f->proc.phase, key, value);
      break;
    }
    case ev::kRecCounter: {
      model::SeriesId sid = 0;
      auto it = f->counter_series.find(head.id);
      if (it != f->counter_series.end()) {
        sid = it->second;
      } else {
        std::string name;
        if (!name_of(head.id, &name)) return Apply::kWait;
        if (f->proc.resource == 0) {  // nowhere to put it
          ++own_dropped_;
          break;
        }
        std::string series_name = "user." + name;
        auto [sit, inserted] = series_.try_emplace({f->proc.resource, series_name}, 0);
        if (inserted) {
          model::SeriesInfo info;
          info.resource = f->proc.resource;
          info.name = series_name;
          info.unit = "value";
          info.kind = model::SeriesKind::kGauge;
          sit->second = builder_->AddSeries(info);
        }
        sid = sit->second;
        f->counter_series.emplace(head.id, sid);
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
      auto [it, inserted] = flow_producer_.try_emplace(flow, innermost);
      if (inserted) {
        auto w = flow_waiting_.find(flow);
        if (w != flow_waiting_.end()) {
          for (model::PhaseId consumer : w->second) {
            if (consumer != innermost) builder_->AddEdge({innermost, consumer, "flow"});
          }
          flow_waiting_.erase(w);
        }
      }
      break;
    }
    case ev::kRecFlowIn: {
      uint64_t flow = rec.flow;
      auto it = flow_producer_.find(flow);
      if (it != flow_producer_.end()) {
        if (it->second != innermost) builder_->AddEdge({it->second, innermost, "flow"});
      } else {
        flow_waiting_[flow].push_back(innermost);
      }
      break;
    }
    default:
      break;  // validated by the scan: not reached
  }
  ++events_;
  return Apply::kDone;
}

bool EventCollector::ApplyThread(File* f, Thread* t, bool final) {
  while (!t->records.empty()) {
    if (ApplyRecord(f, t, t->records.front(), final) == Apply::kWait) return false;
    t->records.pop_front();
    --f->pending;
    t->stall_polls = 0;
  }
  return true;
}

void EventCollector::CloseFile(File* f, TimeNs end) {
  for (Thread* t : f->thread_order) {
    while (!t->stack.empty()) {
      builder_->EndPhase(t->stack.back(), end);
      t->stack.pop_back();
      t->starts.pop_back();
    }
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
  if (can_apply || final) ScanChunks(f);
  bool drained = true;
  if (can_apply) {
    for (Thread* t : f->thread_order) {
      if (!ApplyThread(f, t, final)) {
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
  MeasureRate();
  AcceptWriters();
  for (auto& f : files_) {
    if (f->state != File::State::kClosed) PollFile(f.get(), false, now);
  }
  UpdateStats();
}

void EventCollector::Finish(TimeNs end) {
  if (finished_) return;
  AcceptWriters();
  MeasureRate();
  if (ticks_per_ns_ == 0 && GRADEML_HAVE_TSC && !files_.empty()) {
    // A run shorter than the rate's minimum span, with events to convert: wait out the rest
    // of the span (at most that). Runs without instrumented processes never wait.
    std::this_thread::sleep_for(std::chrono::nanoseconds(options_.min_rate_span_ns));
    MeasureRate();
  }
  for (auto& f : files_) {
    if (f->state != File::State::kClosed) PollFile(f.get(), true, end);
  }
  finished_ = true;
  UpdateStats();
}

void EventCollector::UpdateStats() {
  Stats s;
  size_t writer_dropped = 0;
  for (const auto& f : files_) {
    if (f->valid) ++s.files;
    writer_dropped += f->writer_dropped;
    s.too_deep += f->writer_too_deep;
    s.descriptor_lost += f->descriptor_lost ? 1 : 0;
    s.pending += f->pending;
  }
  s.events = events_;
  s.phases = phases_;
  s.dropped = writer_dropped + own_dropped_;
  std::lock_guard lock(stats_mu_);
  stats_ = s;
}

EventCollector::Stats EventCollector::stats() const {
  std::lock_guard lock(stats_mu_);
  return stats_;
}

}  // namespace grademl::collect
