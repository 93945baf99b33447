#include "collect/event_collector.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
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

template <typename T>
T LoadAcquire(const void* p) {
  return __atomic_load_n(static_cast<const T*>(p), __ATOMIC_ACQUIRE);
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
  const uint8_t* base = nullptr;  // the ChunkHeader
  uint32_t tid = 0;
  uint32_t scanned = 0;   // payload bytes validated (names registered)
  uint32_t applied = 0;   // payload bytes turned into model objects
  bool stopped = false;   // a bad record or `committed`: nothing more is read
  bool sealed = false;    // its thread went on in a later chunk, and it was read to its end
};

struct EventCollector::Thread {
  uint32_t tid = 0;
  std::vector<model::PhaseId> stack;  // open phases, innermost last
  std::deque<Chunk*> chunks;          // not yet fully applied, in index order
  int stall_polls = 0;                // polls its next record has waited for a name
};

// Polls to wait for the process monitor to discover a writer before using its parent.
constexpr int kUnknownWriterPolls = 10;

struct EventCollector::File {
  enum class State { kOpening, kReading, kClosed };
  std::string path;
  State state = State::kOpening;
  int fd = -1;
  const uint8_t* map = nullptr;
  uint64_t size = 0;  // bytes of the mapping that may be read
  int bad_magic_polls = 0;
  bool valid = false;  // the header was good

  int32_t pid = 0;
  int32_t ppid = 0;          // the writer's parent (header), for writers grademl never saw
  int unknown_polls = 0;     // polls that found the writer unknown to the process monitor
  uint32_t clock = 0;
  uint64_t anchor_ticks = 0;
  int64_t anchor_epoch_ns = 0;
  uint64_t writer_dropped = 0;

  ProcessInfo proc;
  uint64_t known_chunks = 0;
  std::vector<std::unique_ptr<Chunk>> chunks;  // every chunk seen, owner
  std::vector<Chunk*> unclaimed;               // no record committed yet
  std::unordered_map<uint32_t, std::unique_ptr<Thread>> threads;
  std::vector<Thread*> thread_order;
  std::unordered_map<uint32_t, std::string> names;
  std::unordered_map<uint32_t, model::SeriesId> counter_series;  // name id -> series
  size_t pending = 0;  // records scanned, not applied
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
}

