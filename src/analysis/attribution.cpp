#include "analysis/attribution.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <unordered_map>
#include <utility>

#include "analysis/nnls.h"
#include "analysis/derived/counter_rate.h"
#include "analysis/derived/host_devices.h"
#include "analysis/series_math.h"
#include "model/metric_names.h"

namespace grademl::analysis {
namespace metric = model::metric;
using model::Run;
using model::Sample;

// --- small public helpers -----------------------------------------------------------------

std::string FormatDemandRule(const DemandRule& rule) {
  switch (rule.kind) {
    case DemandKind::kNone:
      return "none";
    case DemandKind::kExact:
      return fmt::format("exact({:g})", rule.amount);
    case DemandKind::kVariable:
      return fmt::format("variable({:g})", rule.amount);
  }
  return "none";
}

StatusOr<DemandRule> ParseDemandRule(std::string_view text) {
  if (text == "none") return DemandRule::None();
  DemandKind kind;
  std::string_view rest;
  if (text.starts_with("exact")) {
    kind = DemandKind::kExact;
    rest = text.substr(5);
  } else if (text.starts_with("variable")) {
    kind = DemandKind::kVariable;
    rest = text.substr(8);
  } else {
    return InvalidArgument("'{}' is not a demand rule (none, exact(N) or variable(W))", text);
  }
  if (rest.size() >= 2 && rest.front() == '(' && rest.back() == ')') {
    rest = rest.substr(1, rest.size() - 2);
  } else if (!rest.empty() && rest.front() == ':') {
    rest = rest.substr(1);
  } else {
    return InvalidArgument("'{}' is not a demand rule (none, exact(N) or variable(W))", text);
  }
  double amount = 0;
  auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), amount);
  if (ec != std::errc() || end != rest.data() + rest.size() || !std::isfinite(amount) || amount < 0) {
    return InvalidArgument("'{}': the amount must be a number >= 0", text);
  }
  return DemandRule{kind, amount};
}

namespace {

// `*` matches any run of characters (of one path element).
bool MatchElement(std::string_view glob, std::string_view s) {
  size_t g = 0, i = 0, star = std::string_view::npos, mark = 0;
  while (i < s.size()) {
    if (g < glob.size() && glob[g] == '*') {
      star = g++;
      mark = i;
    } else if (g < glob.size() && glob[g] == s[i]) {
      ++g;
      ++i;
    } else if (star != std::string_view::npos) {
      g = star + 1;
      i = ++mark;
    } else {
      return false;
    }
  }
  while (g < glob.size() && glob[g] == '*') ++g;
  return g == glob.size();
}

std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> out;
  size_t from = 0;
  while (true) {
    size_t slash = path.find('/', from);
    out.push_back(path.substr(from, slash == std::string_view::npos ? std::string_view::npos : slash - from));
    if (slash == std::string_view::npos) break;
    from = slash + 1;
  }
  return out;
}

bool MatchElements(std::span<const std::string_view> glob, std::span<const std::string_view> type) {
  if (glob.empty()) return type.empty();
  if (glob.front() == "**") {
    for (size_t skip = 0; skip <= type.size(); ++skip) {
      if (MatchElements(glob.subspan(1), type.subspan(skip))) return true;
    }
    return false;
  }
  return !type.empty() && MatchElement(glob.front(), type.front()) && MatchElements(glob.subspan(1), type.subspan(1));
}

}  // namespace

bool MatchTypeGlob(std::string_view glob, std::string_view type) {
  if (glob.empty()) return false;
  auto g = SplitPath(glob);
  auto t = SplitPath(type);
  return MatchElements(g, t);
}

Status AttributionOptions::Validate() const {
  for (const ExplicitRule& r : rules) {
    if (r.type_glob.empty()) return InvalidArgument("an attribution rule has an empty type glob");
    if (!std::isfinite(r.rule.amount) || r.rule.amount < 0) {
      return InvalidArgument("attribution rule for '{}': the amount must be a number >= 0", r.type_glob);
    }
  }
  return Status::Ok();
}

double MetricAttribution::Utilization(size_t index) const {
  if (index >= could_have_used.size() || index >= usage.size() || !(could_have_used[index] > 0)) {
    return std::numeric_limits<double>::quiet_NaN();
  }
  return usage[index] / could_have_used[index];
}

std::string_view RuleSourceName(RuleSource source) {
  switch (source) {
    case RuleSource::kFitted:
      return "fitted";
    case RuleSource::kFittedExact:
      return "fitted-exact";
    case RuleSource::kExplicit:
      return "explicit";
    case RuleSource::kDefault:
      return "default";
  }
  return "default";
}

