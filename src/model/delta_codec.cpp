#include "model/delta_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

// Every struct is read and written through one list of its fields, a structured binding: a
// field added to a model struct makes this file fail to compile ("N names provided ... but
// decomposes into M elements") until the codec (and kRunDeltaCodecVersion) is updated. The
// names are only labels for error messages; the order is the struct's.
#define GRADEML_DELTA_CODEC_FIELDS(io, obj, ...) \
  auto& [__VA_ARGS__] = (obj);                  \
  return (io).Fields(#__VA_ARGS__, __VA_ARGS__)

// Helpers live in a named namespace: the library builds as unity batches (docs/reliability.md).
namespace grademl::model::delta_codec_detail {

constexpr uint64_t ZigZag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63); }
constexpr int64_t UnZigZag(uint64_t z) { return static_cast<int64_t>((z >> 1) ^ (0 - (z & 1))); }

// The largest value of each enum the format carries (values are 0..max).
constexpr uint64_t EnumMax(TrackKind) { return static_cast<uint64_t>(TrackKind::kAsync); }
constexpr uint64_t EnumMax(ResourceKind) { return static_cast<uint64_t>(ResourceKind::kOutsideProcess); }
constexpr uint64_t EnumMax(SeriesKind) { return static_cast<uint64_t>(SeriesKind::kCounter); }
constexpr uint64_t EnumMax(StatSeverity) { return static_cast<uint64_t>(StatSeverity::kError); }
template <typename E>
concept CodecEnum = std::is_enum_v<E> && requires(E e) { EnumMax(e); };

constexpr size_t kMaxVarintBytes = 10;
constexpr size_t kMaxSampleBytes = 2 * kMaxVarintBytes + 8;

class Writer {
 public:
  template <typename T>
  using Obj = const T;

  explicit Writer(size_t initial = 256) { buf_.resize(initial); }

  size_t size() const { return n_; }
  std::string Finish() && {
    buf_.resize(n_);
    return std::move(buf_);
  }
  // Makes room for k more bytes; the Unchecked puts below rely on it.
  void Reserve(size_t k) {
    if (buf_.size() - n_ < k) buf_.resize(std::max(buf_.size() * 2, n_ + k));
  }

  void U64Unchecked(uint64_t v) {
    char* p = buf_.data() + n_;
    while (v >= 0x80) {
      *p++ = static_cast<char>(v | 0x80);
      v >>= 7;
    }
    *p++ = static_cast<char>(v);
    n_ = static_cast<size_t>(p - buf_.data());
  }
  void F64Unchecked(double d) {
    uint64_t bits = std::bit_cast<uint64_t>(d);
    char* p = buf_.data() + n_;
    for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(bits >> (8 * i));
    n_ += 8;
  }
  void U64(uint64_t v) {
    Reserve(kMaxVarintBytes);
    U64Unchecked(v);
  }
  void Bytes(std::string_view s) {
    Reserve(s.size());
    if (!s.empty()) std::memcpy(buf_.data() + n_, s.data(), s.size());
    n_ += s.size();
  }

  // One field, by its type (the format's table in delta_codec.h).
  void Put(int64_t v) { U64(ZigZag(v)); }
  void Put(int v) { U64(ZigZag(v)); }
  void Put(bool v) { U64(v ? 1 : 0); }
  void Put(double v) {
    Reserve(8);
    F64Unchecked(v);
  }
  void Put(const std::string& s) {
    Reserve(kMaxVarintBytes + s.size());
    U64Unchecked(s.size());
    if (!s.empty()) std::memcpy(buf_.data() + n_, s.data(), s.size());
    n_ += s.size();
  }
  void Put(const std::optional<int>& v) {
    Put(v.has_value());
    if (v) Put(*v);
  }
  void Put(const std::vector<std::string>& v) {
    U64(v.size());
    for (const std::string& s : v) Put(s);
  }
  void Put(const Tags& tags) {
    U64(tags.size());
    for (const auto& [key, value] : tags) {
      Put(key);
      Put(value);
    }
  }
  void Put(const std::vector<StepArtifact>& v) {
    U64(v.size());
    for (const auto& [path, hash, size, directory] : v) {
      Put(path);
      Put(hash);
      Put(size);
      Put(directory);
    }
  }
  template <CodecEnum E>
  void Put(E e) {
    U64(static_cast<uint64_t>(static_cast<std::underlying_type_t<E>>(e)));
  }

