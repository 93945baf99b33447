#include "analysis/imbalance.h"

#include <algorithm>
#include <array>
#include <map>
#include <span>
#include <string>
#include <tuple>
#include <cstdint>
#include <functional>
#include <vector>


namespace grademl::analysis {

std::string_view ImbalanceKindName(ImbalanceKind kind) {
  switch (kind) {
    case ImbalanceKind::kConcurrent: return "concurrent";
    case ImbalanceKind::kSequential: return "sequential";
  }
  return "unknown";
}

namespace {

// The program a process phase runs: the base name of the first word of its command line.
std::string_view ProgramOf(std::string_view name) {
  size_t space = name.find(' ');
  std::string_view first = name.substr(0, space);
  size_t slash = first.rfind('/');
  return slash == std::string_view::npos ? first : first.substr(slash + 1);
}

// What makes siblings interchangeable besides their type: a process's program; for other
// phases the name without its digits ("shard_3" -> "shard_", "epoch 12" -> "epoch ") and the
// tags whose values are not numbers ("mode=eval" keeps evaluation apart from training;
// "epoch=3" is an index, "num_workers=2" a setting), in key order: a tag set after the phase
// began (the auto-instrumentation's mode, decided when a pass ends) makes the same kind as
// one set at its start. Different steps ("train_cnn", "train_baseline") do different work:
// they are not compared.
std::string GroupName(const model::Phase& p) {
  if (p.leaf_is(model::kPhaseTypeProcess)) return std::string(ProgramOf(p.name));
  std::string out;
  out.reserve(p.name.size());
  for (char c : p.name) {
    if (c < '0' || c > '9') out += c;
  }
  std::vector<std::string> kind_tags;
  for (const auto& [key, value] : p.tags) {
    bool number = !value.empty() && value.find_first_not_of("0123456789.-") == std::string::npos;
    if (!number) kind_tags.push_back(key + '=' + value);
  }
  std::sort(kind_tags.begin(), kind_tags.end());
  for (const std::string& tag : kind_tags) out += '\0' + tag;
  return out;
}

bool HasGroupTag(const model::Phase& p) {
  for (const auto& [key, value] : p.tags) {
    if (key == kImbalanceGroupTag) return true;
  }
  return false;
}

// One phase of a group, with its effective interval.
struct Member {
  const model::Phase* phase;
  TimeNs start, end;
  double duration() const { return NsToSeconds(end - start); }
};

// Finds the imbalances among the children of one parent.
class GroupScanner {
 public:
  GroupScanner(const ImbalanceOptions& options, TimeNs run_end, double min_cost)
      : o_(options), run_end_(run_end), min_cost_(min_cost) {}

  // Phases tagged kImbalanceGroupTag, compared with the phases of the same type and group
  // wherever they sit in the tree (Dask tasks under different workers); the group's parent
  // is the members' nearest common ancestor.
  void ScanTaggedGroups(const model::Run& run, std::vector<Imbalance>& out) {
    groups_.clear();
    for (const model::Phase& p : run.phases) {
      for (const auto& [key, value] : p.tags) {
        if (key != kImbalanceGroupTag) continue;
        TimeNs end = p.end_ns != 0 ? p.end_ns : run_end_;
        groups_[{std::string_view(p.type), value}].push_back({&p, p.start_ns, std::max(end, p.start_ns)});
        break;
      }
    }
    for (auto& [key, members] : groups_) {
      if (members.size() >= 2) Scan(CommonAncestor(run, members), key, members, out);
    }
  }