const MetricAttribution* Attribution::Find(std::string_view name) const {
  for (const MetricAttribution& m : metrics) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

double SelfUsage(const Run& run, const MetricAttribution& m, model::PhaseId phase) {
  const model::Phase* p = run.FindPhase(phase);
  if (p == nullptr || run.phases.empty()) return 0;
  size_t index = static_cast<size_t>(p - run.phases.data());
  if (index >= m.usage.size()) return 0;
  double self = m.usage[index];
  for (model::PhaseId child : run.ChildrenOf(phase)) {
    const model::Phase* c = run.FindPhase(child);
    if (c != nullptr) self -= m.usage[static_cast<size_t>(c - run.phases.data())];
  }
  return self;
}

namespace {

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr TimeNs kForever = std::numeric_limits<TimeNs>::max();

double DurationSeconds(DurationNs ns) { return static_cast<double>(ns) * 1e-9; }

constexpr size_t kMaxSlices = 100'000;
constexpr size_t kPrefetchEvents = 16;  // how far ahead a sweep fetches its phases' entries
constexpr size_t kMaxSeriesCells = size_t{1} << 20;  // per metric: 8 MiB of series at most

// The per-phase metrics, in output order.
constexpr std::string_view kMetricOrder[] = {attributed::kCpu,   attributed::kReadBytes,      attributed::kWriteBytes,
                                             attributed::kRss,   attributed::kDiskBusy,       attributed::kNetRx,
                                             attributed::kNetTx, attributed::kGpuUtilization, attributed::kGpuMemory};
constexpr size_t kMetricCount = std::size(kMetricOrder);
enum MetricIndex : size_t { kMCpu, kMRead, kMWrite, kMRss, kMDiskBusy, kMNetRx, kMNetTx, kMGpuUtil, kMGpuMem };

std::string_view UnitOf(size_t m) {
  switch (m) {
    case kMCpu:
      return "core-s";
    case kMRead:
    case kMWrite:
    case kMNetRx:
    case kMNetTx:
      return "bytes";
    case kMRss:
    case kMGpuMem:
      return "byte-s";
    case kMDiskBusy:
      return "disk-s";
    case kMGpuUtil:
      return "GPU-s";
  }
  return "";
}
bool IsGaugeMetric(size_t m) { return m == kMRss || m == kMGpuUtil || m == kMGpuMem; }
// Memory held is a level that outlives the phase that allocated it: a per-type demand does not
// describe it, so memory is split evenly (Variable(1)) unless a rule says otherwise.
bool IsFittedMetric(size_t m) { return m != kMRss && m != kMGpuMem; }

// --- the time grid ------------------------------------------------------------------------

// The slices of the per-slice series: which slice a time falls in, where the next slice
// starts. Times before the grid count in the first slice, times after it in the last.
struct Grid {
  TimeNs start = 0;
  DurationNs width = 1;
  size_t slices = 1;

  size_t SliceOf(TimeNs t) const {
    if (t <= start) return 0;
    auto k = static_cast<uint64_t>(t - start) / static_cast<uint64_t>(width);
    return std::min<size_t>(k, slices - 1);
  }
  // The slice of an interval that ends at t (exclusive).
  size_t SliceOfEnd(TimeNs t) const { return SliceOf(t - 1); }
  // The first internal slice boundary after t, or kForever.
  TimeNs NextBoundary(TimeNs t) const {
    uint64_t k = t < start ? 1 : static_cast<uint64_t>(t - start) / static_cast<uint64_t>(width) + 1;
    if (k >= slices) return kForever;
    return start + static_cast<TimeNs>(k) * width;
  }
  // The start of slice k.
  TimeNs Start(size_t k) const { return start + static_cast<TimeNs>(k) * width; }
  // Adds `amount` spread evenly over [t0, t1) (all of it at t0 when t1 <= t0).
  void Spread(TimeNs t0, TimeNs t1, double amount, std::vector<double>& out) const {
    if (amount == 0) return;
    if (t1 <= t0) {
      out[SliceOf(t0)] += amount;
      return;
    }
    double per_ns = amount / static_cast<double>(t1 - t0);
    TimeNs a = t0;
    while (a < t1) {
      TimeNs b = std::min(t1, NextBoundary(a));
      out[SliceOf(a)] += per_ns * static_cast<double>(b - a);
      a = b;
    }
  }
};

// SliceOf, SliceOfEnd and NextBoundary for times that mostly come in order (a sweep's events
// or periods): the slice is kept and moved only when a time leaves it, by the same division,
// so the answers are Grid's exactly, in any order, with one comparison per call in order.
class SliceCursor {
 public:
  explicit SliceCursor(const Grid& grid) : grid_(grid) { Seek(std::numeric_limits<TimeNs>::min()); }
  size_t At(TimeNs t) {
    if (t >= next_ || (k_ > 0 && t < lo_)) Seek(t);
    return k_;
  }
  // SliceOfEnd(t) == SliceOf(t - 1): the slice before when t is its slice's first instant.
  size_t EndAt(TimeNs t) {
    size_t k = At(t);
    return k > 0 && t == lo_ ? k - 1 : k;
  }
  // NextBoundary(t).
  TimeNs NextAt(TimeNs t) {
    At(t);
    return next_;
  }

 private:
  void Seek(TimeNs t) {
    k_ = grid_.SliceOf(t);
    lo_ = grid_.Start(k_);
    next_ = k_ + 1 < grid_.slices ? grid_.Start(k_ + 1) : std::numeric_limits<TimeNs>::max();
  }
  const Grid& grid_;
  size_t k_ = 0;
  TimeNs lo_ = 0;    // the start of slice k_ (t >= lo_ whenever k_ > 0)
  TimeNs next_ = 0;  // the start of slice k_ + 1, or never
};

// --- the phase tree as indexes ------------------------------------------------------------

// The run's phases as dense indexes (Run::phases order): the tree actually walked (cycles
// broken), children in start order, effective ends, type and host ids, and the process each
// phase runs in.
struct PhaseTable {
  size_t n = 0;
  std::vector<uint32_t> parent;
  std::vector<uint32_t> child_offset;  // CSR: children of i are child_list[child_offset[i] .. child_offset[i+1])
  std::vector<uint32_t> child_list;
  std::vector<uint32_t> preorder;
  std::vector<uint32_t> depth;
  std::vector<TimeNs> start;
  std::vector<TimeNs> end;
  std::vector<uint32_t> type;
  std::vector<std::string_view> type_names;
  std::vector<uint32_t> host;
  std::vector<uint32_t> owner;  // process domain, or kNone

  std::span<const uint32_t> Children(uint32_t i) const {
    return {child_list.data() + child_offset[i], child_list.data() + child_offset[i + 1]};
  }
};

// Groups 0..n-1 by key (kNone keys are left out): CSR offsets and members in index order.
void GroupBy(const std::vector<uint32_t>& key, size_t groups, std::vector<uint32_t>& offset,
             std::vector<uint32_t>& members) {
  offset.assign(groups + 1, 0);
  for (uint32_t k : key) {
    if (k != kNone) ++offset[k + 1];
  }
  for (size_t g = 0; g < groups; ++g) offset[g + 1] += offset[g];
  members.assign(offset[groups], 0);
  std::vector<uint32_t> fill(offset.begin(), offset.end() - 1);
  for (size_t i = 0; i < key.size(); ++i) {
    if (key[i] != kNone) members[fill[key[i]]++] = static_cast<uint32_t>(i);
  }
}

// --- demand rules per type ---------------------------------------------------------------

// One rule per type id for one metric source group. Amounts are also kept in fixed point so
// that the sums of running demands are exact however many phases start and end.
struct RuleTable {
  // A type's rule as a sweep reads it, in one place: the sums it adds to (0 exact, 1
  // variable, 2 none), its amount and its fixed-point amount.
  struct Packed {
    double amount;
    int64_t fixed;
    uint32_t sum;
  };
  std::vector<DemandKind> kind;
  std::vector<double> amount;
  std::vector<int64_t> fixed;
  std::vector<Packed> packed;  // per type, made by Finish
  double to_double = 1;  // fixed * to_double == amount

  void Finish() {
    double max_amount = 0;
    for (size_t t = 0; t < kind.size(); ++t) {
      if (kind[t] != DemandKind::kNone) max_amount = std::max(max_amount, amount[t]);
    }
    // A power of two, so that amounts with few binary digits (0.25, 3) stay exact.
    int exponent = 0;
    if (max_amount > 0) std::frexp(max_amount, &exponent);
    double scale = std::ldexp(1.0, 40 - exponent);
    to_double = 1.0 / scale;
    fixed.assign(kind.size(), 0);
    for (size_t t = 0; t < kind.size(); ++t) {
      if (kind[t] == DemandKind::kNone) continue;
      fixed[t] = std::llround(amount[t] * scale);
      amount[t] = static_cast<double>(fixed[t]) * to_double;
    }
    packed.resize(kind.size());
    for (size_t t = 0; t < kind.size(); ++t) {
      uint32_t sum = kind[t] == DemandKind::kExact ? 0 : kind[t] == DemandKind::kVariable ? 1 : 2;
      packed[t] = {sum == 2 ? 0.0 : amount[t], sum == 2 ? 0 : fixed[t], sum};
    }
  }
};

// --- events: when each phase is among the deepest running ones -------------------------------

// The phase's type travels with the event, so that a sweep need not look it up.
struct Event {
  TimeNs t;
  uint32_t phase;
  uint32_t type_end;  // type id << 1 | 1 when the phase stops being deepest, 0 when it starts
  uint32_t type() const { return type_end >> 1; }
  bool is_end() const { return (type_end & 1) != 0; }
};

// Sorts events by time, stably (ties keep their order of generation, so results are
// deterministic): an LSD radix sort on the time since the earliest event.
void SortEvents(std::vector<Event>& v, size_t first, std::vector<Event>& buffer) {
  size_t n = v.size() - first;
  Event* data = v.data() + first;
  if (n < 64) {
    std::stable_sort(data, data + n, [](const Event& a, const Event& b) { return a.t < b.t; });
    return;
  }
  TimeNs lo = data[0].t, hi = data[0].t;
  for (size_t i = 0; i < n; ++i) {
    lo = std::min(lo, data[i].t);
    hi = std::max(hi, data[i].t);
  }
  auto range = static_cast<uint64_t>(hi - lo);
  constexpr int kBits = 11;
  constexpr size_t kBuckets = size_t{1} << kBits;
  buffer.resize(n);
  Event* from = data;
  Event* to = buffer.data();
  // Every digit's counts in one pass; a digit that all events share moves nothing and is
  // skipped (the order is that of the passes made).
  int digits = 0;
  while (digits * kBits < 64 && (range >> (digits * kBits)) != 0) ++digits;
  std::vector<size_t> count(kBuckets * static_cast<size_t>(digits), 0);
  for (size_t i = 0; i < n; ++i) {
    auto key = static_cast<uint64_t>(data[i].t - lo);
    for (int d = 0; d < digits; ++d) ++count[static_cast<size_t>(d) * kBuckets + ((key >> (d * kBits)) & (kBuckets - 1))];
  }
  for (int d = 0; d < digits; ++d) {
    size_t* c = count.data() + static_cast<size_t>(d) * kBuckets;
    int shift = d * kBits;
    if (std::find(c, c + kBuckets, n) != c + kBuckets) continue;
    size_t sum = 0;
    for (size_t b = 0; b < kBuckets; ++b) {
      size_t k = c[b];
      c[b] = sum;
      sum += k;
    }
    for (size_t i = 0; i < n; ++i) to[c[(static_cast<uint64_t>(from[i].t - lo) >> shift) & (kBuckets - 1)]++] = from[i];
    std::swap(from, to);
  }
  if (from != data) std::copy(from, from + n, data);
}

// --- sources: one measured quantity of one domain -------------------------------------------

// A counter (cumulative samples) or a gauge (levels) ready to be split: periods between
// samples have a constant rate (counters) or level (gauges).
struct Source {
  std::vector<Sample> samples;
  bool gauge = false;
  TimeNs hold_until = 0;  // a gauge's last level holds until here
  double capacity = kNaN;
  bool empty() const { return samples.empty(); }
  // f(t0, t1, value): value is the amount of [t0, t1) for counters (t0 == t1: an amount at one
  // instant) or the level over [t0, t1) for gauges.
  template <class F>
  void ForEach(F&& f) const {
    size_t n = samples.size();
    if (gauge) {
      for (size_t k = 0; k < n; ++k) {
        TimeNs t1 = k + 1 < n ? samples[k + 1].t : hold_until;
        if (t1 > samples[k].t) f(samples[k].t, t1, samples[k].v);
      }
    } else {
      for (size_t k = 1; k < n; ++k) {
        double amount = samples[k].v - samples[k - 1].v;
        if (amount > 0 || samples[k].t > samples[k - 1].t) f(samples[k - 1].t, samples[k].t, std::max(0.0, amount));
      }
    }
  }
};

// Several counters with no origin (a host's cores) as one: derived/counter_rate.h's sum, whose
// values are the summed increases (a reset of one counter counts 0).
std::vector<Sample> SumCounters(const std::vector<SampleSpan>& parts) {
  std::vector<derived::Counter> counters;
  for (SampleSpan s : parts) {
    if (!s.empty()) counters.push_back({s, std::nullopt});
  }
  return derived::SumAsCounter(counters);
}

// --- accumulators --------------------------------------------------------------------------

// One per-phase metric while it is being computed.
struct MetricAccum {
  bool has_data = false;
  bool any_capacity = false;
  bool all_capacity = true;
  double measured = 0;
  double unattributed = 0;
  std::vector<double> self;    // per phase
  std::vector<double> could;   // per phase, when any source has a capacity
  std::vector<double> slices;  // tracked phases x slices, own parts
};

// A host counter compared with the sum of its processes' counters, period by period.
struct Comparison {
  Source host;
  std::vector<double> process_amount;  // per host period
  double process_total = 0;
  size_t resource_index = 0;  // into the output resources
  bool any_process_data = false;
  size_t hint = 0;  // the host period of the last call

  void AddProcess(TimeNs t0, TimeNs t1, double amount) {
    process_total += amount;
    const auto& h = host.samples;
    if (h.size() < 2 || amount == 0) return;
    // The host period holding t0: a process's periods come in time order, so the last one
    // found is usually right or just before.
    size_t k = hint;
    if (k >= h.size() || h[k].t > t0) {
      auto first = std::upper_bound(h.begin(), h.end(), t0, [](TimeNs t, const Sample& s) { return t < s.t; });
      k = first == h.begin() ? 0 : static_cast<size_t>(first - h.begin()) - 1;
    } else {
      while (k + 1 < h.size() && h[k + 1].t <= t0) ++k;
    }
    hint = k;
    if (t1 <= t0) {
      if (t0 >= h.front().t && t0 < h.back().t) process_amount[k] += amount;
      return;
    }
    double per_ns = amount / static_cast<double>(t1 - t0);
    for (; k + 1 < h.size() && h[k].t < t1; ++k) {
      TimeNs a = std::max(t0, h[k].t), b = std::min(t1, h[k + 1].t);
      if (b > a) process_amount[k] += per_ns * static_cast<double>(b - a);
    }
  }
};

// Water-filling: gives `amount` to items in proportion to their weights, none beyond its cap;
// adds to `given` and returns what was given.
double WaterFill(double amount, const std::vector<double>& weight, const std::vector<double>& cap,
                 std::vector<double>& given, std::vector<size_t>& order) {
  double total_cap = 0, total_weight = 0;
  for (size_t i = 0; i < weight.size(); ++i) {
    if (weight[i] > 0) {
      total_cap += cap[i];
      total_weight += weight[i];
    }
  }
  if (total_weight <= 0 || amount <= 0) return 0;
  if (amount >= total_cap) {
    for (size_t i = 0; i < weight.size(); ++i) {
      if (weight[i] > 0) given[i] += cap[i];
    }
    return total_cap;
  }
  double level = amount / total_weight;
  bool fits = true;
  for (size_t i = 0; i < weight.size() && fits; ++i) fits = weight[i] <= 0 || level * weight[i] <= cap[i];
  if (fits) {
    for (size_t i = 0; i < weight.size(); ++i) {
      if (weight[i] > 0) given[i] += level * weight[i];
    }
    return amount;
  }
  order.clear();
  for (size_t i = 0; i < weight.size(); ++i) {
    if (weight[i] > 0) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cap[a] * weight[b] < cap[b] * weight[a]; });
  double left = amount, w_left = total_weight;
  size_t pos = 0;
  for (; pos < order.size(); ++pos) {
    size_t i = order[pos];
    if (cap[i] * w_left > left * weight[i]) break;  // not capped at the current level
    given[i] += cap[i];
    left -= cap[i];
    w_left -= weight[i];
  }
  for (; pos < order.size(); ++pos) given[order[pos]] += left * weight[order[pos]] / w_left;
  return amount;
}

// Per-type statistics of the periods in which one type ran (almost) alone, for inferring
// exact demands.
struct SoloStats {
  double w = 0, wr = 0, wr2 = 0;
  size_t rows = 0;
};

// One NNLS fit in progress: its columns (phase types), normal equations and statistics.
struct Fit {
  size_t metric = 0;
  std::string host, resource;
  std::vector<int32_t> col_of_type;  // -1: not a column
  std::vector<uint32_t> type_of_col;
  NormalEquations eq;
  std::vector<double> active_s;  // per column, seconds of deepest-running instances in the rows
  std::vector<SoloStats> solo;
  double sum_u = 0, sum_area = 0, sum_l = 0;
  bool usable = true;
  std::string note;

  void Init(std::vector<uint32_t> types, size_t type_count) {
    type_of_col = std::move(types);
    col_of_type.assign(type_count, -1);
    for (size_t c = 0; c < type_of_col.size(); ++c) col_of_type[type_of_col[c]] = static_cast<int32_t>(c);
    eq = NormalEquations(type_of_col.size());
    active_s.assign(type_of_col.size(), 0.0);
    solo.assign(type_of_col.size(), {});
  }

  // One row: `entries` are (column, instance-seconds running), u the amount, l the seconds.
  void AddRhs(std::span<const std::pair<size_t, double>> entries, double u, double l, bool lhs) {
    if (l <= 0) return;
    frac_.assign(entries.begin(), entries.end());
    double area = 0, top = 0;
    size_t top_col = 0;
    for (auto& [c, a] : frac_) {
      area += a;
      if (lhs) active_s[c] += a;
      if (a > top) {
        top = a;
        top_col = c;
      }
      a /= l;
    }
    if (lhs) {
      eq.AddLhs(frac_, l);
      eq.CountRow();
    }
    eq.AddRhs(frac_, u / l, l);
    sum_u += u;
    sum_area += area;
    sum_l += l;
    // Solo: one type covers >= 90% of the period and the others <= 10% of it.
    if (top >= 0.9 * l && area - top <= 0.1 * l) {
      double r = u / top;  // rate per running instance
      SoloStats& s = solo[top_col];
      s.w += l;
      s.wr += l * r;
      s.wr2 += l * r * r;
      ++s.rows;
    }
  }

 private:
  std::vector<std::pair<size_t, double>> frac_;
};

// Walks rows [bounds[k], bounds[k+1]) over sorted events and calls on_row(k, entries, l_s)
// with each column's instance-seconds of deepest running in the row.
template <class OnRow>
void SweepRows(std::span<const Event> ev, std::span<const TimeNs> bounds, const std::vector<int32_t>& col_of_type,
               size_t cols, OnRow&& on_row) {
  if (bounds.size() < 2) return;
  std::vector<int64_t> count(cols, 0);
  std::vector<double> area(cols, 0.0);  // instance-ns
  std::vector<TimeNs> last(cols, 0);
  std::vector<uint32_t> active, active_pos(cols, kNone), touched;
  std::vector<char> is_touched(cols, 0);
  std::vector<std::pair<size_t, double>> entries;
  auto col_of = [&](const Event& e) { return col_of_type[e.type()]; };
  auto change = [&](int32_t c, bool end) {
    if (end) {
      if (--count[c] == 0) {
        uint32_t pos = active_pos[c];
        active[pos] = active.back();
        active_pos[active[pos]] = pos;
        active.pop_back();
        active_pos[c] = kNone;
      }
    } else if (count[c]++ == 0) {
      active_pos[c] = static_cast<uint32_t>(active.size());
      active.push_back(static_cast<uint32_t>(c));
    }
  };
  size_t e = 0;
  for (size_t k = 0; k + 1 < bounds.size(); ++k) {
    TimeNs t0 = bounds[k], t1 = bounds[k + 1];
    for (; e < ev.size() && ev[e].t <= t0; ++e) {
      int32_t c = col_of(ev[e]);
      if (c >= 0) change(c, ev[e].is_end());
    }
    if (t1 <= t0) continue;
    for (uint32_t c : active) {
      last[c] = t0;
      is_touched[c] = 1;
      touched.push_back(c);
    }
    for (; e < ev.size() && ev[e].t < t1; ++e) {
      int32_t c = col_of(ev[e]);
      if (c < 0) continue;
      TimeNs t = ev[e].t;
      if (is_touched[c]) {
        area[c] += static_cast<double>(count[c]) * static_cast<double>(t - last[c]);
      } else {
        is_touched[c] = 1;
        touched.push_back(static_cast<uint32_t>(c));
      }
      last[c] = t;
      change(c, ev[e].is_end());
    }
    entries.clear();
    for (uint32_t c : touched) {
      area[c] += static_cast<double>(count[c]) * static_cast<double>(t1 - last[c]);
      if (area[c] > 0) entries.emplace_back(c, area[c] * 1e-9);
      area[c] = 0;
      is_touched[c] = 0;
    }
    touched.clear();
    on_row(k, std::span<const std::pair<size_t, double>>(entries), DurationSeconds(t1 - t0));
  }
}

// --- the attribution --------------------------------------------------------------------------

// One host: its resources by kind, and the comparisons of its CPU and disk bytes with its
// processes' when those have data.
struct HostDomain {
  std::string name;
  std::vector<const model::Resource*> cores, disks, nets, gpus;
  HostDevices devices;  // which of its disks and interfaces count (host_devices.h)
  const model::Resource* memory = nullptr;
  size_t core_count = 0;  // cores with series
  double memory_capacity = kNaN;
  Comparison cpu_cmp, read_cmp, write_cmp;
  bool has_cpu_cmp = false, has_read_cmp = false, has_write_cmp = false;
};

// One monitored process: its phase and its resource (whose series are split over the phases
// that run in it).
struct ProcessDomain {
  uint32_t phase = kNone;
  const model::Resource* resource = nullptr;
  int32_t pid = 0;
};

// One source ready to split, and where its result goes.
struct SplitJob {
  const Source* source = nullptr;
  const RuleTable* rules = nullptr;
  MetricAccum* acc = nullptr;
  uint32_t sink = kNone;                    // the process phase that takes what the rules leave; kNone: unattributed
  ResourceAttribution* resource = nullptr;  // host resources: measured / unattributed over the grid
};

// Computes one Attribution: builds the phase table, the grid and the domains (processes,
// hosts), fits the rules of each metric, splits every source and sums the results up the tree.
class Attributor {
 public:
  Attributor(const model::Run& run, const AttributionOptions& options) : run_(run), options_(options) {}

  Attribution Compute() {
    if (Status st = options_.Validate(); !st.ok()) {
      out_.notes.push_back(st.message() + "; the invalid rules are ignored");
    }
    for (const ExplicitRule& r : options_.rules) {
      if (!r.type_glob.empty() && std::isfinite(r.rule.amount) && r.rule.amount >= 0) rules_.push_back(r);
    }
    BuildTable();
    BuildGrid();
    ChooseTracked();
    BuildDomains();
    AttributeProcesses();
    for (size_t h = 0; h < hosts_.size(); ++h) AttributeHost(h);
    Finish();
    return std::move(out_);
  }

 private:
  // ---- setup ----

  uint32_t HostId(const std::string& name) {
    auto [it, inserted] = host_ids_.try_emplace(name, static_cast<uint32_t>(hosts_.size()));
    if (inserted) {
      hosts_.emplace_back();
      hosts_.back().name = name;
    }
    return it->second;
  }

  void BuildTable() {
    PhaseTable& t = table_;
    const auto& phases = run_.phases;
    size_t n = phases.size();
    t.n = n;
    TimeNs run_end = run_.EffectiveEnd();
    // One pass over the phases reads every field the table needs (a phase is several cache
    // lines; each further pass over a million of them costs as much as the work): the
    // declared parent, times, type, own host, process, pid and whether it runs on a thread.
    // A run has few types, repeated in short cycles (iteration, forward, backward): the
    // types of the last few phases are compared before the hash map is asked.
    std::vector<uint32_t> declared(n, kNone);
    std::vector<const std::string*> own_host(n, nullptr);
    std::vector<uint32_t> domain_of(n, kNone);
    std::vector<int32_t> pid(n, 0);
    std::vector<char> beside(n, 0);  // on a device or async track, beside the process's threads
    t.start.resize(n);
    t.end.resize(n);
    t.type.resize(n);
    std::unordered_map<std::string_view, uint32_t> type_ids;
    constexpr size_t kRecent = 4;
    std::array<uint32_t, kRecent> recent;
    recent.fill(kNone);
    size_t recent_next = 0;
    for (size_t i = 0; i < n; ++i) {
      const model::Phase& ph = phases[i];
      if (ph.parent != 0) {
        if (const model::Phase* parent = run_.FindPhase(ph.parent); parent != nullptr) {
          auto p = static_cast<size_t>(parent - phases.data());
          if (p != i) declared[i] = static_cast<uint32_t>(p);
        }
      }
      t.start[i] = ph.start_ns;
      TimeNs end = ph.ended() ? ph.end_ns : std::max(ph.start_ns, run_end);
      t.end[i] = std::max(end, ph.start_ns);
      std::string_view type = ph.type;
      uint32_t id = kNone;
      for (uint32_t r : recent) {
        if (r != kNone && t.type_names[r] == type) {
          id = r;
          break;
        }
      }
      if (id == kNone) {
        auto [it, inserted] = type_ids.try_emplace(type, static_cast<uint32_t>(t.type_names.size()));
        if (inserted) t.type_names.push_back(type);
        id = it->second;
        recent[recent_next] = id;
        recent_next = (recent_next + 1) % kRecent;
      }
      t.type[i] = id;
      if (!ph.host.empty()) own_host[i] = &ph.host;
      pid[i] = ph.pid;
      if (const model::Track* track = run_.FindTrack(ph.track);
          track != nullptr && track->kind != model::TrackKind::kThread) {
        beside[i] = 1;
      }
      if (const model::Resource* r = run_.ProcessResourceOf(ph.id); r != nullptr) {
        domain_of[i] = static_cast<uint32_t>(processes_.size());
        processes_.push_back({static_cast<uint32_t>(i), r, r->pid != 0 ? r->pid : ph.pid});
      }
    }
    // Children in start order, then a depth-first walk from the roots; phases on a parent
    // cycle (corrupt input) become roots.
    std::vector<uint32_t> off, members;
    GroupBy(declared, n, off, members);
    // Children are usually recorded in start order already: sorting them is then a check.
    auto by_start = [&](uint32_t a, uint32_t b) { return t.start[a] < t.start[b]; };
    auto sort_children = [&](std::vector<uint32_t>& list, const std::vector<uint32_t>& offset) {
      for (size_t i = 0; i < n; ++i) {
        auto first = list.begin() + offset[i], last = list.begin() + offset[i + 1];
        if (!std::is_sorted(first, last, by_start)) std::stable_sort(first, last, by_start);
      }
    };
    sort_children(members, off);
    t.parent.assign(n, kNone);
    t.depth.assign(n, 0);
    t.preorder.clear();
    t.preorder.reserve(n);
    std::vector<char> visited(n, 0);
    std::vector<std::pair<uint32_t, uint32_t>> stack;
    auto walk = [&](uint32_t root) {
      visited[root] = 1;
      t.preorder.push_back(root);
      stack.emplace_back(root, off[root]);
      while (!stack.empty()) {
        auto& [v, next] = stack.back();
        if (next < off[v + 1]) {
          uint32_t c = members[next++];
          if (visited[c]) continue;
          visited[c] = 1;
          t.parent[c] = v;
          t.depth[c] = t.depth[v] + 1;
          t.preorder.push_back(c);
          stack.emplace_back(c, off[c]);
        } else {
          stack.pop_back();
        }
      }
    };
    for (size_t i = 0; i < n; ++i) {
      if (declared[i] == kNone) walk(static_cast<uint32_t>(i));
    }
    for (size_t i = 0; i < n; ++i) {
      if (!visited[i]) walk(static_cast<uint32_t>(i));
    }
    GroupBy(t.parent, n, t.child_offset, t.child_list);
    sort_children(t.child_list, t.child_offset);

    // Hosts (a phase without a host runs on its parent's, the root on the run's), numbered
    // in pre-order; the last host's name is compared before the map is asked.
    t.host.assign(n, kNone);
    const std::string* last_host = nullptr;
    uint32_t last_host_id = kNone;
    for (uint32_t i : t.preorder) {
      if (const std::string* h = own_host[i]; h != nullptr) {
        if (last_host == nullptr || *last_host != *h) {
          last_host = h;
          last_host_id = HostId(*h);
        }
        t.host[i] = last_host_id;
      } else if (t.parent[i] != kNone) {
        t.host[i] = t.host[t.parent[i]];
      } else if (!run_.info.host.empty()) {
        t.host[i] = HostId(run_.info.host);
      }
    }

    // Processes: a phase with a process resource starts a process domain; its descendants
    // with the same pid (or none) run in it.
    t.owner.assign(n, kNone);
    for (uint32_t i : t.preorder) {
      if (domain_of[i] != kNone) {
        t.owner[i] = domain_of[i];
        continue;
      }
      uint32_t p = t.parent[i];
      if (p == kNone || t.owner[p] == kNone) continue;
      // Work on a device (a GPU stream's kernels) or an async track runs beside the process's
      // threads, not in them: it takes no share of the process's CPU, memory or I/O.
      if (beside[i]) continue;
      if (pid[i] == 0 || pid[i] == processes_[t.owner[p]].pid) t.owner[i] = t.owner[p];
    }
  }

  void BuildGrid() {
    TimeNs start = run_.info.start_ns;
    const model::Phase* root = run_.Root();
    if (root != nullptr && (start == 0 || root->start_ns < start)) start = root->start_ns;
    TimeNs end = std::max(start, run_.EffectiveEnd());
    size_t slices = std::clamp<size_t>(options_.slices, 1, kMaxSlices);
    DurationNs width =
        std::max<DurationNs>(1, (end - start + static_cast<DurationNs>(slices) - 1) / static_cast<DurationNs>(slices));
    grid_ = {start, width, slices};
    out_.grid = {start, width, slices};
  }

  // The phases with per-slice series: breadth-first from the roots, so that a tracked
  // phase's parent is tracked too.
  void ChooseTracked() {
    size_t n = table_.n;
    tracked_index_.assign(n, kNone);
    std::vector<uint32_t> queue;
    for (uint32_t i : table_.preorder) {
      if (table_.parent[i] == kNone) queue.push_back(i);
    }
    // Series memory stays bounded whatever the options: at most kMaxSeriesCells numbers per metric.
    size_t max_tracked = std::min(options_.series_max_phases, kMaxSeriesCells / grid_.slices);
    for (size_t q = 0; q < queue.size() && tracked_.size() < max_tracked; ++q) {
      uint32_t v = queue[q];
      if (static_cast<int>(table_.depth[v]) > options_.series_max_depth) continue;
      tracked_index_[v] = static_cast<uint32_t>(tracked_.size());
      tracked_.push_back(v);
      for (uint32_t c : table_.Children(v)) queue.push_back(c);
    }
    target_.assign(n, kNone);
    for (uint32_t i : table_.preorder) {
      if (tracked_index_[i] != kNone)
        target_[i] = tracked_index_[i];
      else if (table_.parent[i] != kNone)
        target_[i] = target_[table_.parent[i]];
    }
  }

  void BuildDomains() {
    // Host resources: every resource below a host that is not a process.
    std::unordered_map<model::ResourceId, std::vector<const model::Resource*>> children;
    for (const model::Resource& r : run_.resources) children[r.parent].push_back(&r);
    for (const model::Resource& r : run_.resources) {
      if (r.kind != model::ResourceKind::kHost) continue;
      HostDomain& h = hosts_[HostId(r.host.empty() ? r.name : r.host)];
      std::vector<const model::Resource*> queue{&r};
      for (size_t q = 0; q < queue.size(); ++q) {
        auto it = children.find(queue[q]->id);
        if (it == children.end()) continue;
        for (const model::Resource* c : it->second) {
          if (c->kind == model::ResourceKind::kProcess || c->kind == model::ResourceKind::kHost) continue;
          queue.push_back(c);
          switch (c->kind) {
            case model::ResourceKind::kCore:
              h.cores.push_back(c);
              break;
            case model::ResourceKind::kDisk:
              h.disks.push_back(c);
              break;
            case model::ResourceKind::kNet:
              h.nets.push_back(c);
              break;
            case model::ResourceKind::kGpu:
              h.gpus.push_back(c);
              break;
            case model::ResourceKind::kMemory:
              h.memory = c;
              break;
            default:
              break;
          }
        }
      }
    }
    for (HostDomain& h : hosts_) {
      h.devices = DevicesOfHost(run_, h.name);
      for (const model::Resource* c : h.cores) {
        if (!SamplesOf(run_.FindSeries(c->id, metric::kCoreUser)).empty() ||
            !SamplesOf(run_.FindSeries(c->id, metric::kCoreSystem)).empty()) {
          ++h.core_count;
        }
      }
      if (h.memory != nullptr) {
        const model::Series* used = run_.FindSeries(h.memory->id, metric::kMemUsed);
        if (used != nullptr && used->info.has_capacity()) h.memory_capacity = used->info.capacity;
      }
    }
    // Which hosts have process data for CPU and storage bytes.
    for (const ProcessDomain& d : processes_) {
      uint32_t h = table_.host[d.phase];
      if (h == kNone) continue;
      auto has = [&](std::string_view name) { return !SamplesOf(run_.FindSeries(d.resource->id, name)).empty(); };
      if (has(metric::kProcCpuUser) || has(metric::kProcCpuSystem) || has(metric::kProcCpuUnseenChildren)) {
        hosts_[h].cpu_cmp.any_process_data = true;
      }
      if (has(metric::kProcReadBytes)) hosts_[h].read_cmp.any_process_data = true;
      if (has(metric::kProcWriteBytes)) hosts_[h].write_cmp.any_process_data = true;
    }
    // Host CPU and disk bytes are compared with their processes' when those exist.
    for (HostDomain& h : hosts_) {
      Source busy = HostCpuSource(h);
      if (!busy.empty() && h.cpu_cmp.any_process_data) {
        h.has_cpu_cmp = StartComparison(h, h.cpu_cmp, std::move(busy), "cpu", "cpu.busy", attributed::kCpu);
      }
      for (int dir = 0; dir < 2; ++dir) {
        Comparison& cmp = dir == 0 ? h.read_cmp : h.write_cmp;
        if (!cmp.any_process_data) continue;
        Source bytes = HostDiskBytesSource(h, dir == 0 ? metric::kDiskReadBytes : metric::kDiskWriteBytes);
        if (bytes.empty()) continue;
        bool ok = StartComparison(h, cmp, std::move(bytes), "disks",
                                  dir == 0 ? metric::kDiskReadBytes : metric::kDiskWriteBytes,
                                  dir == 0 ? attributed::kReadBytes : attributed::kWriteBytes);
        (dir == 0 ? h.has_read_cmp : h.has_write_cmp) = ok;
      }
    }
  }

  bool StartComparison(HostDomain& h, Comparison& cmp, Source host, std::string_view resource,
                       std::string_view metric_name, std::string_view as) {
    if (host.samples.size() < 2) return false;
    cmp.host = std::move(host);
    cmp.process_amount.assign(cmp.host.samples.size(), 0.0);
    cmp.resource_index = out_.resources.size();
    ResourceAttribution r;
    r.host = h.name;
    r.resource = std::string(resource);
    r.metric = std::string(metric_name);
    r.attributed_as = std::string(as);
    r.capacity = cmp.host.capacity;
    out_.resources.push_back(std::move(r));
    return true;
  }

  // All cores' user + system time, as one counter (capacity: the number of cores).
  Source HostCpuSource(const HostDomain& h) const {
    std::vector<SampleSpan> parts;
    for (const model::Resource* c : h.cores) {
      parts.push_back(SamplesOf(run_.FindSeries(c->id, metric::kCoreUser)));
      parts.push_back(SamplesOf(run_.FindSeries(c->id, metric::kCoreSystem)));
    }
    Source s;
    s.samples = SumCounters(parts);
    if (h.core_count > 0) s.capacity = static_cast<double>(h.core_count);
    return s;
  }

  // The disks whose bytes count (host_devices.h: no dm-*/md* over recorded disks, no
  // partitions of recorded disks, no loop/RAM devices).
  std::vector<const model::Resource*> CountedDisks(const HostDomain& h) const {
    std::vector<const model::Resource*> counted;
    for (const model::Resource* d : h.disks) {
      if (h.devices.Counts(*d)) counted.push_back(d);
    }
    return counted;
  }

  Source HostDiskBytesSource(const HostDomain& h, std::string_view name) const {
    Source s;
    s.samples = SumOfCounters(run_, CountedDisks(h), name);  // host_devices.h
    return s;
  }

  // ---- events ----

  // Appends the events of `phases`' own running time: each phase minus the children that
  // `counts_as_child` accepts, cut at slice boundaries. Adds seconds per type to `active`.
  template <class ChildFilter>
  void MakeEvents(std::span<const uint32_t> phases, ChildFilter&& counts_as_child, std::vector<Event>& out,
                  std::vector<double>* active) {
    size_t first = out.size();
    SliceCursor slices(grid_);  // the phases of a process come in time order
    auto emit = [&](uint32_t p, TimeNs a, TimeNs b) {
      uint32_t type = table_.type[p];
      if (active != nullptr) (*active)[type] += DurationSeconds(b - a);
      while (a < b) {
        TimeNs cut = std::min(b, slices.NextAt(a));
        out.push_back({a, p, type << 1});
        out.push_back({cut, p, type << 1 | 1});
        a = cut;
      }
    };
    for (uint32_t p : phases) {
      TimeNs s = table_.start[p], e = table_.end[p];
      if (e <= s) continue;
      TimeNs cur = s;
      for (uint32_t c : table_.Children(p)) {
        if (!counts_as_child(c)) continue;
        TimeNs cs = table_.start[c], ce = table_.end[c];
        if (ce <= cs) continue;
        if (cs > cur) emit(p, cur, std::min(cs, e));
        cur = std::max(cur, ce);
        if (cur >= e) break;
      }
      if (cur < e) emit(p, cur, e);
    }
    SortEvents(out, first, sort_buffer_);
  }

  // Room for the events of `phases` phases: a phase runs as deepest at most once more than it
  // has children, so two events per phase and per child suffice unless slice bounds cut many.
  void ReserveEvents(size_t phases) {
    size_t want = 4 * phases + 2 * grid_.slices + 16;
    if (events_.capacity() < want) events_.reserve(want);
  }

  // ---- rules ----

  // The explicit rule for (metric, type), if any.
  const ExplicitRule* ExplicitFor(size_t m, uint32_t type) const {
    for (const ExplicitRule& r : rules_) {
      if (MatchElement(r.metric, kMetricOrder[m]) && MatchTypeGlob(r.type_glob, table_.type_names[type])) return &r;
    }
    return nullptr;
  }

  // Chooses a fit's columns: the types that ran, the most active first (ties by name).
  std::vector<uint32_t> ChooseColumns(const std::vector<double>& active) const {
    std::vector<uint32_t> types;
    for (uint32_t t = 0; t < active.size(); ++t) {
      if (active[t] > 0) types.push_back(t);
    }
    std::sort(types.begin(), types.end(), [&](uint32_t a, uint32_t b) {
      if (active[a] != active[b]) return active[a] > active[b];
      return table_.type_names[a] < table_.type_names[b];
    });
    if (types.size() > options_.max_fit_types) types.resize(options_.max_fit_types);
    return types;
  }

  // Solves a fit (when it ran) and turns it into a rule table and its report.
  RuleTable MakeRules(size_t m, Fit* fit, const std::vector<double>& active, std::string host, std::string resource) {
    size_t types = table_.type_names.size();
    RuleFit report;
    report.metric = std::string(kMetricOrder[m]);
    report.host = std::move(host);
    report.resource = std::move(resource);
    RuleTable table;
    table.kind.assign(types, DemandKind::kVariable);
    table.amount.assign(types, 1.0);
    std::vector<RuleSource> source(types, RuleSource::kDefault);
    std::vector<double> beta(types, 0.0);
    std::vector<char> collinear(types, 0);

    if (fit != nullptr && fit->usable && fit->eq.rows() > 0 && !fit->type_of_col.empty()) {
      report.rows = fit->eq.rows();
      auto solved = SolveNnls(fit->eq);
      if (!solved.ok()) {
        report.note = solved.status().message();
      } else {
        const NnlsResult& r = *solved;
        report.fitted = true;
        double ss_total = fit->eq.btb() - (fit->sum_l > 0 ? fit->sum_u * fit->sum_u / fit->sum_l : 0.0);
        report.residual_rms = fit->sum_l > 0 ? std::sqrt(r.residual_sq / fit->sum_l) : 0.0;
        report.r_squared =
            ss_total > 0 ? std::max(0.0, 1.0 - r.residual_sq / ss_total) : (r.residual_sq <= 0 ? 1.0 : 0.0);
        if (!r.converged) report.note = "the fit stopped at its iteration limit";
        double fallback = fit->sum_area > 0 ? fit->sum_u / fit->sum_area : 1.0;
        for (uint32_t t = 0; t < types; ++t) table.amount[t] = fallback;
        for (size_t c = 0; c < fit->type_of_col.size(); ++c) {
          uint32_t t = fit->type_of_col[c];
          beta[t] = r.x[c];
          collinear[t] = r.dependent[c] ? 1 : 0;
          source[t] = RuleSource::kFitted;
          table.kind[t] = DemandKind::kVariable;
          table.amount[t] = r.x[c];
          if (options_.infer_exact && m == kMCpu) {
            if (auto k = ExactCores(fit->solo[c], r.x[c])) {
              table.kind[t] = DemandKind::kExact;
              table.amount[t] = *k;
              source[t] = RuleSource::kFittedExact;
            }
          }
        }
      }
    } else if (fit != nullptr && !fit->note.empty()) {
      report.note = fit->note;
    } else if (!IsFittedMetric(m)) {
      report.note = "memory is split evenly over the running phases, not fitted";
    } else if (!options_.fit_rules) {
      report.note = "fitting is off";
    } else {
      report.note = "not enough samples to fit";
    }
    for (uint32_t t = 0; t < types; ++t) {
      if (const ExplicitRule* r = ExplicitFor(m, t)) {
        table.kind[t] = r->rule.kind;
        table.amount[t] = r->rule.amount;
        source[t] = RuleSource::kExplicit;
      }
    }
    std::vector<double> requested = table.amount;  // the report shows them before rounding
    table.Finish();
    // The report lists the types that ran in this group, the most active first.
    std::vector<uint32_t> listed;
    for (uint32_t t = 0; t < types; ++t) {
      if (active[t] > 0) listed.push_back(t);
    }
    std::sort(listed.begin(), listed.end(), [&](uint32_t a, uint32_t b) {
      if (active[a] != active[b]) return active[a] > active[b];
      return table_.type_names[a] < table_.type_names[b];
    });
    for (uint32_t t : listed) {
      report.types.push_back({.type = std::string(table_.type_names[t]),
                              .rule = {table.kind[t], table.kind[t] == DemandKind::kNone ? 0.0 : requested[t]},
                              .source = source[t],
                              .beta = beta[t],
                              .active_s = active[t],
                              .collinear = collinear[t] != 0});
    }
    out_.fits.push_back(std::move(report));
    return table;
  }

  // A whole number of cores k when the type's solo periods used a steady k cores per running
  // instance (mean within 10% of k, coefficient of variation <= 15%, at least 3 periods) and
  // the fit agrees (beta within 20% of k).
  static std::optional<double> ExactCores(const SoloStats& s, double beta) {
    if (s.rows < 3 || s.w <= 0) return std::nullopt;
    double mean = s.wr / s.w;
    double var = std::max(0.0, s.wr2 / s.w - mean * mean);
    double k = std::round(mean);
    if (k < 1 || std::fabs(mean - k) > 0.1 * k) return std::nullopt;
    if (std::sqrt(var) > 0.15 * mean) return std::nullopt;
    if (std::fabs(beta - k) > 0.2 * k) return std::nullopt;
    return k;
  }

  // ---- the split itself ----

  MetricAccum& Accum(size_t m) {
    MetricAccum& a = accum_[m];
    if (!a.has_data) {
      a.has_data = true;
      a.self.assign(table_.n, 0.0);
      a.slices.assign(tracked_.size() * grid_.slices, 0.0);
    }
    return a;
  }

  // Splits one source over the phases of `ev` by `job.rules`: Grade10's upsampling within each
  // sample period, then its shares per moment, accumulated through running integrals so that
  // each phase costs O(1) per start and end however many phases run at once.
  void Split(std::span<const Event> ev, const SplitJob& job) {
    const Source& src = *job.source;
    const RuleTable& rules = *job.rules;
    MetricAccum& acc = *job.acc;
    double cap = src.capacity;
    bool has_cap = !std::isnan(cap);
    if (has_cap) {
      acc.any_capacity = true;
      if (acc.could.empty()) acc.could.assign(table_.n, 0.0);
    } else {
      acc.all_capacity = false;
    }
    size_t slices = grid_.slices;
    const RuleTable::Packed* packed = rules.packed.data();
    double* self = acc.self.data();
    double* could = has_cap ? acc.could.data() : nullptr;
    const uint32_t* target = target_.data();
    // The running sums by rule kind ([0] exact, [1] variable; [2] takes the types without a
    // demand, never read): fixed-point demand, and the integrals of each kind's share per
    // unit of demand (g) and of its capacity (c).
    int64_t fx[3] = {0, 0, 0};
    double g[3] = {0, 0, 0}, c[3] = {0, 0, 0};
    SliceCursor event_slices(grid_), period_slices(grid_);

    // The phases of a host's events interleave every process running at the time: their
    // entries are fetched a few events ahead.
    const Event* ev_end = ev.data() + ev.size();
    auto apply = [&](const Event& x) {
      if (&x + kPrefetchEvents < ev_end) {
        uint32_t ahead = (&x)[kPrefetchEvents].phase;
        __builtin_prefetch(self + ahead, 1);
        if (could != nullptr) __builtin_prefetch(could + ahead, 1);
        __builtin_prefetch(target + ahead, 0);
      }
      const RuleTable::Packed& r = packed[x.type()];
      if (r.sum == 2) return;
      bool end = x.is_end();
      double sign = end ? r.amount : -r.amount;
      double share = sign * g[r.sum];
      self[x.phase] += share;
      if (could != nullptr) could[x.phase] += sign * c[r.sum];
      uint32_t q = target[x.phase];
      if (q != kNone) acc.slices[q * slices + (end ? event_slices.EndAt(x.t) : event_slices.At(x.t))] += share;
      fx[r.sum] += end ? -r.fixed : r.fixed;
    };
    auto sink = [&](double amount, size_t slice) {
      if (amount == 0) return;
      if (job.sink != kNone) {
        acc.self[job.sink] += amount;
        uint32_t q = target_[job.sink];
        if (q != kNone) acc.slices[q * slices + slice] += amount;
      } else {
        acc.unattributed += amount;
        if (job.resource != nullptr) {
          job.resource->unattributed += amount;
          job.resource->unattributed_slices[slice] += amount;
        }
      }
    };
    auto measured = [&](double amount, size_t slice) {
      acc.measured += amount;
      if (job.resource != nullptr) {
        job.resource->measured += amount;
        job.resource->measured_slices[slice] += amount;
      }
    };

    // Shares of [t0, t1) at rate (or level) u, by the demands running now.
    auto segment = [&](TimeNs t0, TimeNs t1, double u) {
      double l = DurationSeconds(t1 - t0);
      double ex = static_cast<double>(fx[0]) * rules.to_double;
      double va = static_cast<double>(fx[1]) * rules.to_double;
      double gex = 0, taken = 0;
      if (ex > 0) {
        gex = std::min(1.0, u / ex);
        taken = std::min(u, ex);
      }
      double rest = std::max(0.0, u - taken);
      double gvar = 0, left = rest;
      if (va > 0) {
        gvar = rest / va;
        left = 0;
      }
      g[0] += gex * l;
      g[1] += gvar * l;
      if (has_cap) {
        if (ex > 0) c[0] += std::min(1.0, cap / ex) * l;
        if (va > 0) c[1] += std::max(0.0, cap - ex) / va * l;
      }
      size_t slice = period_slices.At(t0);
      measured(u * l, slice);
      sink(left * l, slice);
    };

    // Sub-segments of the current period: bounds, exact and variable demand.
    struct Seg {
      TimeNs t0;
      TimeNs t1;
      double e;
      double v;
    };
    std::vector<Seg> segs;
    std::vector<double> weight, capv, given;
    std::vector<size_t> order;
    size_t e = 0;
    src.ForEach([&](TimeNs t0, TimeNs t1, double value) {
      if (t1 <= t0) {  // an amount at one instant: no phase can be told apart
        size_t slice = period_slices.At(t0);
        measured(value, slice);
        sink(value, slice);
        return;
      }
      for (; e < ev.size() && ev[e].t <= t0; ++e) apply(ev[e]);
      if (src.gauge) {
        // A level needs no upsampling: walk the period, cutting at events and slice bounds.
        TimeNs cur = t0, next_b = period_slices.NextAt(t0);
        while (cur < t1) {
          TimeNs nt = std::min({e < ev.size() ? ev[e].t : kForever, next_b, t1});
          segment(cur, nt, value);
          cur = nt;
          if (nt == next_b) next_b = grid_.NextBoundary(nt);
          for (; e < ev.size() && ev[e].t == nt && nt < t1; ++e) apply(ev[e]);
        }
        return;
      }
      if (value == 0 && !has_cap) {
        // Nothing to share and no capacity to count (a byte counter that did not move, most
        // of its periods): every sub-segment would add exactly +0 to the integrals and the
        // totals, so only the events inside the period are applied, at the same integrals.
        for (; e < ev.size() && ev[e].t < t1; ++e) apply(ev[e]);
        return;
      }
      // The sub-segments, by looking ahead at the events inside the period.
      segs.clear();
      int64_t sums[3] = {fx[0], fx[1], 0};
      size_t f = e;
      TimeNs cur = t0, next_b = period_slices.NextAt(t0);
      while (true) {
        TimeNs next_e = f < ev.size() ? ev[f].t : kForever;
        TimeNs nt = std::min({next_e, next_b, t1});
        if (nt > cur) {
          segs.push_back({cur, nt, static_cast<double>(sums[0]) * rules.to_double,
                          static_cast<double>(sums[1]) * rules.to_double});
          cur = nt;
        }
        if (nt >= t1) break;
        for (; f < ev.size() && ev[f].t == nt; ++f) {
          const RuleTable::Packed& r = packed[ev[f].type()];
          sums[r.sum] += ev[f].is_end() ? -r.fixed : r.fixed;
        }
        if (nt == next_b) next_b = grid_.NextBoundary(nt);
      }
      // Grade10's upsampling: the period's amount goes first to exact demand (up to the
      // demand, and the capacity), then to variable demand by weight (up to the capacity),
      // then evenly.
      size_t ns = segs.size();
      given.assign(ns, 0.0);
      weight.assign(ns, 0.0);
      capv.assign(ns, 0.0);
      for (size_t j = 0; j < ns; ++j) {
        double l = DurationSeconds(segs[j].t1 - segs[j].t0);
        if (segs[j].e > 0) {
          weight[j] = segs[j].e * l;
          capv[j] = (has_cap ? std::min(segs[j].e, cap) : segs[j].e) * l;
        }
      }
      double left = value - WaterFill(value, weight, capv, given, order);
      if (left > 0) {
        for (size_t j = 0; j < ns; ++j) {
          double l = DurationSeconds(segs[j].t1 - segs[j].t0);
          weight[j] = segs[j].v > 0 ? segs[j].v * l : 0.0;
          capv[j] = has_cap ? std::max(0.0, cap * l - given[j]) : std::numeric_limits<double>::infinity();
        }
        left -= WaterFill(left, weight, capv, given, order);
      }
      if (left > 0) {
        for (size_t j = 0; j < ns; ++j)
          given[j] += left * static_cast<double>(segs[j].t1 - segs[j].t0) / static_cast<double>(t1 - t0);
      }
      // Walk the sub-segments, applying the events at their starts.
      for (size_t j = 0; j < ns; ++j) {
        for (; e < ev.size() && ev[e].t <= segs[j].t0; ++e) apply(ev[e]);
        segment(segs[j].t0, segs[j].t1, given[j] / DurationSeconds(segs[j].t1 - segs[j].t0));
      }
    });
    for (; e < ev.size(); ++e) apply(ev[e]);
  }

  // ---- processes ----

  // The per-process sources of one process: CPU, storage bytes, memory (PSS).
  std::array<Source, 4> ProcessSources(const ProcessDomain& d) const {
    std::array<Source, 4> s;
    auto of = [&](std::string_view name) { return SamplesOf(run_.FindSeries(d.resource->id, name)); };
    // Counters by the one rule (derived/counter_rate.h): a process's count from 0 at its start
    // (the layer's origin), a reset counts 0.
    auto counter = [&](std::string_view name) { return derived::CounterOf(run_, *d.resource, name); };
    const derived::Counter cpu[] = {counter(metric::kProcCpuUser), counter(metric::kProcCpuSystem),
                                    counter(metric::kProcCpuUnseenChildren)};
    s[0].samples = derived::SumAsCounter(cpu);
    const derived::Counter rb[] = {counter(metric::kProcReadBytes)}, wb[] = {counter(metric::kProcWriteBytes)};
    s[1].samples = derived::SumAsCounter(rb);
    s[2].samples = derived::SumAsCounter(wb);
    // Memory by PSS, so that pages shared by forked processes are held once in the stack;
    // RSS for runs recorded before memory.pss.
    SampleSpan rss = of(metric::kProcPss);
    if (rss.empty()) rss = of(metric::kProcRss);
    s[3].samples.assign(rss.begin(), rss.end());
    s[3].gauge = true;
    s[3].hold_until = table_.end[d.phase];
    uint32_t h = table_.host[d.phase];
    if (h != kNone) {
      if (hosts_[h].core_count > 0) s[0].capacity = static_cast<double>(hosts_[h].core_count);
      s[3].capacity = hosts_[h].memory_capacity;
    }
    return s;
  }

  void AttributeProcesses() {
    if (processes_.empty()) return;
    // Every process's events, once (CSR by process).
    std::vector<uint32_t> off, members;
    GroupBy(table_.owner, processes_.size(), off, members);
    std::vector<size_t> ev_off(processes_.size() + 1, 0);
    std::vector<Event>& events = events_;
    events.clear();
    ReserveEvents(table_.n);
    std::vector<double> active(table_.type_names.size(), 0.0);
    for (size_t d = 0; d < processes_.size(); ++d) {
      std::span<const uint32_t> mine(members.data() + off[d], members.data() + off[d + 1]);
      MakeEvents(
          mine, [&](uint32_t c) { return table_.owner[c] == d; }, events, &active);
      ev_off[d + 1] = events.size();
    }
    auto events_of = [&](size_t d) {
      return std::span<const Event>(events.data() + ev_off[d], events.data() + ev_off[d + 1]);
    };

    // Fit CPU and storage bytes over all processes together (one set of rules per metric).
    std::array<Fit, 3> fits;
    bool fitting = options_.fit_rules;
    if (fitting) {
      std::vector<uint32_t> cols = ChooseColumns(active);
      for (size_t m = 0; m < 3; ++m) {
        fits[m].metric = m;
        fits[m].Init(cols, table_.type_names.size());
      }
      std::vector<TimeNs> bounds;
      auto same_times = [](const Source& a, const Source& b) {
        return std::equal(a.samples.begin(), a.samples.end(), b.samples.begin(), b.samples.end(),
                          [](const Sample& x, const Sample& y) { return x.t == y.t; });
      };
      for (size_t d = 0; d < processes_.size(); ++d) {
        auto sources = ProcessSources(processes_[d]);
        // The fits share their columns, so sources sampled at the same times (a process's
        // CPU and storage counters usually are) have the same rows: one sweep feeds each of
        // them its rows, in the same order as a sweep of its own would.
        std::array<bool, 3> done{};
        for (size_t m = 0; m < 3; ++m) {
          const Source& s = sources[m];
          if (s.samples.size() < 2 || done[m]) continue;
          std::array<bool, 3> member{};
          for (size_t o = m; o < 3; ++o) {
            member[o] = !done[o] && sources[o].samples.size() >= 2 && (o == m || same_times(sources[o], s));
            if (member[o]) done[o] = true;
          }
          bounds.resize(s.samples.size());
          for (size_t k = 0; k < s.samples.size(); ++k) bounds[k] = s.samples[k].t;
          SweepRows(events_of(d), bounds, fits[m].col_of_type, fits[m].type_of_col.size(),
                    [&](size_t k, std::span<const std::pair<size_t, double>> entries, double l) {
                      for (size_t o = m; o < 3; ++o) {
                        if (!member[o]) continue;
                        const auto& v = sources[o].samples;
                        double u = std::max(0.0, v[k + 1].v - v[k].v);
                        fits[o].AddRhs(entries, u, l, true);
                      }
                    });
        }
      }
    }
    std::array<RuleTable, 4> tables;
    for (size_t m = 0; m < 4; ++m) {
      tables[m] = MakeRules(m, fitting && m < 3 ? &fits[m] : nullptr, active, "", "");
    }

    for (size_t d = 0; d < processes_.size(); ++d) {
      const ProcessDomain& pd = processes_[d];
      auto sources = ProcessSources(pd);
      uint32_t h = table_.host[pd.phase];
      for (size_t m = 0; m < 4; ++m) {
        if (sources[m].empty()) continue;
        Split(events_of(d), {.source = &sources[m], .rules = &tables[m], .acc = &Accum(m), .sink = pd.phase});
        if (h == kNone || m == 3) continue;
        HostDomain& host = hosts_[h];
        bool active_cmp = m == 0 ? host.has_cpu_cmp : m == 1 ? host.has_read_cmp : host.has_write_cmp;
        if (!active_cmp) continue;
        Comparison& cmp = m == 0 ? host.cpu_cmp : m == 1 ? host.read_cmp : host.write_cmp;
        sources[m].ForEach([&](TimeNs t0, TimeNs t1, double amount) { cmp.AddProcess(t0, t1, amount); });
      }
    }
  }

  // ---- hosts ----

  // One host source to split: which per-phase metric, its resource label.
  struct HostSource {
    size_t metric;
    std::string resource;
    std::string series;
    Source source;
  };

  void AttributeHost(size_t h) {
    HostDomain& host = hosts_[h];
    std::vector<HostSource> sources;
    if (!host.cpu_cmp.any_process_data) {
      Source busy = HostCpuSource(host);
      if (!busy.empty()) sources.push_back({kMCpu, "cpu", "cpu.busy", std::move(busy)});
    }
    if (!host.read_cmp.any_process_data) {
      Source s = HostDiskBytesSource(host, metric::kDiskReadBytes);
      if (!s.empty()) sources.push_back({kMRead, "disks", std::string(metric::kDiskReadBytes), std::move(s)});
    }
    if (!host.write_cmp.any_process_data) {
      Source s = HostDiskBytesSource(host, metric::kDiskWriteBytes);
      if (!s.empty()) sources.push_back({kMWrite, "disks", std::string(metric::kDiskWriteBytes), std::move(s)});
    }
    TimeNs run_end = run_.EffectiveEnd();
    auto add = [&](size_t m, const model::Resource* r, std::string_view name, bool gauge) {
      const model::Series* series = run_.FindSeries(r->id, name);
      if (series == nullptr || series->samples.empty()) return;
      Source s;
      s.samples = series->samples;
      s.gauge = gauge;
      s.hold_until = run_end;
      s.capacity = series->info.capacity;
      sources.push_back({m, r->name, std::string(name), std::move(s)});
    };
    for (const model::Resource* d : CountedDisks(host)) add(kMDiskBusy, d, metric::kDiskBusy, false);
    for (const model::Resource* n : host.nets) {
      if (!host.devices.Counts(*n)) continue;  // loopback never leaves the host (host_devices.h)
      add(kMNetRx, n, metric::kNetRxBytes, false);
      add(kMNetTx, n, metric::kNetTxBytes, false);
    }
    for (const model::Resource* g : host.gpus) {
      add(kMGpuUtil, g, metric::kGpuUtilization, true);
      add(kMGpuMem, g, metric::kGpuMemoryUsed, true);
    }
    if (sources.empty()) return;

    // The host's phases, each running while none of its children on this host runs.
    std::vector<uint32_t> mine;
    for (uint32_t i = 0; i < table_.n; ++i) {
      if (table_.host[i] == h) mine.push_back(i);
    }
    std::vector<Event>& events = events_;
    events.clear();
    ReserveEvents(mine.size());
    std::vector<double> active(table_.type_names.size(), 0.0);
    MakeEvents(
        mine, [&](uint32_t c) { return table_.host[c] == h; }, events, &active);

    // One fit for all of the host's fitted sources, on the union of their sample times within
    // the span they all cover: the left-hand side is shared.
    std::vector<Fit> fits(sources.size());
    std::vector<char> in_fit(sources.size(), 0);
    if (options_.fit_rules) {
      TimeNs lo = std::numeric_limits<TimeNs>::min(), hi = kForever;
      for (size_t i = 0; i < sources.size(); ++i) {
        const Source& s = sources[i].source;
        if (!IsFittedMetric(sources[i].metric)) continue;
        if (s.samples.size() < 2) {
          fits[i].usable = false;
          fits[i].note = "fewer than two samples";
          continue;
        }
        in_fit[i] = 1;
        lo = std::max(lo, s.samples.front().t);
        hi = std::min(hi, s.gauge ? std::max(s.samples.back().t, s.hold_until) : s.samples.back().t);
      }
      std::vector<TimeNs> bounds;
      if (lo < hi) {
        for (size_t i = 0; i < sources.size(); ++i) {
          if (!in_fit[i]) continue;
          for (const Sample& x : sources[i].source.samples) {
            if (x.t > lo && x.t < hi) bounds.push_back(x.t);
          }
        }
        bounds.push_back(lo);
        bounds.push_back(hi);
        std::sort(bounds.begin(), bounds.end());
        bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
      }
      std::vector<uint32_t> cols = ChooseColumns(active);
      // Each source's amount per row.
      std::vector<std::vector<double>> amounts(sources.size());
      size_t lead = sources.size();
      for (size_t i = 0; i < sources.size(); ++i) {
        if (!in_fit[i]) continue;
        if (bounds.size() < 2) {
          in_fit[i] = 0;
          fits[i].usable = false;
          fits[i].note = "the host's series do not overlap in time";
          continue;
        }
        if (lead == sources.size()) lead = i;
        fits[i].metric = sources[i].metric;
        fits[i].Init(cols, table_.type_names.size());
        const Source& s = sources[i].source;
        std::vector<double>& a = amounts[i];
        a.assign(bounds.size() - 1, 0.0);
        if (s.gauge) {
          size_t k = 0;
          for (size_t r = 0; r + 1 < bounds.size(); ++r) {
            while (k + 1 < s.samples.size() && s.samples[k + 1].t <= bounds[r]) ++k;
            a[r] = s.samples[k].v * DurationSeconds(bounds[r + 1] - bounds[r]);
          }
        } else {
          // Each row's increase by the one rule (derived/counter_rate.h: a reset counts 0).
          a = derived::IncreasesOver(derived::Counter{s.samples, std::nullopt}, bounds);
        }
      }
      if (lead < sources.size()) {
        SweepRows(events, bounds, fits[lead].col_of_type, cols.size(),
                  [&](size_t k, std::span<const std::pair<size_t, double>> entries, double l) {
                    fits[lead].AddRhs(entries, amounts[lead][k], l, true);
                    for (size_t i = lead + 1; i < sources.size(); ++i) {
                      if (in_fit[i]) fits[i].AddRhs(entries, amounts[i][k], l, false);
                    }
                  });
        for (size_t i = lead + 1; i < sources.size(); ++i) {
          if (!in_fit[i]) continue;
          // Share the left-hand side accumulated once.
          NormalEquations eq = fits[lead].eq.WithRhs(fits[i].eq.atb(), fits[i].eq.btb());
          fits[i].eq = std::move(eq);
          fits[i].active_s = fits[lead].active_s;
        }
      }
    }

    for (size_t i = 0; i < sources.size(); ++i) {
      HostSource& hs = sources[i];
      bool fitted = options_.fit_rules && IsFittedMetric(hs.metric);
      RuleTable rules = MakeRules(hs.metric, fitted ? &fits[i] : nullptr, active, host.name, hs.resource);
      ResourceAttribution res;
      res.host = host.name;
      res.resource = hs.resource;
      res.metric = hs.series;
      res.attributed_as = std::string(kMetricOrder[hs.metric]);
      res.capacity = hs.source.capacity;
      res.measured_slices.assign(grid_.slices, 0.0);
      res.unattributed_slices.assign(grid_.slices, 0.0);
      Split(events, {.source = &hs.source, .rules = &rules, .acc = &Accum(hs.metric), .sink = kNone, .resource = &res});
      res.attributed = res.measured - res.unattributed;
      out_.resources.push_back(std::move(res));
    }
  }

  // ---- results ----

  void FinishComparison(Comparison& cmp) {
    ResourceAttribution& r = out_.resources[cmp.resource_index];
    r.measured_slices.assign(grid_.slices, 0.0);
    r.unattributed_slices.assign(grid_.slices, 0.0);
    const auto& h = cmp.host.samples;
    for (size_t k = 0; k + 1 < h.size(); ++k) {
      double amount = std::max(0.0, h[k + 1].v - h[k].v);
      double other = std::max(0.0, amount - cmp.process_amount[k]);
      r.measured += amount;
      r.unattributed += other;
      grid_.Spread(h[k].t, h[k + 1].t, amount, r.measured_slices);
      grid_.Spread(h[k].t, h[k + 1].t, other, r.unattributed_slices);
    }
    r.attributed = cmp.process_total;
  }

  void Finish() {
    for (HostDomain& h : hosts_) {
      if (h.has_cpu_cmp) FinishComparison(h.cpu_cmp);
      if (h.has_read_cmp) FinishComparison(h.read_cmp);
      if (h.has_write_cmp) FinishComparison(h.write_cmp);
    }
    size_t slices = grid_.slices;
    for (size_t m = 0; m < kMetricCount; ++m) {
      MetricAccum& a = accum_[m];
      if (!a.has_data) continue;
      MetricAttribution out;
      out.name = std::string(kMetricOrder[m]);
      out.unit = std::string(UnitOf(m));
      out.gauge = IsGaugeMetric(m);
      out.measured = a.measured;
      out.unattributed = a.unattributed;
      out.capacity_complete = a.any_capacity && a.all_capacity;
      // Inclusive sums, children before parents.
      out.usage = std::move(a.self);
      if (a.any_capacity) out.could_have_used = std::move(a.could);
      for (auto it = table_.preorder.rbegin(); it != table_.preorder.rend(); ++it) {
        uint32_t p = table_.parent[*it];
        if (p == kNone) continue;
        out.usage[p] += out.usage[*it];
        if (!out.could_have_used.empty()) out.could_have_used[p] += out.could_have_used[*it];
      }
      // Series: tracked phases' own parts, then children into parents (breadth-first order
      // reversed: children first).
      for (size_t k = tracked_.size(); k-- > 0;) {
        uint32_t p = table_.parent[tracked_[k]];
        if (p == kNone) continue;
        uint32_t q = tracked_index_[p];
        for (size_t s = 0; s < slices; ++s) a.slices[q * slices + s] += a.slices[k * slices + s];
      }
      for (size_t k = 0; k < tracked_.size(); ++k) {
        uint32_t v = tracked_[k];
        const double* row = a.slices.data() + k * slices;
        size_t lo = grid_.SliceOf(table_.start[v]);
        size_t hi = table_.end[v] > table_.start[v] ? grid_.SliceOfEnd(table_.end[v]) : lo;
        for (size_t s = 0; s < slices; ++s) {
          if (row[s] != 0) {
            lo = std::min(lo, s);
            hi = std::max(hi, s);
          }
        }
        PhaseSeries series;
        series.phase = run_.phases[v].id;
        series.first_slice = lo;
        series.usage.assign(row + lo, row + hi + 1);
        out.series.push_back(std::move(series));
      }
      a.slices.clear();
      a.slices.shrink_to_fit();
      out_.metrics.push_back(std::move(out));
    }
  }

  const model::Run& run_;
  const AttributionOptions& options_;
  std::vector<ExplicitRule> rules_;
  PhaseTable table_;
  Grid grid_;
  std::vector<uint32_t> tracked_;        // tracked phases, breadth-first
  std::vector<uint32_t> tracked_index_;  // per phase: its index in tracked_, or kNone
  std::vector<uint32_t> target_;  // per phase: the tracked phase its usage counts in (nearest tracked ancestor-or-self)
  std::unordered_map<std::string, uint32_t> host_ids_;
  std::vector<HostDomain> hosts_;
  std::vector<ProcessDomain> processes_;
  std::array<MetricAccum, kMetricCount> accum_;
  std::vector<Event> events_;  // reused by every domain: one allocation
  std::vector<Event> sort_buffer_;
  Attribution out_;
};

}  // namespace

Attribution AttributeResources(const model::Run& run, const AttributionOptions& options) {
  return Attributor(run, options).Compute();
}

}  // namespace grademl::analysis
