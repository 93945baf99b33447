// A small, independent reader of event files (instrument/event_format.h) for the tests.
#pragma once

#include <fcntl.h>
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

inline EventFile ReadEventFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  EventFile f;
  if (pread(fd, &f.header, sizeof(f.header), 0) != ssize_t(sizeof(f.header)) ||
      memcmp(f.header.magic, kFileMagic, sizeof(kFileMagic)) != 0) {
    close(fd);
    throw std::runtime_error("bad header in " + path);
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
          memcpy(&r.value_id, q, 4);
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
          close(fd);
          throw std::runtime_error("bad record type " + std::to_string(h.type));
      }
      off += size;
      c.recs.push_back(std::move(r));
    }
    if (off != ch.committed) throw std::runtime_error("record straddles committed");
    f.chunks.push_back(std::move(c));
  }
  close(fd);
  return f;
}

}  // namespace grademl::instrument::testing