  void ScanChildren(const model::Run& run, model::PhaseId parent, std::vector<Imbalance>& out) {
    const auto& kids = run.ChildrenOf(parent);
    if (kids.size() < 2) return;
    if (kids.size() <= kFewKids) {
      // A group's key holds the type: a few children of pairwise different types (an
      // iteration's forward and backward) make no group of two, so there is nothing to
      // compare and no grouping to build.
      std::array<const model::Phase*, kFewKids> few;
      size_t m = 0;
      for (model::PhaseId id : kids) {
        if (const model::Phase* p = run.FindPhase(id)) few[m++] = p;
      }
      bool distinct = true;
      for (size_t i = 0; i < m && distinct; ++i) {
        for (size_t j = i + 1; j < m && distinct; ++j) distinct = few[i]->type != few[j]->type;
      }
      if (distinct) return;
    }
    // Group by type and GroupName, keeping the start order of ChildrenOf; groups of two or
    // more are scanned, in key order. Many groups (a million children each tagged with a
    // different word) are found by sorting the children by a hash of their key and their
    // position: one integer sort, not a million-entry tree of strings; children whose
    // hashes collide are told apart by their keys.
    // A few groups (the usual case: forward and backward under an iteration) go into an
    // ordered map as they come; past kMapGroups the hash sort below takes over.
    constexpr size_t kMapGroups = 64;
    phases_.clear();
    names_.clear();
    groups_.clear();
    bool many = false;
    for (model::PhaseId id : kids) {
      const model::Phase* p = run.FindPhase(id);
      if (p == nullptr || HasGroupTag(*p)) continue;
      phases_.push_back(p);
      names_.push_back(GroupName(*p));
      if (many) continue;
      TimeNs end = p->end_ns != 0 ? p->end_ns : run_end_;
      groups_[{std::string_view(p->type), names_.back()}].push_back({p, p->start_ns, std::max(end, p->start_ns)});
      many = groups_.size() > kMapGroups;
    }
    if (!many) {
      for (auto& [key, members] : groups_) {
        if (members.size() >= 2) Scan(parent, key, members, out);
      }
      return;
    }
    groups_.clear();
    order_.clear();
    for (size_t pos = 0; pos < phases_.size(); ++pos) {
      order_.push_back({HashKey(phases_[pos]->type, names_[pos]), static_cast<uint32_t>(pos)});
    }
    std::sort(order_.begin(), order_.end());
    auto same_key = [&](uint32_t a, uint32_t b) { return phases_[a]->type == phases_[b]->type && names_[a] == names_[b]; };
    auto key_less = [&](uint32_t a, uint32_t b) {
      int c = phases_[a]->type.compare(phases_[b]->type);
      return c != 0 ? c < 0 : names_[a] < names_[b];
    };
    // The groups of two or more, each as its children's positions in start order.
    std::vector<std::vector<uint32_t>> groups;
    std::vector<uint32_t> run_positions;
    for (size_t a = 0; a < order_.size();) {
      size_t b = a + 1;
      while (b < order_.size() && order_[b].first == order_[a].first) ++b;
      if (b - a >= 2) {
        run_positions.clear();
        for (size_t i = a; i < b; ++i) run_positions.push_back(order_[i].second);
        // Positions ascend within a run; a collision splits it by key, keeping that order.
        std::stable_sort(run_positions.begin(), run_positions.end(), key_less);
        for (size_t i = 0; i < run_positions.size();) {
          size_t j = i + 1;
          while (j < run_positions.size() && same_key(run_positions[i], run_positions[j])) ++j;
          if (j - i >= 2) groups.emplace_back(run_positions.begin() + static_cast<std::ptrdiff_t>(i),
                                              run_positions.begin() + static_cast<std::ptrdiff_t>(j));
          i = j;
        }
      }
      a = b;
    }
    std::sort(groups.begin(), groups.end(), [&](const auto& x, const auto& y) { return key_less(x[0], y[0]); });
    std::vector<Member> members;
    for (const std::vector<uint32_t>& group : groups) {
      members.clear();
      for (uint32_t pos : group) {
        const model::Phase* p = phases_[pos];
        TimeNs end = p->end_ns != 0 ? p->end_ns : run_end_;
        members.push_back({p, p->start_ns, std::max(end, p->start_ns)});
      }
      Scan(parent, Key{std::string_view(phases_[group[0]]->type), names_[group[0]]}, members, out);
    }
  }

 private:
  using Key = std::pair<std::string_view, std::string>;

  void Scan(model::PhaseId parent, const Key& key, std::vector<Member>& members, std::vector<Imbalance>& out) {
    std::stable_sort(members.begin(), members.end(),
                     [](const Member& a, const Member& b) { return a.start < b.start; });
    // Clusters of phases overlapping in time (by more than the tolerance).
    TimeNs tolerance = SecondsToNs(o_.overlap_tolerance_s);
    std::vector<Member> sequential;
    size_t begin = 0;
    TimeNs cluster_end = members[0].end;
    auto close_cluster = [&](size_t end) {
      if (end - begin >= 2) {
        Concurrent(parent, key, std::span<const Member>(members).subspan(begin, end - begin), out);
      } else {
        sequential.push_back(members[begin]);
      }
    };
    for (size_t i = 1; i < members.size(); ++i) {
      if (members[i].start < cluster_end - tolerance) {
        cluster_end = std::max(cluster_end, members[i].end);
        continue;
      }
      close_cluster(i);
      begin = i;
      cluster_end = members[i].end;
    }
    close_cluster(members.size());
    if (static_cast<int>(sequential.size()) >= std::max(o_.min_sequential_count, 2)) {
      Sequential(parent, key, sequential, out);
    }
  }

  Imbalance Base(ImbalanceKind kind, model::PhaseId parent, const Key& key, std::span<const Member> members) {
    Imbalance im;
    im.kind = kind;
    im.parent = parent;
    im.type = std::string(key.first);
    if (members.front().phase->leaf_is(model::kPhaseTypeProcess)) im.program = key.second;
    im.count = static_cast<int64_t>(members.size());
    im.start_ns = members.front().start;
    im.end_ns = members.front().end;
    const Member* slowest = &members.front();
    double sum = 0;
    durations_.clear();
    for (const Member& m : members) {
      im.end_ns = std::max(im.end_ns, m.end);
      if (m.duration() > slowest->duration()) slowest = &m;
      sum += m.duration();
      durations_.push_back(m.duration());
    }
    im.straggler = slowest->phase->id;
    im.straggler_s = slowest->duration();
    im.mean_s = sum / static_cast<double>(members.size());
    size_t mid = durations_.size() / 2;
    std::nth_element(durations_.begin(), durations_.begin() + static_cast<std::ptrdiff_t>(mid), durations_.end());
    im.median_s = durations_[mid];
    if (durations_.size() % 2 == 0) {
      double below = *std::max_element(durations_.begin(), durations_.begin() + static_cast<std::ptrdiff_t>(mid));
      im.median_s = (im.median_s + below) / 2;
    }
    return im;
  }

