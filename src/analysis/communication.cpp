#include "analysis/communication.h"
#include "analysis/phase_tags.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>

namespace grademl::analysis {
namespace {

using TimeSpan = std::pair<TimeNs, TimeNs>;
using TimeSpans = std::vector<TimeSpan>;

// Sorted, disjoint, non-empty intervals covering the same time as `v`.
TimeSpans Union(TimeSpans v) {
  std::sort(v.begin(), v.end());
  TimeSpans out;
  for (const TimeSpan& i : v) {
    if (i.second <= i.first) continue;
    if (!out.empty() && i.first <= out.back().second) {
      out.back().second = std::max(out.back().second, i.second);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

TimeNs Length(const TimeSpans& u) {
  TimeNs total = 0;
  for (const TimeSpan& i : u) total += i.second - i.first;
  return total;
}

// Both unions.
TimeSpans Intersect(const TimeSpans& a, const TimeSpans& b) {
  TimeSpans out;
  for (size_t i = 0, j = 0; i < a.size() && j < b.size();) {
    TimeNs lo = std::max(a[i].first, b[j].first), hi = std::min(a[i].second, b[j].second);
    if (lo < hi) out.push_back({lo, hi});
    (a[i].second < b[j].second) ? ++i : ++j;
  }
  return out;
}

// a minus b (both unions).
TimeSpans Subtract(const TimeSpans& a, const TimeSpans& b) {
  TimeSpans out;
  size_t j = 0;
  for (TimeSpan i : a) {
    while (j < b.size() && b[j].second <= i.first) ++j;
    for (size_t k = j; k < b.size() && b[k].first < i.second; ++k) {
      if (b[k].first > i.first) out.push_back({i.first, b[k].first});
      i.first = std::max(i.first, b[k].second);
      if (i.first >= i.second) break;
    }
    if (i.first < i.second) out.push_back(i);
  }
  return out;
}

bool ParseInt(std::string_view s, int64_t* out) {
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && ptr == s.data() + s.size();
}

bool IsCompute(std::string_view leaf) {
  return leaf == "forward" || leaf == "backward" || leaf == "optimizer_step" || leaf == "loss" || leaf == "module" ||
         leaf == "op";
}

// One collective phase of a rank, on the run's clock.
struct Collective {
  const model::Phase* phase = nullptr;
  size_t rank = 0;  // index into the ranks
  TimeNs start = 0, end = 0;
  bool cut = false;  // still pending when its rank stopped: never ended, or ended by the process's end
};

struct RankWork {
  TimeSpans comm, compute_raw;
  std::unordered_map<model::PhaseId, TimeSpans> holes;  // compute phase -> sync collectives in it
  std::vector<std::pair<model::PhaseId, TimeSpan>> compute_phases;
  std::vector<std::pair<model::PhaseId, TimeSpan>> backwards;  // backward phases
  TimeSpans buckets;                                          // DDP's bucket all-reduces
  TimeSpans waits;
  std::map<size_t, TimeSpans> caused_by;  // last arriver (rank index) -> the waits it caused here
  std::set<size_t> never_joined;          // collectives it never entered, pending on others at the stop (first entrant)
};

class CommunicationAnalyzer {
 public:
  CommunicationAnalyzer(const model::Run& run, const CommunicationOptions& options)
      : run_(run), options_(options), run_end_(run.EffectiveEnd()) {}

  CommunicationAnalysis Run(const GpuAnalysis* gpu) {
    FindRanks();
    Assign();
    Match();
    Summarize();
    if (gpu != nullptr) AddTraceRanks(*gpu);
    ChooseHeadline();
    return std::move(out_);
  }

 private:
  const model::Run& run_;
  const CommunicationOptions& options_;
  const TimeNs run_end_;
  CommunicationAnalysis out_;
  std::unordered_map<model::PhaseId, size_t> rank_of_process_;  // process phase -> rank index
  std::vector<RankWork> work_;
  std::vector<Collective> collectives_;
  std::unordered_map<model::PhaseId, model::PhaseId> owner_;  // phase -> nearest process ancestor (0: none)
  std::map<std::string, size_t> kind_index_;

  TimeNs EndOf(const model::Phase& p) const { return std::max(p.start_ns, p.end_ns != 0 ? p.end_ns : run_end_); }

  TimeNs OffsetOf(const std::string& host) const {
    const model::Host* h = run_.FindHost(host);
    return h != nullptr ? h->clock_offset_ns : 0;
  }

  // The nearest ancestor of `id` (itself excluded) whose leaf type is `leaf`, or 0.
  model::PhaseId AncestorOfType(model::PhaseId id, std::string_view leaf) const {
    const model::Phase* p = run_.FindPhase(id);
    for (int guard = 0; p != nullptr && guard < 100000; ++guard) {
      p = run_.FindPhase(p->parent);
      if (p != nullptr && p->leaf_type() == leaf) return p->id;
    }
    return 0;
  }

  // The nearest process ancestor of a phase (memoised along the way).
  model::PhaseId OwnerOf(const model::Phase& phase) {
    std::vector<model::PhaseId> path;
    model::PhaseId owner = 0;
    const model::Phase* p = run_.FindPhase(phase.parent);
    for (int guard = 0; p != nullptr && guard < 100000; ++guard) {
      auto it = owner_.find(p->id);
      if (it != owner_.end()) {
        owner = it->second;
        break;
      }
      if (p->leaf_is(model::kPhaseTypeProcess)) {
        owner = p->id;
        break;
      }
      path.push_back(p->id);
      p = run_.FindPhase(p->parent);
    }
    for (model::PhaseId id : path) owner_[id] = owner;
    return owner;
  }

  // Rank processes, grouped into jobs by their `job` tag and workflow step; a rank seen twice
  // in one group starts another instance of the job.
  void FindRanks() {
    struct Instance {
      size_t job;
      std::set<int64_t> ranks;
    };
    std::map<std::pair<std::string, model::PhaseId>, std::vector<Instance>> groups;
    std::vector<const model::Phase*> processes;
    for (const model::Phase& p : run_.phases) {
      int64_t rank = 0;
      if (p.leaf_is(model::kPhaseTypeProcess) && ParseInt(TagOf(p, "rank"), &rank)) processes.push_back(&p);
    }
    std::stable_sort(processes.begin(), processes.end(),
                     [](const model::Phase* a, const model::Phase* b) { return a->start_ns < b->start_ns; });
    for (const model::Phase* p : processes) {
      int64_t rank = 0, world = 0;
      ParseInt(TagOf(*p, "rank"), &rank);
      std::string job_id(TagOf(*p, "job"));
      auto& instances = groups[{job_id, AncestorOfType(p->id, "step")}];
      Instance* in = nullptr;
      for (Instance& i : instances) {
        if (!i.ranks.count(rank)) {
          in = &i;
          break;
        }
      }
      if (in == nullptr) {
        instances.push_back({out_.jobs.size(), {}});
        in = &instances.back();
        out_.jobs.push_back({.id = job_id});
      }
      in->ranks.insert(rank);
      CommunicationJob& job = out_.jobs[in->job];
      ++job.ranks;
      if (ParseInt(TagOf(*p, "world_size"), &world)) job.world_size = std::max(job.world_size, world);
      RankCommunication rc{.rank = rank, .job = in->job, .host = p->host, .pid = p->pid, .process = p->id,
                           .source = "events"};
      rank_of_process_[p->id] = out_.ranks.size();
      out_.ranks.push_back(std::move(rc));
    }
    for (CommunicationJob& job : out_.jobs) job.world_size = std::max(job.world_size, job.ranks);
    work_.resize(out_.ranks.size());
  }

  // Collectives and computation phases to their rank.
  void Assign() {
    if (out_.ranks.empty()) return;
    for (const model::Phase& p : run_.phases) {
      std::string_view leaf = p.leaf_type();
      bool collective = leaf == "collective";
      if (!collective && !IsCompute(leaf)) continue;
      auto it = rank_of_process_.find(OwnerOf(p));
      if (it == rank_of_process_.end()) continue;
      size_t r = it->second;
      TimeNs off = OffsetOf(p.host);
      TimeNs start = p.start_ns + off, end = EndOf(p) + off;
      RankWork& w = work_[r];
      if (!collective) {
        w.compute_phases.push_back({p.id, {start, end}});
        if (leaf == "backward") w.backwards.push_back({p.id, {start, end}});
        continue;
      }
      // Pending when the rank stopped: an open phase, or one its process's end closed (the
      // event collector ends what is still open at the process's end).
      const model::Phase* process = run_.FindPhase(out_.ranks[r].process);
      bool cut = !p.ended() || (process != nullptr && process->ended() && p.end_ns >= process->end_ns);
      collectives_.push_back({.phase = &p, .rank = r, .start = start, .end = end, .cut = cut});
      w.comm.push_back({start, end});
      // A thread blocked in a synchronous collective does not compute: a hole in every
      // computation phase around it.
      if (TagOf(p, "async") == "0") {
        const model::Phase* a = run_.FindPhase(p.parent);
        for (int guard = 0; a != nullptr && a->id != out_.ranks[r].process && guard < 100000; ++guard) {
          if (IsCompute(a->leaf_type())) w.holes[a->id].push_back({start, end});
          a = run_.FindPhase(a->parent);
        }
      }
      RankCommunication& rc = out_.ranks[r];
      ++rc.collectives;
      int64_t bytes = 0;
      ParseInt(TagOf(p, "bytes"), &bytes);
      rc.bytes += bytes;
      bool bucket = !TagOf(p, "ddp_bucket").empty();
      rc.ddp_buckets += bucket;
      if (bucket) w.buckets.push_back({start, end});
      CollectiveKind& k = Kind(p.name);
      ++k.count;
      k.ddp_buckets += bucket;
      k.bytes += bytes;
      k.total_s += NsToSeconds(end - start);
    }
  }

  CollectiveKind& Kind(const std::string& name) {
    auto [it, inserted] = kind_index_.try_emplace(name, out_.kinds.size());
    if (inserted) out_.kinds.push_back({.name = name});
    return out_.kinds[it->second];
  }

  // The k-th collective of a group (or message of a channel) on each rank is one operation.
  void Match() {
    using Key = std::tuple<size_t, std::string_view, std::string_view, int64_t>;  // job, group, channel, seq
    std::map<Key, std::vector<size_t>> matches;
    for (size_t i = 0; i < collectives_.size(); ++i) {
      const model::Phase& p = *collectives_[i].phase;
      int64_t seq = 0;
      if (!ParseInt(TagOf(p, "seq"), &seq) || seq <= 0) continue;
      size_t job = out_.ranks[collectives_[i].rank].job;
      matches[{job, TagOf(p, "process_group"), TagOf(p, "channel"), seq}].push_back(i);
    }
    for (auto& [key, members] : matches) {
      // One per rank (the first, should a rank repeat a sequence number).
      std::vector<size_t> one;
      std::set<size_t> seen;
      for (size_t i : members) {
        if (seen.insert(collectives_[i].rank).second) one.push_back(i);
      }
      if (NeverJoined(std::get<0>(key), std::get<1>(key), std::get<2>(key), one, seen)) continue;
      if (one.size() < 2) continue;
      ++out_.jobs[std::get<0>(key)].matched;
      size_t last = one.front();
      for (size_t i : one) {
        const Collective& c = collectives_[i];
        const Collective& l = collectives_[last];
        if (c.start > l.start || (c.start == l.start && c.rank < l.rank)) last = i;
      }
      const TimeNs arrival = collectives_[last].start;
      if (std::get<2>(key).empty()) CheckCausality(std::get<0>(key), one, collectives_[last]);
      for (size_t i : one) {
        const Collective& c = collectives_[i];
        TimeNs until = std::min(arrival, c.end);
        if (until <= c.start) continue;
        RankWork& w = work_[c.rank];
        w.waits.push_back({c.start, until});
        w.caused_by[collectives_[last].rank].push_back({c.start, until});
        Kind(c.phase->name).wait_s += NsToSeconds(until - c.start);
      }
    }
  }

  // The ranks of a job that take part in a collective of `group` (or in a message of
  // `channel`), as rank indexes; false when it is not known which (a group of unknown ranks,
  // a receive from any source).
  bool Participants(size_t job, std::string_view group, std::string_view channel, std::set<size_t>* out) const {
    std::set<int64_t> ranks;
    bool all = false;
    if (!channel.empty()) {
      size_t gt = channel.find('>');
      int64_t src = 0, dst = 0;
      if (gt == std::string_view::npos || !ParseInt(channel.substr(0, gt), &src) ||
          !ParseInt(channel.substr(gt + 1), &dst)) {
        return false;
      }
      ranks = {src, dst};
    } else if (group == "world") {
      all = true;
    } else {
      for (size_t at = 0; at <= group.size();) {
        size_t comma = std::min(group.find(',', at), group.size());
        int64_t rank = 0;
        if (!ParseInt(group.substr(at, comma - at), &rank)) return false;
        ranks.insert(rank);
        at = comma + 1;
      }
    }
    for (size_t r = 0; r < out_.ranks.size(); ++r) {
      if (out_.ranks[r].job == job && (all || ranks.count(out_.ranks[r].rank))) out->insert(r);
    }
    return true;
  }

  // A collective every rank that entered it was still in when it stopped, which a rank of it
  // never entered: each entrant waited from its arrival until it stopped, for the ranks that
  // never came. True when it was one (and is accounted for).
  bool NeverJoined(size_t job, std::string_view group, std::string_view channel, const std::vector<size_t>& one,
                   const std::set<size_t>& entered) {
    for (size_t i : one) {
      if (!collectives_[i].cut) return false;
    }
    std::set<size_t> participants;
    if (!Participants(job, group, channel, &participants)) return false;
    std::vector<size_t> absent;
    for (size_t r : participants) {
      if (!entered.count(r)) absent.push_back(r);
    }
    if (absent.empty()) return false;
    ++out_.jobs[job].never_joined;
    for (size_t i : one) {
      const Collective& c = collectives_[i];
      if (c.end <= c.start) continue;
      RankWork& w = work_[c.rank];
      w.waits.push_back({c.start, c.end});
      for (size_t r : absent) {
        w.caused_by[r].push_back({c.start, c.end});
        work_[r].never_joined.insert(one.front());
      }
      Kind(c.phase->name).wait_s += NsToSeconds(c.end - c.start);
    }
    return true;
  }

  // A rank that completed a group collective before the last rank (on another host) entered
  // it, by more than the two clocks' uncertainties: see CommunicationJob::clock_violations.
  void CheckCausality(size_t job, const std::vector<size_t>& members, const Collective& last) {
    const std::string& last_host = last.phase->host;
    DurationNs worst = 0;
    for (size_t i : members) {
      const Collective& c = collectives_[i];
      if (c.phase->host == last_host) continue;
      DurationNs early = last.start - c.end;
      DurationNs tolerance = UncertaintyOf(c.phase->host) + UncertaintyOf(last_host);
      if (early > tolerance) worst = std::max(worst, early);
    }
    if (worst == 0) return;
    CommunicationJob& j = out_.jobs[job];
    ++j.clock_violations;
    j.max_clock_violation_s = std::max(j.max_clock_violation_s, NsToSeconds(worst));
  }

  DurationNs UncertaintyOf(const std::string& host) const {
    const model::Host* h = run_.FindHost(host);
    return h != nullptr ? h->clock_uncertainty_ns : 0;
  }

  // DDP's reducer launches a backward's last bucket once autograd produced the last gradient,
  // then blocks the backward call until every bucket is reduced: from the last bucket's start
  // to the last bucket's end, the backward phase waits rather than computes.
  static void DdpBackwardWaits(RankWork& w) {
    if (w.buckets.empty()) return;
    std::sort(w.buckets.begin(), w.buckets.end());
    for (const auto& [id, b] : w.backwards) {
      auto first = std::lower_bound(w.buckets.begin(), w.buckets.end(), TimeSpan{b.first, b.first});
      TimeNs last_start = -1, last_end = -1;
      for (auto it = first; it != w.buckets.end() && it->first <= b.second; ++it) {
        last_start = std::max(last_start, it->first);
        last_end = std::max(last_end, it->second);
      }
      if (last_start >= 0 && std::min(last_end, b.second) > last_start) {
        w.holes[id].push_back({last_start, std::min(last_end, b.second)});
      }
    }
  }

  void Summarize() {
    std::vector<double> caused_total(out_.ranks.size(), 0.0);
    for (size_t r = 0; r < out_.ranks.size(); ++r) {
      RankWork& w = work_[r];
      RankCommunication& rc = out_.ranks[r];
      DdpBackwardWaits(w);
      TimeSpans comm = Union(std::move(w.comm));
      TimeSpans compute;
      for (auto& [id, iv] : w.compute_phases) {
        auto h = w.holes.find(id);
        if (h == w.holes.end()) {
          compute.push_back(iv);
        } else {
          for (const TimeSpan& piece : Subtract({iv}, Union(h->second))) compute.push_back(piece);
        }
      }
      compute = Union(std::move(compute));
      rc.comm_s = NsToSeconds(Length(comm));
      rc.compute_s = NsToSeconds(Length(compute));
      rc.overlapped_s = NsToSeconds(Length(Intersect(comm, compute)));
      rc.overlap_pct = rc.comm_s > 0 ? 100.0 * rc.overlapped_s / rc.comm_s : 0;
      rc.wait_s = NsToSeconds(Length(Union(std::move(w.waits))));
      for (auto& [last, waits] : w.caused_by) caused_total[last] += NsToSeconds(Length(Union(std::move(waits))));
    }
    // Per job: the straggler stands out from the next rank.
    for (size_t j = 0; j < out_.jobs.size(); ++j) {
      CommunicationJob& job = out_.jobs[j];
      size_t best = out_.ranks.size();
      double first = 0, second = 0;
      for (size_t r = 0; r < out_.ranks.size(); ++r) {
        if (out_.ranks[r].job != j) continue;
        double others = static_cast<double>(std::max<int64_t>(job.ranks - 1, 1));
        out_.ranks[r].caused_wait_s = caused_total[r] / others;
        if (caused_total[r] > first) {
          second = first;
          first = caused_total[r];
          best = r;
        } else if (caused_total[r] > second) {
          second = caused_total[r];
        }
      }
      if (best == out_.ranks.size()) continue;
      double cost = out_.ranks[best].caused_wait_s;
      if (cost >= options_.straggler_min_s && first >= options_.straggler_factor * second) {
        out_.ranks[best].straggler = true;
        job.straggler_rank = out_.ranks[best].rank;
        job.straggler_process = out_.ranks[best].process;
        job.straggler_cost_s = cost;
        job.straggler_total_s = first;
        job.straggler_never_joined = static_cast<int64_t>(work_[best].never_joined.size());
      }
    }
  }

  // Ranks of imported traces grademl's instrumentation did not see, as the GPU analysis
  // measured them (no wait: their collectives are not matched).
  void AddTraceRanks(const GpuAnalysis& gpu) {
    std::set<model::PhaseId> known;
    std::set<int64_t> known_ranks;
    for (const RankCommunication& rc : out_.ranks) {
      known.insert(rc.process);
      known_ranks.insert(rc.rank);
    }
    size_t job = out_.jobs.size();
    auto add = [&](int64_t rank, model::PhaseId phase, int64_t collectives, double comm_us, double overlap_us) {
      if ((phase != 0 && known.count(phase)) || known_ranks.count(rank)) return;
      if (job == out_.jobs.size()) out_.jobs.push_back({.id = "imported traces"});
      ++out_.jobs[job].ranks;
      const model::Phase* p = phase != 0 ? run_.FindPhase(phase) : nullptr;
      const model::Phase* process = p;
      if (p != nullptr && !p->leaf_is(model::kPhaseTypeProcess)) {
        model::PhaseId owner = OwnerOf(*p);
        process = owner != 0 ? run_.FindPhase(owner) : p;
      }
      RankCommunication rc{.rank = rank, .job = job, .process = process != nullptr ? process->id : 0, .source = "trace"};
      if (process != nullptr) {
        rc.host = process->host;
        rc.pid = process->pid;
      }
      rc.collectives = collectives;
      rc.comm_s = comm_us / 1e6;
      rc.overlapped_s = std::isfinite(overlap_us) ? overlap_us / 1e6 : 0;
      rc.overlap_pct = rc.comm_s > 0 ? 100.0 * rc.overlapped_s / rc.comm_s : 0;
      rc.wait_known = false;
      out_.ranks.push_back(std::move(rc));
      known_ranks.insert(rank);
    };
    for (const CpuCommOverlap& c : gpu.cpu_overlap) add(c.rank, c.phase, c.collectives, c.comm_us, c.overlap_us);
    std::map<int64_t, double> overlap_pct;
    for (const GpuOverlap& o : gpu.overlap) overlap_pct[o.rank] = o.comm_comp_overlap_pct;
    for (const GpuRankSummary& r : gpu.ranks) {
      if (r.comm_kernels == 0) continue;
      auto it = overlap_pct.find(r.rank);
      double pct = it != overlap_pct.end() ? it->second : 0;
      add(r.rank, r.phase, r.comm_kernels, r.comm_us, std::isfinite(pct) ? r.comm_us * pct / 100.0 : 0);
    }
    if (job < out_.jobs.size()) out_.jobs[job].world_size = out_.jobs[job].ranks;
  }

  void ChooseHeadline() {
    std::stable_sort(out_.ranks.begin(), out_.ranks.end(), [](const RankCommunication& a, const RankCommunication& b) {
      return a.job != b.job ? a.job < b.job : a.rank < b.rank;
    });
    std::stable_sort(out_.kinds.begin(), out_.kinds.end(),
                     [](const CollectiveKind& a, const CollectiveKind& b) { return a.total_s > b.total_s; });
    if (out_.jobs.empty()) return;
    const CommunicationJob* head = &out_.jobs.front();
    for (const CommunicationJob& j : out_.jobs) {
      if (j.straggler_cost_s > head->straggler_cost_s) head = &j;
    }
    out_.world_size = head->world_size;
    out_.straggler_rank = head->straggler_rank;
    out_.straggler_cost_s = head->straggler_cost_s;
  }
};

}  // namespace

CommunicationAnalysis AnalyzeCommunication(const model::Run& run, const GpuAnalysis* gpu,
                                           const CommunicationOptions& options) {
  return CommunicationAnalyzer(run, options).Run(gpu);
}

}  // namespace grademl::analysis