  template <typename... F>
  bool Fields(const char*, const F&... fields) {
    (Put(fields), ...);
    return true;
  }

 private:
  std::string buf_;
  size_t n_ = 0;
};

class Reader {
 public:
  template <typename T>
  using Obj = T;

  explicit Reader(std::string_view bytes)
      : begin_(reinterpret_cast<const uint8_t*>(bytes.data())), p_(begin_), end_(begin_ + bytes.size()) {}

  size_t left() const { return static_cast<size_t>(end_ - p_); }
  Status TakeError() { return std::move(error_); }

  // Where an error happened, for its message: section[index].field.
  void Enter(const char* section, const char* names) {
    section_ = section;
    index_ = kNoIndex;
    names_ = names;
    field_ = 0;
  }
  void SetIndex(size_t index) { index_ = index; }
  Reader& Field(int field) {
    field_ = field;
    return *this;
  }

  bool U64(uint64_t* v) {
    if (p_ != end_ && *p_ < 0x80) {
      *v = *p_++;
      return true;
    }
    return U64Slow(v);
  }
  bool I64(int64_t* v) {
    uint64_t z = 0;
    if (!U64(&z)) return false;
    *v = UnZigZag(z);
    return true;
  }
  bool F64(double* v) {
    if (left() < 8) return Truncated(p_, 8);
    uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits |= static_cast<uint64_t>(p_[i]) << (8 * i);
    *v = std::bit_cast<double>(bits);
    p_ += 8;
    return true;
  }

  bool Get(int64_t& v) { return I64(&v); }
  bool Get(int& v) {
    const uint8_t* at = p_;
    int64_t x = 0;
    if (!I64(&x)) return false;
    if (x < std::numeric_limits<int>::min() || x > std::numeric_limits<int>::max())
      return Fail(at, fmt::format("value {} does not fit 32 bits", x));
    v = static_cast<int>(x);
    return true;
  }
  bool Get(bool& v) {
    if (p_ == end_) return Truncated(p_, 1);
    if (*p_ > 1) return Fail(p_, fmt::format("bool byte {:#04x} (not 0 or 1)", *p_));
    v = *p_++ == 1;
    return true;
  }
  bool Get(double& v) { return F64(&v); }
  bool Get(std::string& s) {
    const uint8_t* at = p_;
    uint64_t n = 0;
    if (!U64(&n)) return false;
    if (n > left()) {
      error_ = Corrupt("run delta: truncated: {} at byte {} has length {}, {} bytes left", Where(), at - begin_, n,
                       left());
      return false;
    }
    s.assign(reinterpret_cast<const char*>(p_), static_cast<size_t>(n));
    p_ += n;
    return true;
  }
  // A type path: the wire carries its text (the format is unchanged); phases of one delta
  // with the same path share one node (interned on arrival).
  bool Get(TypePath& t) {
    const uint8_t* at = p_;
    uint64_t n = 0;
    if (!U64(&n)) return false;
    if (n > left()) {
      error_ = Corrupt("run delta: truncated: {} at byte {} has length {}, {} bytes left", Where(), at - begin_, n,
                       left());
      return false;
    }
    t = types_.Intern(std::string_view(reinterpret_cast<const char*>(p_), static_cast<size_t>(n)));
    p_ += n;
    return true;
  }
  bool Get(std::optional<int>& v) {
    bool present = false;
    if (!Get(present)) return false;
    if (!present) {
      v.reset();
      return true;
    }
    return Get(v.emplace());
  }
  bool Get(std::vector<std::string>& v) {
    size_t n = 0;
    if (!Count(&n, 1)) return false;
    v.resize(n);
    for (std::string& s : v)
      if (!Get(s)) return false;
    return true;
  }
  bool Get(Tags& tags) {
    size_t n = 0;
    if (!Count(&n, 2)) return false;
    tags.resize(n);
    for (auto& [key, value] : tags)
      if (!Get(key) || !Get(value)) return false;
    return true;
  }
  bool Get(std::vector<StepArtifact>& v) {
    size_t n = 0;
    if (!Count(&n, 4)) return false;
    v.resize(n);
    for (auto& [path, hash, size, directory] : v)
      if (!Get(path) || !Get(hash) || !Get(size) || !Get(directory)) return false;
    return true;
  }
  template <CodecEnum E>
  bool Get(E& e) {
    const uint8_t* at = p_;
    uint64_t x = 0;
    if (!U64(&x)) return false;
    if (x > EnumMax(e)) return Fail(at, fmt::format("enum value {} out of range 0..{}", x, EnumMax(e)));
    e = static_cast<E>(static_cast<std::underlying_type_t<E>>(x));
    return true;
  }

