#include "model/delta_codec.h"

#include <fmt/format.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace grademl::model {
namespace {

// Every struct of a RunDelta as a tuple of references to its fields, through a structured
// binding: a field added to a model struct makes this file fail to compile until it is
// listed here (and then the fill, the non-default check and the comparison below cover it
// without further change). The names label failures.
#define DELTA_CODEC_TEST_FIELDS(Type, ...)                                   \
  [[maybe_unused]] auto DeltaCodecTie(const Type& x) {                        \
    const auto& [__VA_ARGS__] = x;                                            \
    return std::tie(__VA_ARGS__);                                             \
  }                                                                           \
  [[maybe_unused]] auto DeltaCodecTie(Type& x) {                              \
    auto& [__VA_ARGS__] = x;                                                  \
    return std::tie(__VA_ARGS__);                                             \
  }                                                                           \
  [[maybe_unused]] constexpr std::string_view DeltaCodecNames(const Type*) { \
    return #__VA_ARGS__;                                                      \
  }

// RunInfo: every field but `owner`, which the codec does not carry (the store sets it when
// it creates the run: DeltaCodecTest.TheRunsOwnerIsNotCarried).
[[maybe_unused]] auto DeltaCodecTie(const RunInfo& x) {
  const auto& [id, uuid, command, cwd, host, start_ns, end_ns, exit_code, exit_signal, complete, error,
               grademl_version, interval_ns, monitor_cpu_seconds, owner] = x;
  (void)owner;
  return std::tie(id, uuid, command, cwd, host, start_ns, end_ns, exit_code, exit_signal, complete, error,
                  grademl_version, interval_ns, monitor_cpu_seconds);
}
[[maybe_unused]] auto DeltaCodecTie(RunInfo& x) {
  auto& [id, uuid, command, cwd, host, start_ns, end_ns, exit_code, exit_signal, complete, error, grademl_version,
         interval_ns, monitor_cpu_seconds, owner] = x;
  (void)owner;
  return std::tie(id, uuid, command, cwd, host, start_ns, end_ns, exit_code, exit_signal, complete, error,
                  grademl_version, interval_ns, monitor_cpu_seconds);
}
[[maybe_unused]] constexpr std::string_view DeltaCodecNames(const RunInfo*) {
  return "id, uuid, command, cwd, host, start_ns, end_ns, exit_code, exit_signal, complete, error, grademl_version, "
         "interval_ns, monitor_cpu_seconds";
}
DELTA_CODEC_TEST_FIELDS(Phase, id, parent, name, type, tags, start_ns, end_ns, host, pid, track)
DELTA_CODEC_TEST_FIELDS(Edge, from, to, kind)
DELTA_CODEC_TEST_FIELDS(Resource, id, parent, kind, name, host, pid, phase, start_ns)
DELTA_CODEC_TEST_FIELDS(SeriesInfo, id, resource, name, unit, kind, capacity)
DELTA_CODEC_TEST_FIELDS(Sample, t, v)
DELTA_CODEC_TEST_FIELDS(SampleRecord, series, sample)
DELTA_CODEC_TEST_FIELDS(LogLine, phase, t, stream, text)
DELTA_CODEC_TEST_FIELDS(Host, name, machine_id, clock_offset_ns, clock_uncertainty_ns)
DELTA_CODEC_TEST_FIELDS(Source, id, path, format, tags)
DELTA_CODEC_TEST_FIELDS(Track, id, kind, source, host, pid, process_start_ns, tid, device, stream, name)
DELTA_CODEC_TEST_FIELDS(IngestStat, source, reason, count, severity, description)
DELTA_CODEC_TEST_FIELDS(ClockEstimate, host, t, offset_ns, uncertainty_ns)
DELTA_CODEC_TEST_FIELDS(StepArtifact, path, hash, size, directory)
DELTA_CODEC_TEST_FIELDS(StepExecution, phase, step, workflow, key, not_reusable, outcome, reused_from, cost_ns,
                        restore_ns, hash_ns, hashed_bytes, materialize_ns, inputs, outputs)
DELTA_CODEC_TEST_FIELDS(RunDelta, info, phases, edges, resources, series, samples, logs, hosts, sources, tracks,
                        ingest_stats, clock_estimates, step_executions)
#undef DELTA_CODEC_TEST_FIELDS

template <typename T>
concept DeltaCodecStruct = requires(const T& x) { DeltaCodecTie(x); };

std::string_view DeltaCodecFieldName(std::string_view names, size_t k) {
  for (size_t i = 0; i < k; ++i) names = names.substr(names.find(',') + 1);
  names = names.substr(0, names.find(','));
  while (!names.empty() && names.front() == ' ') names.remove_prefix(1);
  return names;
}

// Calls fn(name, field_of_a, field_of_b) for each field of two structs of the same type.
template <typename T, typename Fn>
void DeltaCodecZipFields(T& a, T& b, Fn&& fn) {
  auto ta = DeltaCodecTie(a);
  auto tb = DeltaCodecTie(b);
  constexpr size_t n = std::tuple_size_v<decltype(ta)>;
  [&]<size_t... I>(std::index_sequence<I...>) {
    (fn(DeltaCodecFieldName(DeltaCodecNames(static_cast<const std::remove_const_t<T>*>(nullptr)), I), std::get<I>(ta),
        std::get<I>(tb)),
     ...);
  }(std::make_index_sequence<n>());
}

// The last value of each enum (non-default: every default is the first).
TrackKind DeltaCodecLastEnum(TrackKind) { return TrackKind::kAsync; }
ResourceKind DeltaCodecLastEnum(ResourceKind) { return ResourceKind::kOutsideProcess; }
SeriesKind DeltaCodecLastEnum(SeriesKind) { return SeriesKind::kCounter; }
StatSeverity DeltaCodecLastEnum(StatSeverity) { return StatSeverity::kError; }

// Field-by-field equality, exact: doubles by their bits (NaN payloads, -0.0). The templates
// are declared first so that each finds the others (ADL does not look into this namespace).
template <typename A, typename B>
void DeltaCodecExpectSame(const std::string& where, const std::pair<A, B>& a, const std::pair<A, B>& b);
template <typename T>
void DeltaCodecExpectSame(const std::string& where, const std::optional<T>& a, const std::optional<T>& b);
template <typename T>
void DeltaCodecExpectSame(const std::string& where, const std::vector<T>& a, const std::vector<T>& b);
template <DeltaCodecStruct T>
void DeltaCodecExpectSame(const std::string& where, const T& a, const T& b);
void DeltaCodecExpectSame(const std::string& where, const std::string& a, const std::string& b) {
  EXPECT_EQ(a, b) << where;
}
void DeltaCodecExpectSame(const std::string& where, int64_t a, int64_t b) { EXPECT_EQ(a, b) << where; }
void DeltaCodecExpectSame(const std::string& where, int a, int b) { EXPECT_EQ(a, b) << where; }
void DeltaCodecExpectSame(const std::string& where, bool a, bool b) { EXPECT_EQ(a, b) << where; }
void DeltaCodecExpectSame(const std::string& where, double a, double b) {
  EXPECT_EQ(std::bit_cast<uint64_t>(a), std::bit_cast<uint64_t>(b)) << where << ": " << a << " vs " << b;
}
template <typename E>
  requires std::is_enum_v<E>
void DeltaCodecExpectSame(const std::string& where, E a, E b) {
  EXPECT_EQ(static_cast<int>(a), static_cast<int>(b)) << where;
}
template <typename A, typename B>
void DeltaCodecExpectSame(const std::string& where, const std::pair<A, B>& a, const std::pair<A, B>& b) {
  DeltaCodecExpectSame(where + ".first", a.first, b.first);
  DeltaCodecExpectSame(where + ".second", a.second, b.second);
}
template <typename T>
void DeltaCodecExpectSame(const std::string& where, const std::optional<T>& a, const std::optional<T>& b) {
  ASSERT_EQ(a.has_value(), b.has_value()) << where;
  if (a) DeltaCodecExpectSame(where, *a, *b);
}
template <typename T>
void DeltaCodecExpectSame(const std::string& where, const std::vector<T>& a, const std::vector<T>& b) {
  ASSERT_EQ(a.size(), b.size()) << where;
  for (size_t i = 0; i < a.size(); ++i) DeltaCodecExpectSame(fmt::format("{}[{}]", where, i), a[i], b[i]);
}
template <DeltaCodecStruct T>
void DeltaCodecExpectSame(const std::string& where, const T& a, const T& b) {
  DeltaCodecZipFields(a, b, [&](std::string_view name, const auto& fa, const auto& fb) {
    DeltaCodecExpectSame(fmt::format("{}.{}", where, name), fa, fb);
  });
}

// Sets every field to a value that is not its default and differs from every other value
// set so far (strings with NUL and 0xff bytes, vectors of two elements).
struct DeltaCodecFiller {
  int64_t next = 1;

