// TraceInput's implementations: a plain byte source (file or memory) and the gzip and zstd
// decoders stacked on it, chosen by the first bytes.
#include "importers/trace_input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

namespace grademl::importers {
namespace {

constexpr size_t kReadChunk = size_t{1} << 18;    // compressed (or plain) bytes read at once
constexpr size_t kOutputChunk = size_t{1} << 18;  // uncompressed bytes handed out at once

// Compression bombs: past kBombFloor uncompressed bytes, a stream that decompressed to more
// than kMaxRatio times the compressed bytes read so far is refused (real traces compress
// 5-30x; a gzip bomb about 1030x, deflate's most; a zstd one millions). Below the floor nothing is refused: a
// GiB of JSON is read in about a second.
constexpr uint64_t kBombFloor = uint64_t{1} << 30;
constexpr uint64_t kMaxRatio = 200;

Status BombError(const std::string& path, uint64_t offset, uint64_t compressed) {
  return Corrupt("{}: byte {}: decompressed to more than {} times its {} compressed bytes: refused as a compression bomb",
                 path, offset, kMaxRatio, compressed);
}

// Where the raw bytes come from: a file descriptor or a memory region.
class ByteSource {
 public:
  ByteSource(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ByteSource(std::string_view bytes, std::string path) : memory_(bytes), in_memory_(true), path_(std::move(path)) {}
  ~ByteSource() {
    if (fd_ >= 0) close(fd_);
  }
  ByteSource(const ByteSource&) = delete;
  ByteSource& operator=(const ByteSource&) = delete;

  // Up to kReadChunk bytes; empty at the end.
  StatusOr<std::span<const char>> Read() {
    if (in_memory_) {
      size_t n = std::min(kReadChunk, memory_.size() - memory_pos_);
      std::span<const char> out(memory_.data() + memory_pos_, n);
      memory_pos_ += n;
      return out;
    }
    if (!buffer_) buffer_.reset(new char[kReadChunk]);  // not zero-filled
    for (;;) {
      ssize_t n = read(fd_, buffer_.get(), kReadChunk);
      if (n >= 0) return std::span<const char>(buffer_.get(), static_cast<size_t>(n));
      if (errno != EINTR) return IoError("{}: read failed: {}", path_, std::strerror(errno));
    }
  }

 private:
  int fd_ = -1;
  std::string_view memory_;
  size_t memory_pos_ = 0;
  bool in_memory_ = false;
  std::string path_;
  std::unique_ptr<char[]> buffer_;
};

// An output chunk, not zero-filled.
struct OutputChunk {
  OutputChunk() : bytes(new char[kOutputChunk]) {}
  char* data() { return bytes.get(); }
  size_t size() const { return kOutputChunk; }
  std::unique_ptr<char[]> bytes;
};

// No compression: the source's chunks as they are (with the bytes already read for sniffing first).
class PlainInput final : public TraceInput {
 public:
  PlainInput(std::unique_ptr<ByteSource> source, std::string path, std::vector<char> first)
      : TraceInput(std::move(path)), source_(std::move(source)), first_(std::move(first)) {}
  StatusOr<std::span<const char>> Next() override {
    std::span<const char> out;
    if (!first_done_) {
      first_done_ = true;
      out = std::span<const char>(first_.data(), first_.size());
    }
    if (out.empty()) {
      GRADEML_ASSIGN_OR_RETURN(out, source_->Read());
    }
    offset_ += out.size();
    return out;
  }
  std::string_view compression() const override { return "none"; }

 private:
  std::unique_ptr<ByteSource> source_;
  std::vector<char> first_;
  bool first_done_ = false;
};

// The compressed bytes: the sniffed prefix, then the source.
class CompressedFeed {
 public:
  CompressedFeed(std::unique_ptr<ByteSource> source, std::vector<char> first)
      : source_(std::move(source)), first_(std::move(first)) {}
  StatusOr<std::span<const char>> Read() {
    if (!first_done_) {
      first_done_ = true;
      if (!first_.empty()) {
        consumed += first_.size();
        return std::span<const char>(first_.data(), first_.size());
      }
    }
    auto read = source_->Read();
    if (read.ok()) consumed += read->size();
    return read;
  }
  // Whether `uncompressed` bytes out of what was read so far make a compression bomb.
  bool Bomb(uint64_t uncompressed) const { return uncompressed > kBombFloor && uncompressed / kMaxRatio > consumed; }
  uint64_t consumed = 0;  // compressed bytes handed to the decoder