  template <typename... F>
  bool Fields(const char* names, F&... fields) {
    names_ = names;
    int k = 0;
    return ((field_ = k++, Get(fields)) && ...);
  }

  // A count of elements, each at least min_bytes long, that the bytes left can hold.
  bool Count(size_t* n, size_t min_bytes) {
    const uint8_t* at = p_;
    uint64_t x = 0;
    if (!U64(&x)) return false;
    if (x > left() / min_bytes)
      return Fail(at, fmt::format("count {} exceeds what the {} bytes left can hold ({} bytes each at least)", x,
                                  left(), min_bytes));
    *n = static_cast<size_t>(x);
    return true;
  }

  bool Magic() {
    std::string_view magic = kRunDeltaCodecMagic;
    size_t n = std::min(left(), magic.size());
    if (n > 0 && std::memcmp(p_, magic.data(), n) != 0) return Fail(p_, "bad magic (not a GradeML run delta)");
    if (n < magic.size()) return Truncated(p_, magic.size());
    p_ += n;
    return true;
  }
  bool Version() {
    const uint8_t* at = p_;
    uint64_t v = 0;
    if (!U64(&v)) return false;
    if (v != kRunDeltaCodecVersion)
      return Fail(at, fmt::format("unsupported version {} (this build reads version {})", v, kRunDeltaCodecVersion));
    return true;
  }
  bool AtEnd() {
    if (p_ == end_) return true;
    return Fail(p_, fmt::format("{} trailing bytes after the last section", left()));
  }

  [[gnu::cold]] [[gnu::noinline]] bool Fail(const uint8_t* at, std::string_view what) {
    error_ = Corrupt("run delta: {} at byte {} ({})", what, at - begin_, Where());
    return false;
  }
  // `need` bytes at `at` (the cursor), fewer left.
  [[gnu::cold]] [[gnu::noinline]] bool Truncated(const uint8_t* at, size_t need) {
    error_ = Corrupt("run delta: truncated: {} at byte {} needs {} bytes, {} left", Where(), at - begin_, need,
                     end_ - at);
    return false;
  }

 private:
  static constexpr size_t kNoIndex = std::numeric_limits<size_t>::max();

  [[gnu::noinline]] bool U64Slow(uint64_t* v) {
    const uint8_t* at = p_;
    uint64_t x = 0;
    for (size_t i = 0;; ++i) {
      if (p_ == end_) {
        error_ = Corrupt("run delta: truncated: {} at byte {} is a varint cut after {} bytes", Where(), at - begin_,
                         end_ - at);
        return false;
      }
      uint8_t b = *p_++;
      if (i == kMaxVarintBytes - 1 && b > 1) return Fail(at, "varint overflows 64 bits");
      x |= static_cast<uint64_t>(b & 0x7f) << (7 * i);
      if (b < 0x80) {
        if (b == 0 && i > 0) return Fail(at, "non-canonical varint (a redundant last byte 0x00)");
        *v = x;
        return true;
      }
    }
  }

  std::string Where() const {
    std::string_view names = names_;
    for (int k = 0; k < field_; ++k) {
      size_t comma = names.find(',');
      names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
    }
    names = names.substr(0, names.find(','));
    while (!names.empty() && names.front() == ' ') names.remove_prefix(1);
    if (index_ == kNoIndex) return fmt::format("{}.{}", section_, names);
    return fmt::format("{}[{}].{}", section_, index_, names);
  }

  const uint8_t* begin_;
  const uint8_t* p_;
  const uint8_t* end_;
  Status error_;
  const char* section_ = "header";
  size_t index_ = kNoIndex;
  const char* names_ = "magic";
  int field_ = 0;
  TypePool types_;  // the type paths of this delta
};