  void Fill(int64_t& v) { v = next++ * 1000003; }
  void Fill(int& v) { v = static_cast<int>(next++); }
  void Fill(bool& v) { v = true; }
  void Fill(double& v) { v = 0.25 + static_cast<double>(next++); }
  void Fill(std::string& s) {
    s = fmt::format("s{}", next++);
    s += '\0';
    s += "\xff\xfe tail";
  }
  void Fill(TypePath& t) {
    std::string s;
    Fill(s);
    t = s;
  }
  template <typename E>
    requires std::is_enum_v<E>
  void Fill(E& e) {
    e = DeltaCodecLastEnum(e);
  }
  template <typename A, typename B>
  void Fill(std::pair<A, B>& p) {
    Fill(p.first);
    Fill(p.second);
  }
  template <typename T>
  void Fill(std::optional<T>& v) {
    Fill(v.emplace());
  }
  template <typename T>
  void Fill(std::vector<T>& v) {
    v.resize(2);
    for (T& x : v) Fill(x);
  }
  template <DeltaCodecStruct T>
  void Fill(T& x) {
    // this->: without it clang 14 sees no use of the captured `this` (-Wunused-lambda-capture).
    std::apply([this](auto&... f) { (this->Fill(f), ...); }, DeltaCodecTie(x));
  }
};

// Expects every field (recursively, first elements of vectors) to differ from its default.
template <typename T>
void DeltaCodecExpectNotDefault(const std::string& where, const std::optional<T>& v, const std::optional<T>&);
template <typename A, typename B>
void DeltaCodecExpectNotDefault(const std::string& where, const std::pair<A, B>& v, const std::pair<A, B>&);
template <typename T>
void DeltaCodecExpectNotDefault(const std::string& where, const std::vector<T>& v, const std::vector<T>&);
template <DeltaCodecStruct T>
void DeltaCodecExpectNotDefault(const std::string& where, const T& v, const T&);
void DeltaCodecExpectNotDefault(const std::string& where, const std::string& v, const std::string& d) {
  EXPECT_NE(v, d) << where;
}
template <typename T>
  requires std::is_arithmetic_v<T> || std::is_enum_v<T>
void DeltaCodecExpectNotDefault(const std::string& where, T v, T d) {
  if constexpr (std::is_floating_point_v<T>) {
    EXPECT_NE(std::bit_cast<uint64_t>(v), std::bit_cast<uint64_t>(d)) << where;
  } else {
    EXPECT_NE(v, d) << where;
  }
}
template <typename T>
void DeltaCodecExpectNotDefault(const std::string& where, const std::optional<T>& v, const std::optional<T>&) {
  ASSERT_TRUE(v.has_value()) << where;
  DeltaCodecExpectNotDefault(where, *v, T{});
}
template <typename A, typename B>
void DeltaCodecExpectNotDefault(const std::string& where, const std::pair<A, B>& v, const std::pair<A, B>&) {
  DeltaCodecExpectNotDefault(where + ".first", v.first, A{});
  DeltaCodecExpectNotDefault(where + ".second", v.second, B{});
}
template <typename T>
void DeltaCodecExpectNotDefault(const std::string& where, const std::vector<T>& v, const std::vector<T>&) {
  ASSERT_FALSE(v.empty()) << where;
  DeltaCodecExpectNotDefault(where + "[0]", v[0], T{});
}
template <DeltaCodecStruct T>
void DeltaCodecExpectNotDefault(const std::string& where, const T& v, const T&) {
  const T d{};
  DeltaCodecZipFields(v, d, [&](std::string_view name, const auto& fv, const auto& fd) {
    DeltaCodecExpectNotDefault(fmt::format("{}.{}", where, name), fv, fd);
  });
}

// Every field of every struct set, distinct and non-default in each first element; second
// elements carry edge values (empty strings, extremes, NaN, -0.0, negative times).
RunDelta DeltaCodecFullDelta() {
  RunDelta d;
  DeltaCodecFiller filler;
  filler.Fill(d);
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  d.info->start_ns = -5;
  d.info->end_ns = kMax;
  d.info->exit_code = -1;
  d.info->exit_signal = std::numeric_limits<int>::max();
  d.info->monitor_cpu_seconds = -0.0;
  d.info->command[1] = "";
  d.info->command.push_back(std::string("\0\0\0", 3));
  Phase& p = d.phases[1];
  p.id = kMax;
  p.parent = kMin;
  p.name = "";
  p.type = std::string(1000, '\xff');
  p.tags[1] = {"", ""};
  p.start_ns = -1;
  p.end_ns = kMin;
  p.host = "";
  p.pid = std::numeric_limits<int>::min();
  p.track = -kMax;
  d.phases.push_back(Phase{});  // all defaults
  d.edges[1].kind = "";
  d.resources[1].kind = ResourceKind::kHost;
  d.resources[1].pid = -7;
  d.series[1].capacity = kNoCapacity;
  d.series[1].kind = SeriesKind::kGauge;
  d.series.push_back(SeriesInfo{});
  d.series.back().capacity = std::bit_cast<double>(uint64_t{0xfff0'0000'dead'beef});  // a NaN with a payload
  d.series.push_back(SeriesInfo{});
  d.series.back().capacity = -std::numeric_limits<double>::infinity();
  // Samples whose series and times go backwards and wrap: the differences are modulo 2^64.
  d.samples[1].series = kMin;
  d.samples[1].sample = {kMax, std::numeric_limits<double>::quiet_NaN()};
  d.samples.push_back({kMax, {kMin, -0.0}});
  d.samples.push_back({0, {0, std::numeric_limits<double>::denorm_min()}});
  d.samples.push_back({-3, {-1, std::numeric_limits<double>::max()}});
  d.logs[1].stream = 2;
  d.logs[1].text = std::string("line\0with\nnewline\r\xc3\x28", 20);
  d.hosts[1].clock_offset_ns = kMin;
  d.hosts[1].clock_uncertainty_ns = kMax;
  d.sources[1].tags.clear();
  d.tracks[1].kind = TrackKind::kDevice;
  d.tracks[1].device = -1;
  d.tracks[1].stream = -1;
  d.ingest_stats[1].count = kMin;
  d.ingest_stats[1].severity = StatSeverity::kError;
  d.ingest_stats[1].description = std::string("\0d", 2);
  d.clock_estimates[1].offset_ns = -kMax;
  StepExecution& e = d.step_executions[1];
  e.phase = kMin;
  e.key = "";
  e.outcome = std::string("\0", 1);
  e.cost_ns = kMax;
  e.restore_ns = -1;
  e.hashed_bytes = kMin;
  e.inputs.clear();
  e.outputs[1].size = kMax;
  e.outputs[1].path = "";
  e.outputs[1].directory = false;
  e.outputs.push_back(StepArtifact{});  // all defaults
  d.step_executions.push_back(StepExecution{});
  return d;
}

void DeltaCodecExpectRoundTrip(const RunDelta& d) {
  std::string bytes = EncodeRunDelta(d);
  StatusOr<RunDelta> back = DecodeRunDelta(bytes);
  ASSERT_TRUE(back.ok()) << back.status().message();
  DeltaCodecExpectSame("delta", d, *back);
  EXPECT_EQ(EncodeRunDelta(*back), bytes);
}

void DeltaCodecExpectCorrupt(std::string_view bytes, std::string_view want_in_message) {
  StatusOr<RunDelta> d = DecodeRunDelta(bytes);
  ASSERT_FALSE(d.ok()) << "decoded: " << want_in_message;
  EXPECT_EQ(d.status().code(), StatusCode::kCorrupt);
  const Status status = d.status();
  const std::string& m = status.message();
  EXPECT_NE(m.find(want_in_message), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
  EXPECT_EQ(m.rfind("run delta: ", 0), 0u) << m;
  EXPECT_NE(m.find("at byte "), std::string::npos) << m;
}

std::string DeltaCodecVarint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += static_cast<char>(v | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
  return out;
}

// A delta's header, no info, and `empty_sections` empty sections.
std::string DeltaCodecHeader(int empty_sections = 0) {
  std::string out(kRunDeltaCodecMagic);
  out += DeltaCodecVarint(kRunDeltaCodecVersion);
  out += '\0';  // no info
  out.append(static_cast<size_t>(empty_sections), '\0');
  return out;
}
constexpr int kDeltaCodecSections = 12;  // phases ... step_executions

TEST(DeltaCodecTest, EmptyDeltaRoundTrips) {
  RunDelta empty;
  std::string bytes = EncodeRunDelta(empty);
  EXPECT_EQ(bytes, DeltaCodecHeader(kDeltaCodecSections));
  DeltaCodecExpectRoundTrip(empty);
  // An info with every field at its default is not the same as no info.
  RunDelta with_info;
  with_info.info.emplace();
  EXPECT_NE(EncodeRunDelta(with_info), bytes);
  DeltaCodecExpectRoundTrip(with_info);
}

TEST(DeltaCodecTest, EveryFieldRoundTripsExactly) {
  RunDelta d = DeltaCodecFullDelta();
  // The fill reached every field: the first element of everything is non-default.
  DeltaCodecExpectNotDefault("delta", d, RunDelta{});
  DeltaCodecExpectRoundTrip(d);
}

TEST(DeltaCodecTest, UnsetExitCodeAndSignalRoundTrip) {
  RunDelta d = DeltaCodecFullDelta();
  d.info->exit_code.reset();
  d.info->exit_signal = 9;
  DeltaCodecExpectRoundTrip(d);
  d.info->exit_code = 0;  // set to 0 is not unset
  d.info->exit_signal.reset();
  DeltaCodecExpectRoundTrip(d);
  StatusOr<RunDelta> back = DecodeRunDelta(EncodeRunDelta(d));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->info->exit_code, std::optional<int>(0));
  EXPECT_EQ(back->info->exit_signal, std::nullopt);
}

// A run's owner is the store's to set (docs/store.md, version 8): a delta neither carries nor
// changes it, and the bytes are those of the same delta without one.
TEST(DeltaCodecTest, TheRunsOwnerIsNotCarried) {
  RunDelta d = DeltaCodecFullDelta();
  const std::string without = EncodeRunDelta(d);
  d.info->owner = "mallory";
  EXPECT_EQ(EncodeRunDelta(d), without);
  StatusOr<RunDelta> back = DecodeRunDelta(without);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->info->owner, "");
}

// The comparison itself must see a difference in any field (else the round trip tests
// would pass whatever the codec did).
TEST(DeltaCodecTest, TheComparisonSeesEveryField) {
  RunDelta d = DeltaCodecFullDelta();
  int fields = 0;
  auto check_changed = [&](RunDelta changed, const char* what) {
    ++fields;
    ::testing::TestPartResultArray failures;
    {
      ::testing::ScopedFakeTestPartResultReporter reporter(
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
      DeltaCodecExpectSame("delta", d, changed);
    }
    EXPECT_GT(failures.size(), 0) << what << ": a change went unnoticed";
  };
  RunDelta c = d;
  c.info->monitor_cpu_seconds = 0.0;  // -0.0 vs 0.0
  check_changed(c, "info.monitor_cpu_seconds");
  c = d;
  c.series[0].capacity = std::bit_cast<double>(std::bit_cast<uint64_t>(kNoCapacity) + 1);
  d.series[0].capacity = kNoCapacity;
  check_changed(c, "NaN payload");
  d = DeltaCodecFullDelta();
  c = d;
  c.tracks[1].device = 0;
  check_changed(c, "tracks[1].device");
  c = d;
  c.phases[0].tags[1].second += 'x';
  check_changed(c, "phases[0].tags[1].second");
  c = d;
  c.clock_estimates[1].uncertainty_ns++;
  check_changed(c, "clock_estimates[1].uncertainty_ns");
  c = d;
  c.samples[2].sample.v = 0.0;
  check_changed(c, "samples[2].sample.v");
  c = d;
  c.step_executions[0].outputs[1].directory = false;
  check_changed(c, "step_executions[0].outputs[1].directory");
  c = d;
  c.step_executions[1].outputs.pop_back();
  check_changed(c, "step_executions[1].outputs (one fewer)");
  EXPECT_EQ(fields, 8);
}

TEST(DeltaCodecTest, DefaultElementsRoundTrip) {
  // Every element at its defaults takes the fewest bytes: the count checks must accept them,
  // also as the last section where no byte follows.
  RunDelta d;
  d.info.emplace();
  std::apply([](auto&, auto&... vectors) { (vectors.resize(3), ...); }, DeltaCodecTie(d));
  DeltaCodecExpectRoundTrip(d);
  for (int drop = 0; drop < 2; ++drop) {
    RunDelta only_last;
    only_last.step_executions.resize(5);
    only_last.step_executions[4].outputs.resize(2);  // default artifacts, last in the delta
    if (drop) only_last.clock_estimates.resize(1);
    DeltaCodecExpectRoundTrip(only_last);
  }
}

TEST(DeltaCodecTest, EveryStrictPrefixIsCorrupt) {
  std::string bytes = EncodeRunDelta(DeltaCodecFullDelta());
  ASSERT_GT(bytes.size(), 1000u);
  for (size_t n = 0; n < bytes.size(); ++n) {
    StatusOr<RunDelta> d = DecodeRunDelta(std::string_view(bytes).substr(0, n));
    ASSERT_FALSE(d.ok()) << "prefix of " << n << " bytes decoded";
    const Status status = d.status();
    ASSERT_EQ(status.code(), StatusCode::kCorrupt) << n;
    const std::string& m = status.message();
    ASSERT_EQ(m.find('\n'), std::string::npos) << m;
    // Cut short, or a count that the bytes left cannot hold (checked before the elements).
    ASSERT_TRUE(m.find("truncated: ") != std::string::npos || m.find("bytes left can hold") != std::string::npos)
        << n << ": " << m;
  }
  DeltaCodecExpectCorrupt(std::string_view(bytes).substr(0, 2),
                          "truncated: header.magic at byte 0 needs 4 bytes, 2 left");
  EXPECT_TRUE(DecodeRunDelta(bytes).ok());
}

TEST(DeltaCodecTest, TruncationErrorsNameTheField) {
  RunDelta d;
  d.phases.resize(1);
  d.phases[0].name = std::string(100, 'x');
  std::string bytes = EncodeRunDelta(d);
  ASSERT_EQ(bytes.find('x'), 10u);  // header 6, count, id, parent, length
  DeltaCodecExpectCorrupt(std::string_view(bytes).substr(0, 60),
                          "truncated: phases[0].name at byte 9 has length 100, 50 bytes left");
  RunDelta s;
  for (int i = 1; i <= 3; ++i) s.samples.push_back({1, {i * 1'000'000'000LL, 1.0}});
  bytes = EncodeRunDelta(s);
  // Cut 4 bytes into the last sample's value (7 one-byte empty sections follow it).
  size_t cut = bytes.size() - 7 - 4;
  DeltaCodecExpectCorrupt(std::string_view(bytes).substr(0, cut),
                          fmt::format("truncated: samples[2].v at byte {} needs 8 bytes, 4 left", cut - 4));
  DeltaCodecExpectCorrupt(std::string_view(bytes).substr(0, cut - 5), "truncated: samples[2].t at byte");
}

TEST(DeltaCodecTest, RandomByteFlipsNeverCrashAndWhatDecodesIsCanonical) {
  std::vector<std::string> inputs = {EncodeRunDelta(DeltaCodecFullDelta()), EncodeRunDelta(RunDelta{})};
  RunDelta samples;
  for (int i = 0; i < 200; ++i) samples.samples.push_back({1 + i % 7, {1'700'000'000'000'000'000 + i * 1000, i * 0.5}});
  inputs.push_back(EncodeRunDelta(samples));
  std::mt19937_64 rng(20240611);
  int decoded = 0;
  int total = 0;
  for (const std::string& input : inputs) {
    for (int trial = 0; trial < 3000; ++trial) {
      std::string bytes = input;
      int flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) {
        size_t at = rng() % bytes.size();
        if (rng() % 2) {
          bytes[at] = static_cast<char>(rng());
        } else {
          bytes[at] ^= static_cast<char>(1 << (rng() % 8));
        }
      }
      if (rng() % 8 == 0) bytes.resize(rng() % (bytes.size() + 1));
      ++total;
      StatusOr<RunDelta> d = DecodeRunDelta(bytes);
      if (!d.ok()) {
        ASSERT_EQ(d.status().code(), StatusCode::kCorrupt);
        ASSERT_EQ(d.status().message().find('\n'), std::string::npos) << d.status().message();
        continue;
      }
      ++decoded;
      // Whatever decodes is exactly what the encoder writes for it.
      ASSERT_EQ(EncodeRunDelta(*d), bytes) << "trial " << trial;
    }
  }
  // Flips inside strings and doubles decode: the check above did run.
  EXPECT_GT(decoded, total / 20);
  EXPECT_LT(decoded, total);
}

TEST(DeltaCodecTest, HugeCountsFailFastWithoutAllocating) {
  const uint64_t kHuge = uint64_t{1} << 60;
  for (uint64_t count : {kHuge, uint64_t{1} << 40, uint64_t{1} << 31, ~uint64_t{0}}) {
    SCOPED_TRACE(count);
    // A section count (the first, phases; samples, the fifth; clock_estimates; the last,
    // step_executions).
    DeltaCodecExpectCorrupt(DeltaCodecHeader() + DeltaCodecVarint(count) + std::string(100, '\0'),
                            fmt::format("count {} exceeds what the 100 bytes left can hold", count));
    DeltaCodecExpectCorrupt(DeltaCodecHeader(4) + DeltaCodecVarint(count) + std::string(7, '\0'), "(samples.count)");
    DeltaCodecExpectCorrupt(DeltaCodecHeader(10) + DeltaCodecVarint(count) + '\0', "(clock_estimates.count)");
    DeltaCodecExpectCorrupt(DeltaCodecHeader(11) + DeltaCodecVarint(count), "(step_executions.count)");
    // A nested count: a step execution's inputs (phase, then six strings, then five numbers).
    std::string inputs = DeltaCodecHeader(11) + '\x01' + std::string(12, '\0');
    DeltaCodecExpectCorrupt(inputs + DeltaCodecVarint(count) + std::string(50, '\0'),
                            "(step_executions[0].inputs)");
    // A string length: a phase's name.
    std::string name = DeltaCodecHeader() + '\x01' + '\x02' + '\x02';  // 1 phase; id 1, parent 1
    DeltaCodecExpectCorrupt(name + DeltaCodecVarint(count) + std::string(50, 'a'),
                            fmt::format("truncated: phases[0].name at byte 9 has length {}, 50 bytes left", count));
    // A nested count: the info's command, a phase's tags.
    std::string info(kRunDeltaCodecMagic);
    info += DeltaCodecVarint(kRunDeltaCodecVersion);
    info += '\x01';                                  // info present
    info += '\x00';                                  // id
    info += '\x00';                                  // uuid
    DeltaCodecExpectCorrupt(info + DeltaCodecVarint(count) + std::string(50, 'x'), "(info.command)");
    std::string tags = DeltaCodecHeader() + '\x01' + std::string(4, '\0');  // id, parent, name, type
    DeltaCodecExpectCorrupt(tags + DeltaCodecVarint(count) + std::string(50, '\0'), "(phases[0].tags)");
  }
  // The bound is exact: 12 empty ingest stats fit in 60 bytes (5 bytes each: source, reason,
  // count, severity, description), 13 do not (2 bytes of empty sections follow).
  std::string stats = DeltaCodecHeader(9) + DeltaCodecVarint(12) + std::string(60, '\0') + std::string(2, '\0');
  EXPECT_TRUE(DecodeRunDelta(stats).ok()) << DecodeRunDelta(stats).status().message();
  stats = DeltaCodecHeader(9) + DeltaCodecVarint(13) + std::string(60, '\0') + std::string(2, '\0');
  DeltaCodecExpectCorrupt(stats, "count 13 exceeds what the 62 bytes left can hold (5 bytes each at least)");
}

TEST(DeltaCodecTest, TrailingBytesAreRejected) {
  std::string bytes = EncodeRunDelta(DeltaCodecFullDelta());
  size_t size = bytes.size();
  DeltaCodecExpectCorrupt(bytes + '\0', fmt::format("1 trailing bytes after the last section at byte {}", size));
  DeltaCodecExpectCorrupt(bytes + "garbage", "7 trailing bytes");
  DeltaCodecExpectCorrupt(bytes + bytes, "trailing bytes");
}

TEST(DeltaCodecTest, BadMagicAndVersionAreRejected) {
  std::string bytes = EncodeRunDelta(RunDelta{});
  DeltaCodecExpectCorrupt("", "truncated: header.magic at byte 0 needs 4 bytes, 0 left");
  DeltaCodecExpectCorrupt(std::string_view(), "truncated: header.magic at byte 0 needs 4 bytes, 0 left");
  DeltaCodecExpectCorrupt("SQLite format 3", "bad magic (not a GradeML run delta) at byte 0");
  DeltaCodecExpectCorrupt("X", "bad magic");
  std::string other = bytes;
  other[4] = static_cast<char>(kRunDeltaCodecVersion + 1);
  DeltaCodecExpectCorrupt(other, fmt::format("unsupported version {} (this build reads version {}) at byte 4",
                                             kRunDeltaCodecVersion + 1, kRunDeltaCodecVersion));
  other[4] = 0;
  DeltaCodecExpectCorrupt(other, "unsupported version 0");
}

TEST(DeltaCodecTest, NonCanonicalBytesAreRejected) {
  std::string magic(kRunDeltaCodecMagic);
  // An over-long varint (1 written as 0x81 0x00), one past 64 bits, one of 11 bytes.
  DeltaCodecExpectCorrupt(magic + "\x81" + '\0', "non-canonical varint (a redundant last byte 0x00) at byte 4");
  DeltaCodecExpectCorrupt(magic + std::string(9, '\xff') + '\x02', "varint overflows 64 bits at byte 4");
  DeltaCodecExpectCorrupt(magic + std::string(10, '\xff') + '\x01', "varint overflows 64 bits at byte 4");
  // The largest varint is fine as a varint (and then not a version).
  DeltaCodecExpectCorrupt(magic + std::string(9, '\xff') + '\x01', "unsupported version 18446744073709551615");
  // A bool byte other than 0 or 1: info present, info.complete.
  DeltaCodecExpectCorrupt(DeltaCodecHeader().substr(0, 5) + '\x02',
                          "bool byte 0x02 (not 0 or 1) at byte 5 (info.present)");
  RunDelta d;
  d.info.emplace();
  std::string bytes = EncodeRunDelta(d);
  // id uuid command cwd host start end exit_code exit_signal complete: byte 6 + 9.
  ASSERT_EQ(bytes[15], '\0');
  bytes[15] = '\x03';
  DeltaCodecExpectCorrupt(bytes, "bool byte 0x03 (not 0 or 1) at byte 15 (info.complete)");
  // An int that does not fit 32 bits: exit_code = 2^31 (zigzag 2^32).
  bytes = EncodeRunDelta(d);
  std::string exit_code = "\x01" + DeltaCodecVarint(uint64_t{1} << 32);
  bytes.replace(13, 1, exit_code);
  DeltaCodecExpectCorrupt(bytes, "value 2147483648 does not fit 32 bits at byte 14 (info.exit_code)");
}

TEST(DeltaCodecTest, EnumsOutOfRangeAreRejectedAndEveryNamedValueRoundTrips) {
  // Every value with a name round trips; the first without one is refused (an enum value
  // added to the model without the codec fails here).
  for (int i = 0; i < 64; ++i) {
    auto kind = static_cast<TrackKind>(i);
    RunDelta d;
    d.tracks.push_back(Track{.kind = kind});
    StatusOr<RunDelta> back = DecodeRunDelta(EncodeRunDelta(d));
    EXPECT_EQ(back.ok(), TrackKindName(kind) != "unknown") << i;
    if (!back.ok()) {
      EXPECT_NE(back.status().message().find("(tracks[0].kind)"), std::string::npos);
    }
  }
  for (int i = 0; i < 64; ++i) {
    auto kind = static_cast<ResourceKind>(i);
    RunDelta d;
    d.resources.push_back(Resource{.kind = kind});
    StatusOr<RunDelta> back = DecodeRunDelta(EncodeRunDelta(d));
    EXPECT_EQ(back.ok(), ResourceKindName(kind) != "unknown") << i;
  }
  RunDelta d;
  d.series.push_back(SeriesInfo{.kind = SeriesKind::kCounter});
  DeltaCodecExpectRoundTrip(d);
  d.series[0].kind = static_cast<SeriesKind>(2);
  DeltaCodecExpectCorrupt(EncodeRunDelta(d), "enum value 2 out of range 0..1 at byte 14 (series[0].kind)");
  d.series[0].kind = static_cast<SeriesKind>(-1);
  DeltaCodecExpectCorrupt(EncodeRunDelta(d), "enum value 18446744073709551615 out of range 0..1");
}

// The format's bytes for a small delta. When this fails, the format changed: bump
// kRunDeltaCodecVersion (deltas spooled by the old version are then refused), update the
// bytes here, the table in delta_codec.h and the fuzz seeds (see FuzzSeedsAreCurrent).
TEST(DeltaCodecTest, GoldenBytes) {
  RunDelta d;
  d.info.emplace();
  d.info->id = 1;
  d.info->uuid = "u";
  d.info->command = {"ls", "-l"};
  d.info->start_ns = -2;
  d.info->exit_code = 3;
  d.info->complete = true;
  d.info->monitor_cpu_seconds = 1.5;
  d.phases.push_back({.id = 1, .parent = 0, .name = "run", .type = "run", .tags = {{"k", "v"}}, .start_ns = 100,
                      .end_ns = 300, .host = "h", .pid = 42, .track = 2});
  d.edges.push_back({.from = 1, .to = 2, .kind = "data"});
  d.resources.push_back({.id = 5, .parent = 4, .kind = ResourceKind::kGpu, .name = "gpu0", .host = "h", .pid = -1,
                         .phase = 1, .start_ns = 7});
  d.series.push_back({.id = 9, .resource = 5, .name = "n", .unit = "W", .kind = SeriesKind::kCounter, .capacity = 2});
  d.samples.push_back({9, {1000, 0.5}});
  d.samples.push_back({9, {2000, 0.5}});
  d.samples.push_back({8, {1500, -1}});
  d.logs.push_back({.phase = 1, .t = 64, .stream = 2, .text = "x"});
  d.hosts.push_back({.name = "h", .machine_id = "m", .clock_offset_ns = -1, .clock_uncertainty_ns = 1});
  d.sources.push_back({.id = 1, .path = "p", .format = "f", .tags = {}});
  d.tracks.push_back({.id = 2, .kind = TrackKind::kDevice, .source = 1, .host = "h", .pid = 42, .process_start_ns = 0,
                      .tid = 43, .device = 0, .stream = 7, .name = "s"});
  d.ingest_stats.push_back({.source = 1, .reason = "r", .count = 3, .severity = StatSeverity::kDataLoss,
                            .description = "d"});
  d.clock_estimates.push_back({.host = "h", .t = 10, .offset_ns = -3, .uncertainty_ns = 2});
  d.step_executions.push_back({.phase = 1, .step = "a", .workflow = "w", .key = "k", .not_reusable = "",
                               .outcome = "ran", .reused_from = "", .cost_ns = 5, .restore_ns = 0, .hash_ns = 2,
                               .hashed_bytes = 64, .materialize_ns = 0,
                               .inputs = {{.path = "i", .hash = "h", .size = 3, .directory = false}},
                               .outputs = {{.path = "o", .hash = "g", .size = 0, .directory = true}}});
  const std::string want =
      "47444c54" "03"                                    // magic "GDLT", version 3
      "01" "02" "0175" "02026c73022d6c"                  // info: present, id 1, uuid "u", command {ls, -l}
      "00" "00" "03" "00"                                //   cwd, host, start -2, end
      "0106" "00" "01"                                   //   exit_code 3, no exit_signal, complete
      "00" "00" "00"                                     //   error, grademl_version, interval_ns
      "000000000000f83f"                                 //   monitor_cpu_seconds 1.5
      "01" "02" "00" "0372756e" "0372756e" "01016b0176"  // phases: 1; id 1, parent, name, type, tags {k: v}
      "c801" "d804" "0168" "54" "04"                     //   start 100, end 300, host, pid 42, track 2
      "01" "02" "04" "0464617461"                        // edges: 1; 1 -> 2, "data"
      "01" "0a" "08" "06" "0467707530"                   // resources: 1; id 5, parent 4, gpu, gpu0
      "0168" "01" "02" "0e"                              //   host h, pid -1, phase 1, start 7
      "01" "12" "0a" "016e" "0157" "01" "0000000000000040"  // series: 1; id 9, resource 5, n, W, counter, 2.0
      "03"                                               // samples: 3; (series, t) as differences
      "12" "d00f" "000000000000e03f"                     //   +9, +1000, 0.5
      "00" "d00f" "000000000000e03f"                     //   +0, +1000, 0.5
      "01" "e707" "000000000000f0bf"                     //   -1, -500, -1.0
      "01" "02" "8001" "04" "0178"                       // logs: 1; phase 1, t 64, stream 2, "x"
      "01" "0168" "016d" "01" "02"                       // hosts: 1; h, m, offset -1, uncertainty 1
      "01" "02" "0170" "0166" "00"                       // sources: 1; id 1, p, f, no tags
      "01" "04" "01" "02" "0168"                         // tracks: 1; id 2, device, source 1, host h
      "54" "00" "56" "00" "0e" "0173"                    //   pid 42, process_start 0, tid 43, device 0, stream 7, s
      "01" "02" "0172" "06" "01" "0164"                  // ingest_stats: 1; source 1, r, 3, data_loss, d
      "01" "0168" "14" "05" "04"                         // clock_estimates: 1; h, t 10, offset -3, uncertainty 2
      "01" "02" "0161" "0177" "016b" "00" "0372616e" "00"  // step_executions: 1; phase 1, a, w, k, "", ran, ""
      "0a" "00" "04" "8001" "00"                         //   cost 5, restore 0, hash 2, hashed_bytes 64, materialize 0
      "01" "0169" "0168" "06" "00"                       //   inputs: 1; i, h, size 3, not a directory
      "01" "016f" "0167" "00" "01";                      //   outputs: 1; o, g, size 0, a directory
  std::string bytes = EncodeRunDelta(d);
  std::string hex;
  for (unsigned char c : bytes) hex += fmt::format("{:02x}", c);
  EXPECT_EQ(hex, want) << "the format changed: see the comment above the test";
  DeltaCodecExpectRoundTrip(d);
}

TEST(DeltaCodecTest, MillionSamplesAreCompactAndFast) {
  // As the agent's deltas look: 1000 series sampled together every 100 ms, 1000 times.
  RunDelta d;
  d.samples.reserve(1'000'000);
  const TimeNs start = 1'700'000'000'000'000'000;
  for (int tick = 0; tick < 1000; ++tick) {
    for (int s = 1; s <= 1000; ++s) {
      d.samples.push_back({s, {start + tick * 100'000'000LL, static_cast<double>((tick * 7919 + s) % 1000) / 8}});
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  std::string bytes = EncodeRunDelta(d);
  auto t1 = std::chrono::steady_clock::now();
  StatusOr<RunDelta> back = DecodeRunDelta(bytes);
  auto t2 = std::chrono::steady_clock::now();
  ASSERT_TRUE(back.ok()) << back.status().message();
  auto ms = [](auto a, auto b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  std::printf("1M samples: %zu bytes (%.2f per sample), encode %.1f ms, decode %.1f ms\n", bytes.size(),
              static_cast<double>(bytes.size()) / 1e6, ms(t0, t1), ms(t1, t2));
  // series +1 (1 byte), t +0 (1 byte) or +100 ms (4 bytes) at a new tick, v 8 bytes.
  EXPECT_LT(bytes.size(), 10'100'000u);
  ASSERT_EQ(back->samples.size(), d.samples.size());
  for (size_t i = 0; i < d.samples.size(); ++i) {
    const SampleRecord& a = d.samples[i];
    const SampleRecord& b = back->samples[i];
    if (a.series != b.series || a.sample.t != b.sample.t ||
        std::bit_cast<uint64_t>(a.sample.v) != std::bit_cast<uint64_t>(b.sample.v)) {
      FAIL() << "sample " << i << " differs";
    }
  }
}

// The fuzz target's seed corpus (tests/fuzz/corpus/delta_codec/) is this codec's output for
// the deltas above; GRADEML_WRITE_DELTA_CODEC_SEEDS=1 rewrites it after a format change.
TEST(DeltaCodecTest, FuzzSeedsAreCurrent) {
  RunDelta samples;
  for (int i = 0; i < 64; ++i) {
    samples.samples.push_back({1 + i % 4, {1'700'000'000'000'000'000 + i * 250'000'000LL, i * 0.25}});
  }
  std::string full = EncodeRunDelta(DeltaCodecFullDelta());
  std::vector<std::pair<std::string, std::string>> seeds = {
      {"empty.bin", EncodeRunDelta(RunDelta{})},
      {"full.bin", full},
      {"samples.bin", EncodeRunDelta(samples)},
      {"full_cut.bin", full.substr(0, full.size() / 2)},
  };
  std::filesystem::path dir = std::filesystem::path(GRADEML_SOURCE_DIR) / "tests/fuzz/corpus/delta_codec";
  const char* write = std::getenv("GRADEML_WRITE_DELTA_CODEC_SEEDS");
  if (write && std::string(write) == "1") {
    std::filesystem::create_directories(dir);
    for (const auto& [name, bytes] : seeds) std::ofstream(dir / name, std::ios::binary) << bytes;
  }
  for (const auto& [name, bytes] : seeds) {
    std::ifstream in(dir / name, std::ios::binary);
    ASSERT_TRUE(in) << (dir / name) << " missing: run with GRADEML_WRITE_DELTA_CODEC_SEEDS=1";
    std::string have((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_TRUE(have == bytes) << name << " is stale: run with GRADEML_WRITE_DELTA_CODEC_SEEDS=1";
  }
}

}  // namespace
}  // namespace grademl::model