 private:
  std::unique_ptr<ByteSource> source_;
  std::vector<char> first_;
  bool first_done_ = false;
};

class GzipInput final : public TraceInput {
 public:
  GzipInput(std::unique_ptr<ByteSource> source, std::string path, std::vector<char> first)
      : TraceInput(std::move(path)), feed_(std::move(source), std::move(first)) {}
  ~GzipInput() override {
    if (initialised_) inflateEnd(&z_);
  }
  Status Init() {
    std::memset(&z_, 0, sizeof(z_));
    if (inflateInit2(&z_, 16 + MAX_WBITS) != Z_OK) return Internal("{}: zlib could not start", path_);
    initialised_ = true;
    return Status::Ok();
  }
  StatusOr<std::span<const char>> Next() override {
    if (!error_.ok()) return error_;
    if (done_) return std::span<const char>();
    z_.next_out = reinterpret_cast<Bytef*>(out_.data());
    z_.avail_out = static_cast<uInt>(out_.size());
    while (z_.avail_out == out_.size()) {
      if (z_.avail_in == 0 && !input_eof_) {
        auto in = feed_.Read();
        if (!in.ok()) return error_ = in.status();
        if (in->empty()) {
          input_eof_ = true;
        } else {
          z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in->data()));
          z_.avail_in = static_cast<uInt>(in->size());
        }
      }
      if (z_.avail_in == 0 && input_eof_ && !member_started_) {  // the end, after whole members
        done_ = true;
        break;
      }
      member_started_ = true;
      // At the end of the input this still runs: inflate may hold output it had no room for.
      int rc = inflate(&z_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        // Another member may follow (concatenated gzip files are one stream).
        member_started_ = false;
        inflateReset(&z_);
        continue;
      }
      bool progress = z_.avail_out != out_.size();
      if (rc == Z_BUF_ERROR || (rc == Z_OK && z_.avail_in == 0 && input_eof_ && !progress)) {
        if (z_.avail_in == 0 && input_eof_ && !progress) {
          return error_ = Corrupt("{}: byte {}: truncated gzip data", path_, offset_);
        }
        continue;  // needs more input
      }
      if (rc != Z_OK) {
        return error_ = Corrupt("{}: byte {}: corrupt gzip data ({})", path_,
                                offset_ + (out_.size() - z_.avail_out), z_.msg ? z_.msg : "zlib error");
      }
    }
    size_t n = out_.size() - z_.avail_out;
    offset_ += n;
    if (feed_.Bomb(offset_)) return error_ = BombError(path_, offset_, feed_.consumed);
    if (n == 0) done_ = true;
    return std::span<const char>(out_.data(), n);
  }
  std::string_view compression() const override { return "gzip"; }

 private:
  CompressedFeed feed_;
  OutputChunk out_;
  z_stream z_;
  bool initialised_ = false;
  bool member_started_ = false;
  bool input_eof_ = false;
  bool done_ = false;
  Status error_;
};

class ZstdInput final : public TraceInput {
 public:
  ZstdInput(std::unique_ptr<ByteSource> source, std::string path, std::vector<char> first)
      : TraceInput(std::move(path)), feed_(std::move(source), std::move(first)) {}
  ~ZstdInput() override { ZSTD_freeDStream(stream_); }
  Status Init() {
    stream_ = ZSTD_createDStream();
    if (stream_ == nullptr) return Internal("{}: libzstd could not start", path_);
    // Bounded memory: a frame asking for a window over 128 MiB is refused.
    ZSTD_DCtx_setParameter(stream_, ZSTD_d_windowLogMax, 27);
    return Status::Ok();
  }
  StatusOr<std::span<const char>> Next() override {
    if (!error_.ok()) return error_;
    if (done_) return std::span<const char>();
    ZSTD_outBuffer out{out_.data(), out_.size(), 0};
    while (out.pos == 0) {
      if (in_.pos == in_.size && !input_eof_) {
        auto in = feed_.Read();
        if (!in.ok()) return error_ = in.status();
        if (in->empty()) {
          input_eof_ = true;
        } else {
          in_ = ZSTD_inBuffer{in->data(), in->size(), 0};
        }
      }
      if (in_.pos == in_.size && input_eof_ && frame_pending_ == 0) {  // the end, after whole frames
        done_ = true;
        break;
      }
      // At the end of the input this still runs: the decoder may hold output it had no room for.
      size_t rc = ZSTD_decompressStream(stream_, &out, &in_);
      if (ZSTD_isError(rc)) {
        return error_ = Corrupt("{}: byte {}: corrupt zstd data ({})", path_, offset_ + out.pos, ZSTD_getErrorName(rc));
      }
      frame_pending_ = rc;  // 0: a frame just ended, flushed
      if (out.pos == 0 && in_.pos == in_.size && input_eof_ && frame_pending_ != 0) {
        return error_ = Corrupt("{}: byte {}: truncated zstd data", path_, offset_);
      }
    }
    offset_ += out.pos;
    if (feed_.Bomb(offset_)) return error_ = BombError(path_, offset_, feed_.consumed);
    return std::span<const char>(out_.data(), out.pos);
  }
  std::string_view compression() const override { return "zstd"; }