  void Concurrent(model::PhaseId parent, const Key& key, std::span<const Member> members, std::vector<Imbalance>& out) {
    Imbalance im = Base(ImbalanceKind::kConcurrent, parent, key, members);
    im.actual_s = im.straggler_s;
    im.balanced_s = im.mean_s;
    im.cost_s = im.actual_s - im.balanced_s;
    im.straggler_count = 1;
    if (im.cost_s >= min_cost_) out.push_back(std::move(im));
  }

  void Sequential(model::PhaseId parent, const Key& key, std::span<const Member> members, std::vector<Imbalance>& out) {
    Imbalance im = Base(ImbalanceKind::kSequential, parent, key, members);
    double threshold = im.median_s * o_.straggler_factor;
    for (const Member& m : members) {
      double d = m.duration();
      im.actual_s += d;
      if (d > threshold && d > im.median_s) {
        im.cost_s += d - im.median_s;
        ++im.straggler_count;
        if (im.stragglers.size() < kMaxListedStragglers) im.stragglers.push_back(m.phase->id);
      }
    }
    im.balanced_s = im.actual_s - im.cost_s;
    // Stragglers are the exception: when many phases are slow, the durations are simply
    // spread (two kinds of batches, say), which is not a straggler problem.
    bool few = static_cast<double>(im.straggler_count) <= o_.max_straggler_fraction * static_cast<double>(im.count);
    if (im.straggler_count > 0 && few && im.cost_s >= min_cost_) out.push_back(std::move(im));
  }

  static model::PhaseId CommonAncestor(const model::Run& run, const std::vector<Member>& members) {
    // The first member's ancestors, nearest first; each other member cuts the chain at the
    // first ancestor of its own that is on it.
    std::vector<model::PhaseId> chain;
    for (const model::Phase* p = run.FindPhase(members.front().phase->parent); p != nullptr;
         p = run.FindPhase(p->parent)) {
      chain.push_back(p->id);
      if (chain.size() > 10000) break;  // a malformed (cyclic) tree
    }
    size_t keep = 0;  // chain[keep..] are common so far
    for (const Member& m : members) {
      if (m.phase->parent == members.front().phase->parent) continue;
      size_t found = chain.size();
      int guard = 0;
      for (const model::Phase* p = run.FindPhase(m.phase->parent); p != nullptr && found == chain.size() && guard < 10000;
           p = run.FindPhase(p->parent), ++guard) {
        for (size_t i = keep; i < chain.size(); ++i) {
          if (chain[i] == p->id) {
            found = i;
            break;
          }
        }
      }
      keep = found;
      if (keep >= chain.size()) return 0;
    }
    return keep < chain.size() ? chain[keep] : 0;
  }

  static constexpr size_t kFewKids = 8;
  const ImbalanceOptions& o_;
  TimeNs run_end_;
  double min_cost_;
  std::map<Key, std::vector<Member>> groups_;
  // ScanChildren's grouping, kept between calls for their capacity.
  static uint64_t HashKey(std::string_view type, const std::string& name) {
    return std::hash<std::string_view>{}(type) * 1000003u ^ std::hash<std::string>{}(name);
  }
  std::vector<const model::Phase*> phases_;
  std::vector<std::string> names_;
  std::vector<std::pair<uint64_t, uint32_t>> order_;
  std::vector<double> durations_;
};

}  // namespace

std::vector<Imbalance> FindImbalance(const model::Run& run, const ImbalanceOptions& options) {
  std::vector<Imbalance> out;
  TimeNs run_end = run.EffectiveEnd();
  double run_s = 0;
  if (const model::Phase* root = run.Root()) {
    run_s = NsToSeconds(std::max<TimeNs>((root->end_ns != 0 ? root->end_ns : run_end) - root->start_ns, 0));
  } else {
    run_s = NsToSeconds(std::max<TimeNs>(run_end - run.info.start_ns, 0));
  }
  double min_cost = std::max(options.min_cost_s, options.min_cost_fraction * run_s);
  GroupScanner scanner(options, run_end, min_cost);
  for (const model::Phase& p : run.phases) scanner.ScanChildren(run, p.id, out);
  scanner.ScanTaggedGroups(run, out);
  std::stable_sort(out.begin(), out.end(), [](const Imbalance& a, const Imbalance& b) {
    return a.cost_s != b.cost_s ? a.cost_s > b.cost_s : a.start_ns < b.start_ns;
  });
  return out;
}

}  // namespace grademl::analysis