// The fields of each struct, in the struct's order. Io is Writer (const objects) or Reader.
template <typename Io>
bool Visit(Io& io, typename Io::template Obj<RunInfo>& x) {
  // Every field but `owner`, which the store sets when it creates the run and a delta never
  // changes (docs/store.md, version 8): not carried, decoded as "".
  auto& [id, uuid, command, cwd, host, start_ns, end_ns, exit_code, exit_signal, complete, error, grademl_version,
         interval_ns, monitor_cpu_seconds, owner] = x;
  (void)owner;
  return io.Fields(
      "id, uuid, command, cwd, host, start_ns, end_ns, exit_code, exit_signal, complete, error, grademl_version, "
      "interval_ns, monitor_cpu_seconds",
      id, uuid, command, cwd, host, start_ns, end_ns, exit_code, exit_signal, complete, error, grademl_version,
      interval_ns, monitor_cpu_seconds);
}
template <typename Io>
bool Visit(Io& io, typename Io::template Obj<Phase>& x) {
  GRADEML_DELTA_CODEC_FIELDS(io, x, id, parent, name, type, tags, start_ns, end_ns, host, pid, track);
}
template <typename Io>
bool Visit(Io& io, typename Io::template Obj<Edge>& x) {
  GRADEML_DELTA_CODEC_FIELDS(io, x, from, to, kind);
}
template <typename Io>
bool Visit(Io& io, typename Io::template Obj<Resource>& x) {
  GRADEML_DELTA_CODEC_FIELDS(io, x, id, parent, kind, name, host, pid, phase, start_ns);
}
template <typename Io>
bool Visit(Io& io, typename Io::template Obj<SeriesInfo>& x) {
  GRADEML_DELTA_CODEC_FIELDS(io, x, id, resource, name, unit, kind, capacity);
}
template <typename Io>
bool Visit(Io& io, typename Io::template Obj<LogLine>& x) {
  GRADEML_DELTA_CODEC_FIELDS(io, x, phase, t, stream, text);
}
template <typename Io>
bool Visit(Io& io, typename Io::template Obj<Host>& x) {
  GRADEML_DELTA_CODEC_FIELDS(io, x, name, machine_id, clock_offset_ns, clock_uncertainty_ns);
}
template <typename Io>
bool Visit(Io& io, typename Io::template Obj<Source>& x) {
  GRADEML_DELTA_CODEC_FIELDS(io, x, id, path, format, tags);
}
template <typename Io>
bool Visit(Io& io, typename Io::template Obj<Track>& x) {
  GRADEML_DELTA_CODEC_FIELDS(io, x, id, kind, source, host, pid, process_start_ns, tid, device, stream, name);
}
template <typename Io>
bool Visit(Io& io, typename Io::template Obj<IngestStat>& x) {
  GRADEML_DELTA_CODEC_FIELDS(io, x, source, reason, count, severity, description);
}
template <typename Io>
bool Visit(Io& io, typename Io::template Obj<ClockEstimate>& x) {
  GRADEML_DELTA_CODEC_FIELDS(io, x, host, t, offset_ns, uncertainty_ns);
}
template <typename Io>
bool Visit(Io& io, typename Io::template Obj<StepExecution>& x) {
  GRADEML_DELTA_CODEC_FIELDS(io, x, phase, step, workflow, key, not_reusable, outcome, reused_from, cost_ns, restore_ns,
                             hash_ns, hashed_bytes, materialize_ns, inputs, outputs);
}

// The fewest bytes an element of T can take: its default value's (each field at its default
// takes the fewest bytes its type can: a 1-byte varint or length, 8 bytes of a double).
template <typename T>
size_t MinBytes() {
  static const size_t n = [] {
    Writer w(0);
    T x{};
    Visit(w, x);
    return w.size();
  }();
  return n;
}

template <typename T>
void PutSection(Writer& w, const std::vector<T>& v) {
  w.U64(v.size());
  for (const T& x : v) Visit(w, x);
}

template <typename T>
bool GetSection(Reader& r, const char* section, std::vector<T>& v) {
  r.Enter(section, "count");
  size_t n = 0;
  if (!r.Count(&n, MinBytes<T>())) return false;
  v.resize(n);
  for (size_t i = 0; i < n; ++i) {
    r.SetIndex(i);
    if (!Visit(r, v[i])) return false;
  }
  return true;
}

