#include "analysis/outside_load.h"

#include <algorithm>
#include <cmath>
#include <span>

#include <fmt/format.h>

#include "analysis/derived/counter_rate.h"
#include "analysis/series_math.h"
#include "core/text.h"
#include "model/metric_names.h"

namespace grademl::analysis {

namespace metric = model::metric;

namespace {

std::string HostName(const model::Resource& r) { return r.host.empty() ? r.name : r.host; }

// The outside_process resources under a host resource, the most CPU first.
std::vector<OutsideProcess> TopOf(const model::Run& run, model::ResourceId host) {
  std::vector<OutsideProcess> out;
  for (const model::Resource& r : run.resources) {
    if (r.kind != model::ResourceKind::kOutsideProcess || r.parent != host) continue;
    SampleSpan cpu = SamplesOf(run.FindSeries(r.id, metric::kOtherCpu));
    SampleSpan rss = SamplesOf(run.FindSeries(r.id, metric::kOtherRss));
    OutsideProcess p{.pid = r.pid, .cpu_seconds = derived::Increase({cpu, std::nullopt}),
                     .peak_rss_bytes = GaugeMax(rss)};
    model::SplitOutsideProcessName(r.name, &p.user, &p.command);
    if (!cpu.empty()) {
      p.first_t = cpu.front().t;
      p.last_t = cpu.back().t;
    }
    out.push_back(std::move(p));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const OutsideProcess& a, const OutsideProcess& b) { return a.cpu_seconds > b.cpu_seconds; });
  return out;
}

}  // namespace

std::string DescribeOutsideProcess(const OutsideProcess& p) {
  std::string command = EscapeControl(p.command);
  if (command.size() > 60) command = command.substr(0, 57) + "...";
  if (p.user.empty()) return fmt::format("{} (pid {}, {:.2f} CPU-s)", command, p.pid, p.cpu_seconds);
  return fmt::format("{} (user {}, pid {}, {:.2f} CPU-s)", command, EscapeControl(p.user), p.pid, p.cpu_seconds);
}

std::vector<OutsideLoad> MeasureOutsideLoad(const model::Run& run) {
  std::vector<OutsideLoad> out;
  for (const model::Resource& r : run.resources) {
    if (r.kind != model::ResourceKind::kHost) continue;
    const model::Series* cpu = run.FindSeries(r.id, metric::kOtherCpu);
    if (cpu == nullptr || cpu->samples.empty()) continue;
    OutsideLoad load;
    load.host_resource = r.id;
    load.host = HostName(r);
    // By the one rule (derived/counter_rate.h): a reset counts 0; the mean over the sampled span.
    const derived::Counter counter{cpu->samples, std::nullopt};
    load.cpu_seconds = derived::Increase(counter);
    load.peak_rss_bytes = GaugeMax(SamplesOf(run.FindSeries(r.id, metric::kOtherRss)));
    if (double cores = derived::MeanRate(counter); !std::isnan(cores)) load.avg_cores = cores;
    load.top = TopOf(run, r.id);
    out.push_back(std::move(load));
  }
  return out;
}

NoiseVerdict JudgeNoise(const std::vector<OutsideLoad>& load, const NoiseOptions& options) {
  NoiseVerdict verdict;
  const OutsideLoad* worst = nullptr;
  for (const OutsideLoad& l : load) {
    if (l.cpu_seconds < options.min_cpu_seconds || l.avg_cores < options.min_avg_cores) continue;
    if (worst == nullptr || l.avg_cores > worst->avg_cores) worst = &l;
  }
  if (worst == nullptr) return verdict;
  verdict.noisy = true;
  verdict.reason = fmt::format("processes outside the run used {:.2f} CPU-s on {} ({:.2f} cores on average)",
                               worst->cpu_seconds, EscapeControl(worst->host), worst->avg_cores);
  if (!worst->top.empty()) verdict.reason += "; most: " + DescribeOutsideProcess(worst->top.front());
  return verdict;
}

std::string OutsideContentionClause(const model::Run& run, const std::string& host, TimeNs a, TimeNs b,
                                    const NoiseOptions& options) {
  if (b <= a) return "";
  for (const model::Resource& r : run.resources) {
    if (r.kind != model::ResourceKind::kHost || HostName(r) != host) continue;
    SampleSpan cpu = SamplesOf(run.FindSeries(r.id, metric::kOtherCpu));
    if (cpu.empty()) return "";
    // By the one rule (derived/counter_rate.h): the mean over the sampled part of the window.
    derived::Counter counter{cpu, std::nullopt};
    TimeNs window[2] = {a, b};
    double cores = derived::RatesOver(std::span<const derived::Counter>(&counter, 1), window)[0];
    if (std::isnan(cores) || cores < options.min_avg_cores) return "";
    double used = derived::IncreaseOver(counter, a, b);
    // The top processes by what they used inside the window (their counters are linear
    // between their first and last use).
    std::vector<std::pair<double, OutsideProcess>> inside;
    for (OutsideProcess& p : TopOf(run, r.id)) {
      SampleSpan s = SamplesOf(run.FindSeries(
          [&] {
            for (const model::Resource& o : run.resources)
              if (o.kind == model::ResourceKind::kOutsideProcess && o.parent == r.id && o.pid == p.pid &&
                  o.name == model::OutsideProcessName(p.user, p.command))
                return o.id;
            return model::ResourceId{0};
          }(),
          metric::kOtherCpu));
      double in = derived::IncreaseOver(derived::Counter{s, std::nullopt}, a, b);
      if (in >= 0.1 * used && in > 0) inside.emplace_back(in, std::move(p));
    }
    std::stable_sort(inside.begin(), inside.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    std::string clause = fmt::format("processes outside the run used {:.2f} cores meanwhile", cores);
    for (size_t i = 0; i < inside.size() && i < 2; ++i) {
      clause += (i == 0 ? ", most: " : "; ") + DescribeOutsideProcess(inside[i].second);
    }
    return clause;
  }
  return "";
}

}  // namespace grademl::analysis