EventCollector::~EventCollector() {
  for (auto& f : files_) {
    if (f->map) munmap(const_cast<uint8_t*>(f->map), ev::kFileCapacity);
    if (f->fd >= 0) close(f->fd);
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

void EventCollector::ListDirectory() {
  struct stat st;
  if (stat(dir_.c_str(), &st) != 0) return;
  int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * kNsPerSec + st.st_mtim.tv_nsec;
  if (mtime == dir_mtime_ns_ && polls_since_listing_ < options_.rescan_every) return;
  DIR* d = opendir(dir_.c_str());
  if (!d) return;
  dir_mtime_ns_ = mtime;
  polls_since_listing_ = 0;
  while (dirent* e = readdir(d)) {
    std::string_view name(e->d_name);
    if (name.size() <= 4 || name.substr(name.size() - 4) != ".gev") continue;
    if (seen_names_.count(std::string(name))) continue;
    seen_names_.emplace(name);
    OpenFile(std::string(name));
  }
  closedir(d);
}

void EventCollector::OpenFile(const std::string& name) {
  auto f = std::make_unique<File>();
  f->path = dir_ + "/" + name;
  files_.push_back(std::move(f));
}

bool EventCollector::TryMapHeader(File* f) {
  if (f->fd < 0) {
    f->fd = open(f->path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (f->fd < 0) {
      if (errno == ENOENT || errno == ELOOP) f->state = File::State::kClosed;
      return false;
    }
  }
  if (!f->map) {
    struct stat st;
    if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      f->state = File::State::kClosed;
      return false;
    }
    if (static_cast<uint64_t>(st.st_size) < ev::kHeaderBytes) return false;  // not sized yet
    void* m = mmap(nullptr, ev::kFileCapacity, PROT_READ, MAP_SHARED, f->fd, 0);
    if (m == MAP_FAILED) {
      f->state = File::State::kClosed;
      return false;
    }
    f->map = static_cast<const uint8_t*>(m);
    f->size = std::min<uint64_t>(static_cast<uint64_t>(st.st_size), ev::kFileCapacity);
  }
  // The writer fills the header, then stores the magic (release): the magic is read first.
  uint64_t magic = LoadAcquire<uint64_t>(f->map);
  if (magic == 0) return false;  // not written yet
  if (std::memcmp(&magic, ev::kFileMagic, sizeof magic) != 0) {
    if (++f->bad_magic_polls >= kBadMagicPolls) f->state = File::State::kClosed;
    return false;
  }
  ev::FileHeader h;
  std::memcpy(&h, f->map, sizeof h);
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
  if (f->size >= ev::kFileCapacity) {  // the normal case: nothing more to learn from the fd
    close(f->fd);
    f->fd = -1;
  }
  return true;
}

bool EventCollector::ScanChunk(File* f, Chunk* c) {
  if (c->stopped) return false;
  uint32_t committed = LoadAcquire<uint32_t>(c->base);
  if (committed > ev::kChunkPayload) {
    c->stopped = true;
    return false;
  }
  const uint8_t* payload = c->base + kChunkHeaderBytes;
  while (c->scanned + sizeof(ev::RecordHead) <= committed) {
    auto head = ReadAt<ev::RecordHead>(payload + c->scanned);
    size_t size = RecordSize(head);
    if (size == 0) {
      c->stopped = true;
      return false;
    }
    if (c->scanned + size > committed) break;  // never committed that way: wait (harmless if never)
    if (head.type == ev::kRecName) {
      if (head.id != 0) {
        f->names.try_emplace(head.id, reinterpret_cast<const char*>(payload + c->scanned + sizeof head), head.length);
      }
    } else {
      ++f->pending;
    }
    c->scanned += static_cast<uint32_t>(size);
  }
  return true;
}

void EventCollector::ScanChunks(File* f) {
  // New chunks: those claimed since the last pass, within what the file really holds.
  uint64_t next = LoadAcquire<uint64_t>(f->map + offsetof(ev::FileHeader, next_chunk));
  uint64_t fit = f->size < ev::kHeaderBytes ? 0 : (f->size - ev::kHeaderBytes) / ev::kChunkBytes;
  uint64_t n = std::min({next, ev::kMaxChunks, fit});
  for (uint64_t i = f->known_chunks; i < n; ++i) {
    auto c = std::make_unique<Chunk>();
    c->index = i;
    c->base = f->map + ev::kHeaderBytes + i * ev::kChunkBytes;
    f->unclaimed.push_back(c.get());
    f->chunks.push_back(std::move(c));
  }
  f->known_chunks = std::max(f->known_chunks, n);

  // Chunks whose first record is committed now belong to their thread. Loaded from the
  // highest index down: a thread fills a chunk before it takes a later one, so once a later
  // chunk of a thread is seen committed, the acquire makes its earlier ones visible too,
  // and each thread's chunks join its list in index order.
  std::vector<Chunk*> claimed;
  for (size_t k = f->unclaimed.size(); k-- > 0;) {
    Chunk* c = f->unclaimed[k];
    if (LoadAcquire<uint32_t>(c->base) == 0) continue;
    c->tid = ReadAt<uint32_t>(c->base + offsetof(ev::ChunkHeader, tid));
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
  // final (the later one's commit was seen after it): read it to its end once, then seal it.
  for (Thread* t : f->thread_order) {
    for (size_t i = 0; i < t->chunks.size(); ++i) {
      Chunk* c = t->chunks[i];
      if (c->sealed || c->stopped) continue;
      ScanChunk(f, c);
      if (i + 1 < t->chunks.size()) c->sealed = true;
    }
  }
}

EventCollector::Apply EventCollector::ApplyRecord(File* f, Thread* t, const uint8_t* rec, bool final) {
  auto head = ReadAt<ev::RecordHead>(rec);
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
  auto time_of = [&](uint64_t ticks) -> TimeNs {
    auto d = static_cast<int64_t>(ticks - f->anchor_ticks);
    if (f->clock == ev::kClockMonotonic) return f->anchor_epoch_ns + d;
    return f->anchor_epoch_ns + std::llround(static_cast<double>(d) / ticks_per_ns_);
  };
  model::PhaseId innermost = t->stack.empty() ? f->proc.phase : t->stack.back();

  switch (head.type) {
    case ev::kRecBegin:
    case ev::kRecTypedBegin:
    case ev::kRecInstant: {
      std::string name, type;
      if (!name_of(head.id, &name)) return Apply::kWait;
      uint64_t ticks;
      if (head.type == ev::kRecTypedBegin) {
        if (!name_of(ReadAt<uint32_t>(rec + 8), &type)) return Apply::kWait;
        ticks = ReadAt<uint64_t>(rec + 16);
      } else {
        type = name;
        ticks = ReadAt<uint64_t>(rec + 8);
      }
      TimeNs start = time_of(ticks);
      model::PhaseSpec spec{.parent = innermost, .name = std::move(name), .type = TypeOf(type),
                            .start_ns = start, .host = host_, .pid = f->pid, .tags = {}};
      model::PhaseId id = builder_->BeginPhase(spec);
      ++phases_;
      if (head.type == ev::kRecInstant) {
        builder_->EndPhase(id, start);
      } else {
        t->stack.push_back(id);
      }
      break;
    }
    case ev::kRecEnd: {
      if (!t->stack.empty()) {  // an unmatched end has nothing to end
        builder_->EndPhase(t->stack.back(), time_of(ReadAt<uint64_t>(rec + 8)));
        t->stack.pop_back();
      }
      break;
    }
    case ev::kRecTag: {
      std::string key, value;
      if (!name_of(head.id, &key) || !name_of(ReadAt<uint32_t>(rec + 8), &value)) return Apply::kWait;
      builder_->SetPhaseTag(innermost, key, value);
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
      TimeNs ts = time_of(ReadAt<uint64_t>(rec + 8));
      // Samples of a series go out in time order; threads are read one after the other,
      // so a sample older than the series' last one is moved up to it.
      TimeNs& last = series_last_t_[sid];
      ts = std::max(ts, last);
      last = ts;
      builder_->AddSample(sid, ts, ReadAt<double>(rec + 16));
      break;
    }
    case ev::kRecFlowOut: {
      uint64_t flow = ReadAt<uint64_t>(rec + 16);
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
      uint64_t flow = ReadAt<uint64_t>(rec + 16);
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
  while (!t->chunks.empty()) {
    Chunk* c = t->chunks.front();
    const uint8_t* payload = c->base + kChunkHeaderBytes;
    while (c->applied < c->scanned) {
      const uint8_t* rec = payload + c->applied;
      auto head = ReadAt<ev::RecordHead>(rec);
      if (head.type != ev::kRecName) {
        if (ApplyRecord(f, t, rec, final) == Apply::kWait) return false;
        --f->pending;
        t->stall_polls = 0;
      }
      c->applied += static_cast<uint32_t>(RecordSize(head));
    }
    if (!(c->sealed || c->stopped)) break;  // its thread may still append to it
    t->chunks.pop_front();
  }
  return true;
}

void EventCollector::CloseFile(File* f, TimeNs end) {
  for (Thread* t : f->thread_order) {
    while (!t->stack.empty()) {
      builder_->EndPhase(t->stack.back(), end);
      t->stack.pop_back();
    }
  }
  own_dropped_ += f->pending;  // what could never be applied
  f->pending = 0;
  if (f->map) munmap(const_cast<uint8_t*>(f->map), ev::kFileCapacity);
  f->map = nullptr;
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
  if (f->state == File::State::kOpening && !TryMapHeader(f)) {
    if (final && f->state != File::State::kClosed) CloseFile(f, end);
    return;
  }
  if (f->state != File::State::kReading) return;

  // What the process monitor knows, read before the records: once it says the process
  // ended, everything the process committed is visible to the loads below.
  ProcessInfo info = process_of_(static_cast<pid_t>(f->pid));
  // A process that lived and died between two passes of the process monitor is never a
  // phase of its own: its events go under its parent's phase (tagged with their pid).
  if (info.phase == 0 && f->ppid > 0 && (final || ++f->unknown_polls > kUnknownWriterPolls)) {
    info = process_of_(static_cast<pid_t>(f->ppid));
  }
  if (f->proc.phase == 0) {
    f->proc = info;
  } else {
    f->proc.end_ns = info.end_ns;
    if (f->proc.resource == 0) f->proc.resource = info.resource;
  }

  if (f->fd >= 0) {  // a file not yet at its full size (normally only right after creation)
    struct stat st;
    if (fstat(f->fd, &st) == 0) {
      f->size = std::max(f->size, std::min<uint64_t>(static_cast<uint64_t>(st.st_size), ev::kFileCapacity));
    }
    if (f->size >= ev::kFileCapacity) {
      close(f->fd);
      f->fd = -1;
    }
  }
  f->writer_dropped = LoadAcquire<uint64_t>(f->map + offsetof(ev::FileHeader, dropped_events));
  ScanChunks(f);

  bool can_apply = f->proc.phase != 0 && (f->clock != ev::kClockTsc || ticks_per_ns_ > 0);
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
  ++polls_since_listing_;
  ListDirectory();
  for (auto& f : files_) {
    if (f->state != File::State::kClosed) PollFile(f.get(), false, now);
  }
  UpdateStats();
}

void EventCollector::Finish(TimeNs end) {
  if (finished_) return;
  polls_since_listing_ = options_.rescan_every;  // list the directory whatever its mtime says
  ListDirectory();
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
