// The event writer: lives in user processes (linked statically, or as libgrademl.so), so it
// uses nothing beyond libc, pthreads and the C++ standard library. Format and transport
// (a sealed memfd handed to grademl's collector over a Unix socket): instrument/event_format.h.
//
// The writer never faults: the memory cannot shrink (sealed), and every chunk is reserved
// before it is handed to a thread; when that fails the thread's events are dropped and
// counted.
//
// The writer never writes through a descriptor it does not own: it reserves through its
// mapping (MADV_POPULATE_WRITE) and closes the memfd once the collector has it, so the
// program may close or reuse any descriptor number. Only where the kernel cannot populate
// a mapping (before Linux 5.14) does it keep the memfd, at a high number, close-on-exec,
// and check before every fallocate that the number still names the memory it created
// (device, inode, seals); once the program closed or replaced it, the writer takes no more
// chunks (its later events are dropped, counted, and the header says why) and never uses
// or closes that number again.
//
// Per thread: the chunk it owns, the write offset in it, and how many of its open phases
// were written or dropped. Records never straddle chunks. Space for the End of every
// written, still open Begin is kept in reserve (`limit`), so that once the file is full a
// written Begin still gets its End, and a dropped Begin's End is dropped too: the file
// always holds balanced phases (except where the process died with phases open).
//
// A thread that exits with phases open (a Python thread that returned inside grademl.begin,
// a C++ thread that called grademl_begin without grademl_end) has them ended at its exit:
// a pthread key, set once the thread has a chunk, runs EndOpenPhasesAtThreadExit when the
// thread ends (pthread_exit or a return from its start routine, C++ and Python threads
// alike), which writes the reserved Ends with the exit's time. Otherwise they would stay
// open until the process ends. The main thread's phases end with the process.
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>

#include "grademl/grademl_c.h"
#include "instrument/event_format.h"
#include "instrument/writer.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