// Samples, the bulk of a delta: series and t as differences from the previous record's.
void PutSamples(Writer& w, const std::vector<SampleRecord>& samples) {
  w.Reserve(kMaxVarintBytes + samples.size() * kMaxSampleBytes);
  w.U64Unchecked(samples.size());
  uint64_t prev_series = 0;
  uint64_t prev_t = 0;
  for (const auto& [series, sample] : samples) {
    const auto& [t, v] = sample;
    w.U64Unchecked(ZigZag(static_cast<int64_t>(static_cast<uint64_t>(series) - prev_series)));
    w.U64Unchecked(ZigZag(static_cast<int64_t>(static_cast<uint64_t>(t) - prev_t)));
    w.F64Unchecked(v);
    prev_series = static_cast<uint64_t>(series);
    prev_t = static_cast<uint64_t>(t);
  }
}

bool GetSamples(Reader& r, std::vector<SampleRecord>& samples) {
  r.Enter("samples", "count");
  size_t n = 0;
  constexpr size_t kMinSampleBytes = 1 + 1 + 8;
  if (!r.Count(&n, kMinSampleBytes)) return false;
  samples.resize(n);
  r.Enter("samples", "series, t, v");
  uint64_t prev_series = 0;
  uint64_t prev_t = 0;
  for (size_t i = 0; i < n; ++i) {
    auto& [series, sample] = samples[i];
    auto& [t, v] = sample;
    int64_t d_series = 0;
    int64_t d_t = 0;
    r.SetIndex(i);
    if (!r.Field(0).I64(&d_series) || !r.Field(1).I64(&d_t) || !r.Field(2).F64(&v)) return false;
    prev_series += static_cast<uint64_t>(d_series);
    prev_t += static_cast<uint64_t>(d_t);
    series = static_cast<SeriesId>(prev_series);
    t = static_cast<TimeNs>(prev_t);
  }
  return true;
}

bool GetDelta(Reader& r, RunDelta& d) {
  auto& [info, phases, edges, resources, series, samples, logs, hosts, sources, tracks, ingest_stats,
          clock_estimates, step_executions] = d;
  if (!r.Magic()) return false;
  r.Enter("header", "version");
  if (!r.Version()) return false;
  r.Enter("info", "present");
  bool has_info = false;
  if (!r.Get(has_info)) return false;
  if (has_info && !Visit(r, info.emplace())) return false;
  return GetSection(r, "phases", phases) && GetSection(r, "edges", edges) &&
         GetSection(r, "resources", resources) && GetSection(r, "series", series) && GetSamples(r, samples) &&
         GetSection(r, "logs", logs) && GetSection(r, "hosts", hosts) && GetSection(r, "sources", sources) &&
         GetSection(r, "tracks", tracks) && GetSection(r, "ingest_stats", ingest_stats) &&
         GetSection(r, "clock_estimates", clock_estimates) &&
         GetSection(r, "step_executions", step_executions) && (r.Enter("delta", "end"), r.AtEnd());
}

}  // namespace grademl::model::delta_codec_detail

#undef GRADEML_DELTA_CODEC_FIELDS

namespace grademl::model {

std::string EncodeRunDelta(const RunDelta& delta) {
  // Qualified, not `using namespace`: in a unity batch another file's helper of the same
  // name in grademl::model would make an unqualified name ambiguous.
  namespace dc = delta_codec_detail;
  const auto& [info, phases, edges, resources, series, samples, logs, hosts, sources, tracks, ingest_stats,
               clock_estimates, step_executions] = delta;
  dc::Writer w;
  w.Bytes(kRunDeltaCodecMagic);
  w.U64(kRunDeltaCodecVersion);
  w.Put(info.has_value());
  if (info) dc::Visit(w, *info);
  dc::PutSection(w, phases);
  dc::PutSection(w, edges);
  dc::PutSection(w, resources);
  dc::PutSection(w, series);
  dc::PutSamples(w, samples);
  dc::PutSection(w, logs);
  dc::PutSection(w, hosts);
  dc::PutSection(w, sources);
  dc::PutSection(w, tracks);
  dc::PutSection(w, ingest_stats);
  dc::PutSection(w, clock_estimates);
  dc::PutSection(w, step_executions);
  return std::move(w).Finish();
}

StatusOr<RunDelta> DecodeRunDelta(std::string_view bytes) {
  delta_codec_detail::Reader r(bytes);
  RunDelta delta;
  if (!delta_codec_detail::GetDelta(r, delta)) return r.TakeError();
  return delta;
}

}  // namespace grademl::model
