// A small, independent reader of event memories (instrument/event_format.h) for the tests,
// and a stand-in for the collector's socket that receives the writers' memories.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "instrument/event_format.h"

namespace grademl::instrument::testing {

struct Rec {
  uint8_t type = 0;
  uint32_t id = 0;
  uint64_t ticks = 0;
  uint32_t value_id = 0;  // tag value, typed begin's type
  uint64_t flow = 0;
  double value = 0;
  std::string name;  // kRecName
};

struct Chunk {
  uint64_t index = 0;
  uint32_t tid = 0;
  std::vector<Rec> recs;
};

struct EventFile {
  FileHeader header{};
  std::vector<Chunk> chunks;
  std::map<uint32_t, std::string> names;
  int duplicate_names = 0;

  // The records of one thread, in order (its chunks in index order), names left out.
  std::map<uint32_t, std::vector<Rec>> ByThread() const {
    std::map<uint32_t, std::vector<Rec>> out;
    for (const Chunk& c : chunks)
      for (const Rec& r : c.recs)
        if (r.type != kRecName) out[c.tid].push_back(r);
    return out;
  }
  size_t Count(uint8_t type) const {
    size_t n = 0;
    for (const Chunk& c : chunks)
      for (const Rec& r : c.recs) n += r.type == type;
    return n;
  }
  std::string Name(uint32_t id) const {
    auto it = names.find(id);
    return it == names.end() ? "<undefined " + std::to_string(id) + ">" : it->second;
  }
};

// Reads the event memory behind `fd` (not closed).
inline EventFile ReadEventMemory(int fd) {
  if (fd < 0) throw std::runtime_error("no event memory");
  EventFile f;
  if (pread(fd, &f.header, sizeof(f.header), 0) != ssize_t(sizeof(f.header)) ||
      memcmp(f.header.magic, kFileMagic, sizeof(kFileMagic)) != 0) {
    throw std::runtime_error("bad header in event memory");
  }
  uint64_t n = f.header.next_chunk < kMaxChunks ? f.header.next_chunk : kMaxChunks;
  std::vector<char> buf(kChunkBytes);
  for (uint64_t i = 0; i < n; ++i) {
    if (pread(fd, buf.data(), kChunkBytes, off_t(kHeaderBytes + i * kChunkBytes)) != ssize_t(kChunkBytes)) break;
    ChunkHeader ch;
    memcpy(&ch, buf.data(), sizeof(ch));
    if (ch.committed == 0) continue;
    if (ch.committed > kChunkPayload) throw std::runtime_error("bad committed");
    Chunk c{i, ch.tid, {}};
    const char* p = buf.data() + sizeof(ChunkHeader);
    uint32_t off = 0;
    while (off < ch.committed) {
      RecordHead h;
      memcpy(&h, p + off, sizeof(h));
      Rec r;
      r.type = h.type;
      r.id = h.id;
      const char* q = p + off + 8;
      uint32_t size = 16;
      switch (h.type) {
        case kRecName:
          r.name.assign(q, h.length);
          size = 8 + ((h.length + 7u) & ~7u);
          if (f.names.count(h.id)) ++f.duplicate_names;
          f.names[h.id] = r.name;
          break;
        case kRecBegin: case kRecEnd: case kRecInstant:
          memcpy(&r.ticks, q, 8);
          break;
        case kRecCounter:
          memcpy(&r.ticks, q, 8);
          memcpy(&r.value, q + 8, 8);
          size = 24;
          break;
        case kRecTag:
        case kRecProcessTag:
          memcpy(&r.value_id, q, 4);
          break;
        case kRecTagInt:
          memcpy(&r.flow, q, 8);  // the int64 value's bits
          break;
        case kRecFlowOut: case kRecFlowIn:
          memcpy(&r.ticks, q, 8);
          memcpy(&r.flow, q + 8, 8);
          size = 24;
          break;
        case kRecTypedBegin:
          memcpy(&r.value_id, q, 4);
          memcpy(&r.ticks, q + 8, 8);
          size = 24;
          break;
        default:
          throw std::runtime_error("bad record type " + std::to_string(h.type));
      }
      off += size;
      c.recs.push_back(std::move(r));
    }
    if (off != ch.committed) throw std::runtime_error("record straddles committed");
    f.chunks.push_back(std::move(c));
  }
  return f;
}

// Listens on "<dir>/events.sock" as the collector does, and hands out the memories that
// writers send (SCM_RIGHTS).
class MemoryListener {
 public:
  explicit MemoryListener(const std::string& dir) {
    path_ = dir + "/" + kSocketName;
    fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path_.size() >= sizeof(addr.sun_path)) throw std::runtime_error("socket path too long");
    memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(fd_, 128) != 0)
      throw std::runtime_error("cannot listen on " + path_);
  }
  ~MemoryListener() {
    for (int fd : received_) close(fd);
    close(fd_);
    unlink(path_.c_str());
  }
  MemoryListener(const MemoryListener&) = delete;
  MemoryListener& operator=(const MemoryListener&) = delete;

  // The memories sent since the last call (owned by the listener), waiting up to
  // `timeout_ms` for at least one.
  std::vector<int> Receive(int timeout_ms = 2000) {
    for (int waited = 0; unclaimed_.empty() && waited <= timeout_ms; waited += 10) {
      Accept();
      if (unclaimed_.empty() && timeout_ms > 0) usleep(10000);
    }
    std::vector<int> out;
    out.swap(unclaimed_);
    return out;
  }

  // Every memory received so far (owned by the listener).
  const std::vector<int>& all() const { return received_; }

  // The memory `pid` sent last (received so far, whether Receive handed it out or not), or
  // -1. The writer keeps no descriptor of its memory: this is how a test reads it.
  int LatestOf(pid_t pid) {
    Accept();
    for (auto it = received_.rbegin(); it != received_.rend(); ++it) {
      FileHeader h{};
      if (pread(*it, &h, sizeof h, 0) == ssize_t(sizeof h) && h.pid == pid) return *it;
    }
    return -1;
  }

 private:
  // Takes the memories of the connections waiting now.
  void Accept() {
    while (true) {
      int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) break;
      pollfd p{c, POLLIN, 0};
      (void)poll(&p, 1, 1000);
      char byte;
      iovec iov{&byte, 1};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))];
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      if (recvmsg(c, &msg, MSG_CMSG_CLOEXEC) == 1) {
        cmsghdr* cm = CMSG_FIRSTHDR(&msg);
        if (cm && cm->cmsg_type == SCM_RIGHTS) {
          int fd;
          memcpy(&fd, CMSG_DATA(cm), sizeof fd);
          unclaimed_.push_back(fd);
          received_.push_back(fd);
        }
      }
      close(c);
    }
  }

  std::string path_;
  int fd_ = -1;
  std::vector<int> received_;   // every memory received (closed with the listener)
  std::vector<int> unclaimed_;  // ... of which Receive has not handed these out yet
};

}  // namespace grademl::instrument::testing