namespace grademl::instrument {
namespace {

constexpr uint32_t kMaxNameBytes = 1024;
constexpr uint32_t kEndBytes = 16;

enum State : int { kUninit = 0, kEnabled = 1, kDisabled = 2 };

// How chunks are reserved (see the top): through the mapping, keeping no descriptor, or
// through the memfd's descriptor where the kernel cannot populate a mapping.
enum Reservation : int { kReserveMapping = 0, kReserveDescriptor = 1 };
constexpr int kSeals = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

std::atomic<int> g_state{kUninit};
char* g_base = nullptr;  // the mapping of the event memory, kFileCapacity bytes
FileHeader* g_header = nullptr;
Reservation g_reservation = kReserveMapping;  // set at attach, under g_mu
int g_fd = -1;           // kReserveDescriptor: the memfd (a high number); else -1 once handed over
dev_t g_fd_dev = 0;      // ... and what it names: the memory this writer created
ino_t g_fd_ino = 0;
std::atomic<bool> g_fd_lost{false};  // the program closed or replaced g_fd: never touch it again
uint64_t g_max_chunks = kMaxChunks;
std::atomic<bool> g_fail_reserve{false};  // test hook: reservations "fail"
pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;  // init, the name table
bool g_atfork_registered = false;

// The name table: never destroyed (other threads may still call in during exit).
struct NameTable {
  std::deque<std::string> names;  // names[id - 1]; deque: elements never move
  std::unordered_map<std::string_view, uint32_t> ids;
};
NameTable* g_table = nullptr;

struct ThreadState {
  char* payload;        // the records area of the current chunk, or null
  uint32_t* committed;  // its ChunkHeader::committed
  uint32_t off;         // bytes written in payload
  uint32_t limit;       // bytes usable by records other than End: kChunkPayload - 16 * depth_written
  uint32_t depth_written;  // open phases whose Begin is in the file
  uint32_t depth_dropped;  // open phases above those whose Begin was dropped
  int32_t tid;
  bool full;            // no chunk could be had: the file is full
};
// Not initial-exec TLS (tried for issue 26): libgrademl.so is dlopen'ed by Python, often after
// torch, and glibc's surplus of static TLS for such libraries is then used up: the dlopen
// fails ("cannot allocate memory in static TLS block", measured after importing torch,
// sklearn and pandas, for this 40-byte struct) and the program's events would be lost.
// The default model costs a __tls_get_addr call per event call (a few ns).
[[gnu::tls_model("global-dynamic")]] constinit thread_local ThreadState t_state{};

// Its destructor ends the phases a thread left open when the thread exits (see the top).
pthread_key_t g_thread_exit_key;
bool g_thread_exit_key_made = false;  // under g_mu

// Per-thread cache of grademl_intern: pointer -> id, checked against the table's copy of
// the name (a pointer may be reused for other contents).
struct CacheEntry {
  const char* ptr;
  const char* canon;
  uint32_t id;
};
constexpr int kCacheBits = 6;
constinit thread_local CacheEntry t_cache[1 << kCacheBits]{};

inline uint64_t Now() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
#endif
}

inline void Put32(char* p, uint32_t v) { memcpy(p, &v, 4); }
inline void Put64(char* p, uint64_t v) { memcpy(p, &v, 8); }
inline void PutHead(char* p, RecordType type, uint32_t id, uint16_t length = 0) {
  RecordHead h{uint8_t(type), 0, length, id};
  memcpy(p, &h, sizeof(h));
}
inline void Commit(ThreadState& t) { __atomic_store_n(t.committed, t.off, __ATOMIC_RELEASE); }
inline void CountDropped() {
  if (g_header != nullptr) __atomic_fetch_add(&g_header->dropped_events, 1, __ATOMIC_RELAXED);
}
inline void CountTooDeep() {
  if (g_header != nullptr) __atomic_fetch_add(&g_header->dropped_too_deep, 1, __ATOMIC_RELAXED);
}

void ChildAfterFork();

// Whether descriptor `fd` still names the memory this writer created: the same device and
// inode (which cannot be reused while the memory is mapped here) and the seals it set.
bool DescriptorIsOurs(int fd) {
  struct stat st {};
  return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == g_fd_dev && st.st_ino == g_fd_ino &&
         fcntl(fd, F_GET_SEALS) == kSeals;
}

// The program closed or replaced the writer's descriptor: no chunk is taken from now on
// (events are dropped and counted as with a full memory), the header says when, and the
// descriptor number is never used or closed again (it may be the program's file now).
void LoseDescriptor() {
  bool was = false;
  if (!g_fd_lost.compare_exchange_strong(was, true)) return;
  if (g_header != nullptr) {
    __atomic_store_n(&g_header->stopped_ticks, Now(), __ATOMIC_RELAXED);
    __atomic_fetch_or(&g_header->writer_flags, uint32_t(kWriterDescriptorLost), __ATOMIC_RELEASE);
  }
}

void Detach() {  // with g_mu held (or in a forked child)
  if (g_base != nullptr) munmap(g_base, kFileCapacity);
  // A forked child (or a test) leaves the memory: close the descriptor only if it is still
  // the writer's own.
  if (g_fd >= 0 && !g_fd_lost.load() && DescriptorIsOurs(g_fd)) close(g_fd);
  g_base = nullptr;
  g_header = nullptr;
  g_fd = -1;
  g_fd_dev = 0;
  g_fd_ino = 0;
  g_fd_lost.store(false);
  g_reservation = kReserveMapping;
  t_state = ThreadState{};
  g_state.store(kUninit, std::memory_order_release);
}

void PrepareFork() { pthread_mutex_lock(&g_mu); }
void ParentAfterFork() { pthread_mutex_unlock(&g_mu); }
void ChildAfterFork() {
  // Only this thread exists in the child. Leave the parent's memory to the parent.
  g_mu = PTHREAD_MUTEX_INITIALIZER;
  Detach();
}

// Backs [offset, offset + len) of the memory with pages, so that writing there can never
// fault. False when the memory cannot be had (memory limit, errno ENOMEM), when the kernel
// cannot populate a mapping (errno EINVAL), or when the descriptor was lost.
bool ReserveMemory(uint64_t offset, uint64_t len) {
  if (g_fail_reserve.load(std::memory_order_relaxed)) {
    errno = ENOMEM;
    return false;
  }
  int rc;
  if (g_reservation == kReserveMapping) {
    // Allocates the pages and maps them writable; reports what a write fault would have
    // met (no memory) as an error instead of a signal.
    int tries = 0;
    do {
      rc = madvise(g_base + offset, len, MADV_POPULATE_WRITE);
    } while (rc != 0 && (errno == EINTR || errno == EAGAIN) && ++tries < 100);
    return rc == 0;
  }
  if (g_fd_lost.load(std::memory_order_acquire)) return false;
  if (!DescriptorIsOurs(g_fd)) {
    LoseDescriptor();
    return false;
  }
  // KEEP_SIZE: even a descriptor swapped between the check and this call (another thread
  // of the program closing and reopening that very number) could not change a file's size.
  do {
    rc = fallocate(g_fd, FALLOC_FL_KEEP_SIZE, off_t(offset), off_t(len));
  } while (rc != 0 && errno == EINTR);
  if (rc == 0) (void)madvise(g_base + offset, len, MADV_POPULATE_WRITE);  // fault in at once
  return rc == 0;
}

// Takes a new chunk for this thread. False when the memory is full or cannot be reserved.
bool AcquireChunk(ThreadState& t) {
  uint64_t idx = __atomic_fetch_add(&g_header->next_chunk, 1, __ATOMIC_RELAXED);
  if (idx >= g_max_chunks || idx >= kMaxChunks) return false;
  char* chunk = g_base + kHeaderBytes + idx * kChunkBytes;
  // Never touch a page that is not backed: a failed reservation drops events instead.
  // Reserving also faults the chunk's pages in at once, rather than one fault per 4 KiB on
  // the hot path.
  if (!ReserveMemory(kHeaderBytes + idx * kChunkBytes, kChunkBytes)) return false;
  if (t.tid == 0) t.tid = int32_t(syscall(SYS_gettid));
  // Once per thread (the key's value is per thread): be told when it exits.
  if (g_thread_exit_key_made && pthread_getspecific(g_thread_exit_key) == nullptr) {
    pthread_setspecific(g_thread_exit_key, reinterpret_cast<void*>(1));
  }
  auto* ch = reinterpret_cast<ChunkHeader*>(chunk);
  ch->tid = uint32_t(t.tid);
  t.payload = chunk + sizeof(ChunkHeader);
  t.committed = &ch->committed;
  t.off = 0;
  t.limit = uint32_t(kChunkPayload) - kEndBytes * t.depth_written;
  return true;
}

// Room for `need` bytes of records other than End at the thread's cursor, keeping the
// reserve for open phases' Ends. Null when there is none (memory full). Every record fits
// a fresh chunk at any depth up to kMaxDepth.
char* Reserve(ThreadState& t, uint32_t need) {
  if (t.payload != nullptr && t.off + need <= t.limit) return t.payload + t.off;
  if (t.full || uint64_t(need) + uint64_t(kEndBytes) * t.depth_written > kChunkPayload) return nullptr;
  if (!AcquireChunk(t)) {
    t.full = true;
    return nullptr;
  }
  return t.payload + t.off;
}

// Writes a name record for `id` in this thread's chunk. With g_mu held.
bool EmitName(ThreadState& t, uint32_t id, std::string_view name) {
  uint32_t size = uint32_t(sizeof(RecordHead) + ((name.size() + 7) & ~size_t(7)));
  char* p = Reserve(t, size);
  if (p == nullptr) return false;
  PutHead(p, kRecName, id, uint16_t(name.size()));
  memcpy(p + sizeof(RecordHead), name.data(), name.size());
  memset(p + sizeof(RecordHead) + name.size(), 0, size - sizeof(RecordHead) - name.size());
  t.off += size;
  Commit(t);
  return true;
}

// Connects to the collector's socket in `dir`, non-blocking. -1 when none listens.
int ConnectCollector(const char* dir) {
  int sock = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (sock < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  int dir_fd = -1;
  int n = snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/%s", dir, kSocketName);
  if (n < 0 || size_t(n) >= sizeof(addr.sun_path)) {  // too long: go through the directory's fd
    dir_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) n = snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d/%s", dir_fd, kSocketName);
  }
  int rc = -1;
  if (n > 0 && size_t(n) < sizeof(addr.sun_path)) {
    // A full backlog (EAGAIN) is the only wait: a burst of starting processes, for at most
    // about 100 ms in all.
    for (int attempt = 0; attempt < 100; ++attempt) {
      rc = connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
      if (rc == 0 || errno != EAGAIN) break;
      usleep(1000);
    }
  }
  if (dir_fd >= 0) close(dir_fd);
  if (rc != 0) {
    close(sock);
    return -1;
  }
  return sock;
}

// Hands the memory's descriptor to the collector (SCM_RIGHTS). Synchronous: once this
// returns, the memory outlives this process.
bool SendMemory(int sock, int fd) {
  char byte = 'G';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &fd, sizeof(int));
  ssize_t n;
  do {
    n = sendmsg(sock, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  return n == 1;
}

// Creates the sealed event memory: a memfd of kFileCapacity bytes that can neither shrink
// nor grow. -1 on failure.
int CreateMemory() {
  int fd = memfd_create("grademl-events", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  if (ftruncate(fd, off_t(kFileCapacity)) != 0 || fcntl(fd, F_ADD_SEALS, kSeals) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// The descriptor reservation (kReserveDescriptor): moves the memfd out of the program's
// way, to a high number (close-on-exec), and records what it names. The program's open()
// takes the lowest free number, so it reaches this one only with hundreds of files open.
void KeepDescriptorHigh() {
  rlimit rl{};
  uint64_t soft = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? rl.rlim_cur : 1024;
  // Not the very top (a table of a million descriptors costs the kernel memory).
  int floor = int(std::min<uint64_t>(1000, soft - soft / 8));
  if (floor > g_fd) {
    int high = fcntl(g_fd, F_DUPFD_CLOEXEC, floor);
    if (high >= 0) {
      close(g_fd);
      g_fd = high;
    }
  }
  struct stat st {};
  if (fstat(g_fd, &st) == 0) {
    g_fd_dev = st.st_dev;
    g_fd_ino = st.st_ino;
  }
}

// GRADEML_WRITER_RESERVE=descriptor picks the fallback reservation where the kernel would
// allow the mapping one (for tests of the fallback, and as a way out).
Reservation PreferredReservation() {
  const char* v = getenv("GRADEML_WRITER_RESERVE");
  return v != nullptr && strcmp(v, "descriptor") == 0 ? kReserveDescriptor : kReserveMapping;
}

// Runs as a thread exits (the key's destructor): ends its open phases now, with the room
// kept for their Ends. Phases whose Begin was dropped have nothing to end.
void EndOpenPhasesAtThreadExit(void*) {
  if (g_state.load(std::memory_order_acquire) != kEnabled) return;
  ThreadState& t = t_state;
  t.depth_dropped = 0;
  if (t.payload == nullptr || t.depth_written == 0) return;
  uint64_t now = Now();
  while (t.depth_written != 0) {
    char* p = t.payload + t.off;
    PutHead(p, kRecEnd, 0);
    Put64(p + 8, now);
    t.off += kEndBytes;
    t.limit += kEndBytes;
    t.depth_written--;
  }
  Commit(t);
}

void InitLocked() {
  if (!g_atfork_registered) {
    pthread_atfork(PrepareFork, ParentAfterFork, ChildAfterFork);
    g_atfork_registered = true;
  }
  if (!g_thread_exit_key_made) {
    // Never deleted: threads may exit at any time, up to the process's end.
    g_thread_exit_key_made = pthread_key_create(&g_thread_exit_key, EndOpenPhasesAtThreadExit) == 0;
  }
  if (g_table == nullptr) g_table = new NameTable;
  const char* dir = getenv("GRADEML_EVENTS_DIR");
  if (dir == nullptr || *dir == '\0') {
    g_state.store(kDisabled, std::memory_order_release);
    return;
  }
  const pid_t pid = getpid();
  // No collector listening (grademl gone, or not started by it): stay disabled, silently.
  int sock = ConnectCollector(dir);
  if (sock < 0) {
    g_state.store(kDisabled, std::memory_order_release);
    return;
  }
  void* map = MAP_FAILED;
  bool reserved = false;
  g_fd = CreateMemory();
  if (g_fd >= 0) map = mmap(nullptr, kFileCapacity, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, g_fd, 0);
  if (map != MAP_FAILED) {
    g_base = static_cast<char*>(map);
    g_reservation = PreferredReservation();
    if (g_reservation == kReserveMapping) {
      reserved = ReserveMemory(0, kHeaderBytes);
      if (!reserved && errno == EINVAL) g_reservation = kReserveDescriptor;  // before Linux 5.14
    }
    if (g_reservation == kReserveDescriptor) {
      KeepDescriptorHigh();
      reserved = ReserveMemory(0, kHeaderBytes);
    }
  }
  if (!reserved) {
    fprintf(stderr, "grademl: cannot create the event memory (%s); events are not recorded\n", strerror(errno));
    if (map != MAP_FAILED) munmap(map, kFileCapacity);
    if (g_fd >= 0) close(g_fd);  // created a moment ago: still ours
    g_base = nullptr;
    g_fd = -1;
    g_reservation = kReserveMapping;
    close(sock);
    g_state.store(kDisabled, std::memory_order_release);
    return;
  }
  g_header = reinterpret_cast<FileHeader*>(g_base);
  g_header->version = kFormatVersion;
#if defined(__x86_64__)
  g_header->clock = kClockTsc;
#else
  g_header->clock = kClockMonotonic;
#endif
  g_header->pid = int32_t(pid);
  g_header->ppid = int32_t(getppid());
  timespec rt;
  g_header->anchor_ticks = Now();
  clock_gettime(CLOCK_REALTIME, &rt);
  g_header->anchor_epoch_ns = int64_t(rt.tv_sec) * 1000000000 + rt.tv_nsec;
  uint64_t magic;
  memcpy(&magic, kFileMagic, sizeof(magic));
  __atomic_store_n(reinterpret_cast<uint64_t*>(g_header->magic), magic, __ATOMIC_RELEASE);

  // Names interned before (in this process, or in the parent before a fork) keep their ids:
  // define them all in the new file.
  ThreadState& t = t_state;
  t = ThreadState{};
  for (size_t i = 0; i < g_table->names.size(); ++i) {
    if (!EmitName(t, uint32_t(i + 1), g_table->names[i])) break;
  }
  // Handed over before the first event is written: from here on, the memory is grademl's too.
  bool sent = SendMemory(sock, g_fd);
  close(sock);
  if (!sent) {
    Detach();
    g_state.store(kDisabled, std::memory_order_release);
    return;
  }
  // The collector holds the memory and the mapping keeps it here: no descriptor is needed
  // any more, and none is left for the program to close or reuse.
  if (g_reservation == kReserveMapping) {
    close(g_fd);
    g_fd = -1;
  }
  g_state.store(kEnabled, std::memory_order_release);
}

[[gnu::noinline]] bool InitSlow() {
  pthread_mutex_lock(&g_mu);
  if (g_state.load(std::memory_order_relaxed) == kUninit) InitLocked();
  bool enabled = g_state.load(std::memory_order_relaxed) == kEnabled;
  pthread_mutex_unlock(&g_mu);
  return enabled;
}

inline bool Ready() {
  int s = g_state.load(std::memory_order_acquire);
  if (s == kEnabled) [[likely]] return true;
  if (s == kDisabled) return false;
  return InitSlow();
}

[[gnu::noinline]] void BeginSlow(ThreadState& t, uint32_t id, uint32_t type_id, bool typed, uint64_t ticks) {
  if (t.depth_dropped == 0 && id != 0 && t.depth_written < kMaxDepth) {
    const uint32_t size = typed ? 24 : 16;
    if (char* p = Reserve(t, size + kEndBytes)) {
      if (typed) {
        PutHead(p, kRecTypedBegin, id);
        Put32(p + 8, type_id);
        Put32(p + 12, 0);
        Put64(p + 16, ticks);
      } else {
        PutHead(p, kRecBegin, id);
        Put64(p + 8, ticks);
      }
      t.off += size;
      t.limit -= kEndBytes;
      t.depth_written++;
      Commit(t);
      return;
    }
  }
  if (id != 0 && t.depth_written + t.depth_dropped >= kMaxDepth) CountTooDeep();
  t.depth_dropped++;
  CountDropped();
}

// Ends the innermost open phase of this thread at `ticks`.
inline void EndAt(ThreadState& t, uint64_t ticks) {
  if (t.depth_dropped == 0 && t.depth_written != 0) [[likely]] {
    // The reserve guarantees room: off + 16 <= limit + 16 <= kChunkPayload.
    char* p = t.payload + t.off;
    PutHead(p, kRecEnd, 0);
    Put64(p + 8, ticks);
    t.off += 16;
    t.limit += kEndBytes;
    t.depth_written--;
    Commit(t);
    return;
  }
  if (t.depth_dropped != 0) {
    t.depth_dropped--;
    CountDropped();
  }
  // else: no open phase on this thread (unbalanced, or begun before a fork): ignored.
}

// A record of `size` bytes that belongs to the innermost open phase (tag, flow): dropped
// with that phase, ignored when no phase is open.
char* ReservePhaseRecord(ThreadState& t, uint32_t size) {
  if (t.depth_dropped != 0) {
    CountDropped();
    return nullptr;
  }
  if (t.depth_written == 0) return nullptr;
  char* p = Reserve(t, size);
  if (p == nullptr) CountDropped();
  return p;
}

char* ReserveFree(ThreadState& t, uint32_t size, uint32_t id) {
  if (id == 0) {
    CountDropped();
    return nullptr;
  }
  if (t.payload != nullptr && t.off + size <= t.limit) [[likely]] return t.payload + t.off;
  char* p = Reserve(t, size);
  if (p == nullptr) CountDropped();
  return p;
}

void Flow(RecordType type, uint64_t flow_id) {
  if (!Ready()) return;
  ThreadState& t = t_state;
  char* p = ReservePhaseRecord(t, 24);
  if (p == nullptr) return;
  PutHead(p, type, 0);
  Put64(p + 8, Now());
  Put64(p + 16, flow_id);
  t.off += 24;
  Commit(t);
}

uint32_t InternSlow(const char* name, CacheEntry& e) {
  std::string_view sv(name);
  if (sv.size() > kMaxNameBytes) {
    size_t n = kMaxNameBytes;
    while (n > 0 && (static_cast<unsigned char>(sv[n]) & 0xC0) == 0x80) --n;  // whole UTF-8 characters
    sv = sv.substr(0, n);
  }
  pthread_mutex_lock(&g_mu);
  uint32_t id = 0;
  const char* canon = nullptr;
  if (g_state.load(std::memory_order_relaxed) == kEnabled) {  // not detached meanwhile
    auto it = g_table->ids.find(sv);
    if (it != g_table->ids.end()) {
      id = it->second;
      canon = g_table->names[id - 1].c_str();
    } else {
      uint32_t next = uint32_t(g_table->names.size() + 1);
      if (EmitName(t_state, next, sv)) {  // defined in the file before anyone can use the id
        const std::string& stored = g_table->names.emplace_back(sv);
        g_table->ids.emplace(std::string_view(stored), next);
        id = next;
        canon = stored.c_str();
      } else {
        CountDropped();
      }
    }
  }
  pthread_mutex_unlock(&g_mu);
  if (id != 0) e = CacheEntry{name, canon, id};
  return id;
}

}  // namespace

void ResetForTesting(uint64_t max_chunks) {
  pthread_mutex_lock(&g_mu);
  Detach();
  g_max_chunks = max_chunks;
  g_fail_reserve.store(false);
  pthread_mutex_unlock(&g_mu);
}

void FailReservationsForTesting(bool fail) { g_fail_reserve.store(fail); }

int ReservationDescriptorForTesting() {
  pthread_mutex_lock(&g_mu);
  int fd = g_state.load() == kEnabled && g_reservation == kReserveDescriptor ? g_fd : -1;
  pthread_mutex_unlock(&g_mu);
  return fd;
}

const FileHeader* CurrentHeaderForTesting() {
  pthread_mutex_lock(&g_mu);
  const FileHeader* h = g_header;
  pthread_mutex_unlock(&g_mu);
  return h;
}

}  // namespace grademl::instrument

using namespace grademl::instrument;

extern "C" {

GRADEML_API int grademl_enabled(void) { return Ready() ? 1 : 0; }

GRADEML_API uint32_t grademl_intern(const char* name) {
  if (name == nullptr || !Ready()) return 0;
  uintptr_t key = reinterpret_cast<uintptr_t>(name);
  CacheEntry& e = t_cache[((key >> 3) * 0x9E3779B97F4A7C15ull) >> (64 - kCacheBits)];
  if (e.ptr == name && strcmp(e.canon, name) == 0) return e.id;
  return InternSlow(name, e);
}

GRADEML_API void grademl_begin(uint32_t name_id) {
  if (!Ready()) return;
  ThreadState& t = t_state;
  if (t.off + 16 + kEndBytes <= t.limit && name_id != 0 && t.depth_dropped == 0 && t.depth_written < kMaxDepth)
      [[likely]] {
    char* p = t.payload + t.off;
    PutHead(p, kRecBegin, name_id);
    Put64(p + 8, Now());
    t.off += 16;
    t.limit -= kEndBytes;
    t.depth_written++;
    Commit(t);
    return;
  }
  BeginSlow(t, name_id, 0, false, Now());
}

GRADEML_API void grademl_begin_typed(uint32_t name_id, uint32_t type_id) {
  if (!Ready()) return;
  if (type_id == 0 || type_id == name_id) return grademl_begin(name_id);
  BeginSlow(t_state, name_id, type_id, true, Now());
}

GRADEML_API uint64_t grademl_now(void) { return Ready() ? Now() : 0; }

GRADEML_API void grademl_begin_at(uint32_t name_id, uint32_t type_id, uint64_t ticks) {
  if (!Ready()) return;
  if (ticks == 0) ticks = Now();  // a reading taken while disabled
  bool typed = type_id != 0 && type_id != name_id;
  BeginSlow(t_state, name_id, typed ? type_id : 0, typed, ticks);
}

GRADEML_API void grademl_end_at(uint64_t ticks) {
  if (!Ready()) return;
  EndAt(t_state, ticks == 0 ? Now() : ticks);
}

GRADEML_API void grademl_end(void) {
  if (!Ready()) return;
  EndAt(t_state, Now());
}

GRADEML_API void grademl_tag_process(uint32_t key_id, uint32_t value_id) {
  if (!Ready()) return;
  ThreadState& t = t_state;
  if (key_id == 0 || value_id == 0) {
    CountDropped();
    return;
  }
  char* p = ReserveFree(t, 16, key_id);
  if (p == nullptr) return;
  PutHead(p, kRecProcessTag, key_id);
  Put32(p + 8, value_id);
  Put32(p + 12, 0);
  t.off += 16;
  Commit(t);
}

GRADEML_API void grademl_tag(uint32_t key_id, uint32_t value_id) {
  if (!Ready()) return;
  ThreadState& t = t_state;
  if (key_id == 0 || value_id == 0) {
    if (t.depth_written != 0 || t.depth_dropped != 0) CountDropped();
    return;
  }
  char* p = ReservePhaseRecord(t, 16);
  if (p == nullptr) return;
  PutHead(p, kRecTag, key_id);
  Put32(p + 8, value_id);
  Put32(p + 12, 0);
  t.off += 16;
  Commit(t);
}

GRADEML_API void grademl_tag_int(uint32_t key_id, int64_t value) {
  if (!Ready()) return;
  ThreadState& t = t_state;
  if (key_id == 0) {
    if (t.depth_written != 0 || t.depth_dropped != 0) CountDropped();
    return;
  }
  char* p = ReservePhaseRecord(t, 16);
  if (p == nullptr) return;
  PutHead(p, kRecTagInt, key_id);
  Put64(p + 8, static_cast<uint64_t>(value));
  t.off += 16;
  Commit(t);
}

GRADEML_API void grademl_tag_str(const char* key, const char* value) {
  if (!Ready()) return;
  grademl_tag(grademl_intern(key), grademl_intern(value));
}

GRADEML_API void grademl_instant(uint32_t name_id) {
  if (!Ready()) return;
  ThreadState& t = t_state;
  char* p = ReserveFree(t, 16, name_id);
  if (p == nullptr) return;
  PutHead(p, kRecInstant, name_id);
  Put64(p + 8, Now());
  t.off += 16;
  Commit(t);
}

GRADEML_API void grademl_counter(uint32_t name_id, double value) {
  if (!Ready()) return;
  ThreadState& t = t_state;
  char* p = ReserveFree(t, 24, name_id);
  if (p == nullptr) return;
  PutHead(p, kRecCounter, name_id);
  Put64(p + 8, Now());
  memcpy(p + 16, &value, 8);
  t.off += 24;
  Commit(t);
}

GRADEML_API void grademl_flow_out(uint64_t flow_id) { Flow(kRecFlowOut, flow_id); }
GRADEML_API void grademl_flow_in(uint64_t flow_id) { Flow(kRecFlowIn, flow_id); }

GRADEML_API void grademl_begin_str(const char* name) {
  if (!Ready()) return;
  grademl_begin(grademl_intern(name));
}

}  // extern "C"