 private:
  CompressedFeed feed_;
  OutputChunk out_;
  ZSTD_DStream* stream_ = nullptr;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  size_t frame_pending_ = 0;
  bool input_eof_ = false;
  bool done_ = false;
  Status error_;
};

StatusOr<std::unique_ptr<TraceInput>> Make(std::unique_ptr<ByteSource> source, const std::string& path) {
  // Sniff the first 4 bytes (a short read is fine: the file is then shorter than a magic).
  std::vector<char> first;
  while (first.size() < 4) {
    GRADEML_ASSIGN_OR_RETURN(std::span<const char> chunk, source->Read());
    if (chunk.empty()) break;
    first.insert(first.end(), chunk.begin(), chunk.end());
  }
  const std::string_view compression = CompressionOf(std::string_view(first.data(), first.size()));
  if (compression == "gzip") {
    auto input = std::make_unique<GzipInput>(std::move(source), path, std::move(first));
    GRADEML_RETURN_IF_ERROR(input->Init());
    return std::unique_ptr<TraceInput>(std::move(input));
  }
  if (compression == "zstd") {
    auto input = std::make_unique<ZstdInput>(std::move(source), path, std::move(first));
    GRADEML_RETURN_IF_ERROR(input->Init());
    return std::unique_ptr<TraceInput>(std::move(input));
  }
  return std::unique_ptr<TraceInput>(std::make_unique<PlainInput>(std::move(source), path, std::move(first)));
}

}  // namespace

std::string_view CompressionOf(std::string_view first_bytes) {
  auto starts = [&](std::initializer_list<unsigned char> magic) {
    if (first_bytes.size() < magic.size()) return false;
    return std::equal(magic.begin(), magic.end(), first_bytes.begin(),
                      [](unsigned char m, char c) { return m == static_cast<unsigned char>(c); });
  };
  if (starts({0x1f, 0x8b})) return "gzip";
  if (starts({0x28, 0xb5, 0x2f, 0xfd})) return "zstd";
  return "none";
}

std::string ReadHead(TraceInput& input, size_t max, Status* error) {
  std::string head;
  while (head.size() < max) {
    auto chunk = input.Next();
    if (!chunk.ok()) {
      if (error != nullptr) *error = chunk.status();
      break;
    }
    if (chunk->empty()) break;
    head.append(chunk->data(), std::min(chunk->size(), max - head.size()));
  }
  return head;
}

StatusOr<std::unique_ptr<TraceInput>> TraceInput::Open(const std::string& path) {
  if (path.empty()) return InvalidArgument("no trace file given");
  // O_NONBLOCK: opening a FIFO for reading blocks until a writer comes (forever, when none
  // does); it is refused below, as is anything else that is not a regular file (a device, a
  // directory, a socket), before a byte is read.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT) return NotFound("{}: no such file", path);
    return IoError("{}: cannot open: {}", path, std::strerror(err));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return IoError("{}: cannot stat: {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    const char* what = S_ISFIFO(st.st_mode)  ? "a FIFO"
                       : S_ISDIR(st.st_mode) ? "a directory"
                       : S_ISCHR(st.st_mode) ? "a character device"
                       : S_ISBLK(st.st_mode) ? "a block device"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "not a regular file";
    return InvalidArgument("{}: {}, not a regular file: only regular files are imported", path, what);
  }
  // Reads block as usual from here on (a regular file never waits, but a network file system may).
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return Make(std::make_unique<ByteSource>(fd, path), path);
}

StatusOr<std::unique_ptr<TraceInput>> TraceInput::FromMemory(std::string_view bytes, std::string name) {
  return Make(std::make_unique<ByteSource>(bytes, name), name);
}

namespace {

// Several files read one after the other as one stream (a directory format's files); each
// is opened, with its own compression, when the previous one ends. Errors name the file
// and the offset inside it.
class ChainedInput final : public TraceInput {
 public:
  ChainedInput(std::vector<std::string> paths, std::string name)
      : TraceInput(std::move(name)), paths_(std::move(paths)) {}

  StatusOr<std::span<const char>> Next() override {
    while (true) {
      if (!current_) {
        if (next_ >= paths_.size()) return std::span<const char>();
        GRADEML_ASSIGN_OR_RETURN(current_, TraceInput::Open(paths_[next_]));
        ++next_;
      }
      GRADEML_ASSIGN_OR_RETURN(auto chunk, current_->Next());
      if (!chunk.empty()) {
        offset_ += chunk.size();
        return chunk;
      }
      current_.reset();
    }
  }
  std::string_view compression() const override { return current_ ? current_->compression() : "none"; }
  size_t part_index() const override { return next_ == 0 ? 0 : next_ - 1; }
  const std::string& part_path() const override { return next_ == 0 ? path_ : paths_[next_ - 1]; }
  std::span<const std::string> parts() const override { return paths_; }

 private:
  std::vector<std::string> paths_;
  size_t next_ = 0;
  std::unique_ptr<TraceInput> current_;
};

}  // namespace

StatusOr<std::unique_ptr<TraceInput>> TraceInput::OpenFiles(std::vector<std::string> paths, std::string name) {
  if (paths.empty()) return InvalidArgument("{}: no files to read", name);
  return std::unique_ptr<TraceInput>(new ChainedInput(std::move(paths), std::move(name)));
}

}  // namespace grademl::importers
