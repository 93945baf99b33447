#include "record/trace_stitching.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <map>
#include <mutex>

#include <glob.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "core/text.h"
#include "importers/importer.h"
#include "importers/trace_input.h"

namespace grademl::record {
namespace fs = std::filesystem;
namespace {

// The host name an IP address resolves to by a reverse lookup (the resolver: /etc/hosts,
// DNS), its first label; "" for names, unresolvable addresses and numeric answers. Cached:
// one lookup per address per process.
std::string ResolvedHostName(const std::string& address) {
  static std::mutex mu;
  static std::map<std::string, std::string> cache;
  std::lock_guard lock(mu);
  if (auto it = cache.find(address); it != cache.end()) return it->second;
  std::string name;
  sockaddr_storage ss{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&ss);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&ss);
  if (inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    len = sizeof(sockaddr_in);
  } else if (inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    len = sizeof(sockaddr_in6);
  }
  char host[NI_MAXHOST];
  if (len != 0 && getnameinfo(reinterpret_cast<sockaddr*>(&ss), len, host, sizeof host, nullptr, 0, NI_NAMEREQD) == 0) {
    name = host;
    if (size_t dot = name.find('.'); dot != std::string::npos) name.resize(dot);
  }
  if (cache.size() < 4096) cache[address] = name;
  return name;
}

std::optional<std::string> TagOf(const model::Phase& phase, std::string_view key) {
  for (const auto& [k, v] : phase.tags) {
    if (k == key) return v;
  }
  return std::nullopt;
}

std::optional<TimeNs> ParseNs(const std::string& text) {
  TimeNs value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value <= 0) return std::nullopt;
  return value;
}

// The real path a request names, so that one file reached two ways is imported once.
std::string Identity(const std::string& path) {
  std::error_code ec;
  fs::path canonical = fs::weakly_canonical(path, ec);
  return ec ? path : canonical.string();
}

// A cheap look at the first bytes before the importer's own sniffing: compressed (gzip,
// zstd; Spark's lz4, snappy and lzf framings too, which the importer refuses with a message)
// or text starting with '{' or '['.
bool MayBeTrace(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char head[64] = {};
  in.read(head, sizeof head);
  std::streamsize n = in.gcount();
  std::string_view first(head, static_cast<size_t>(n));
  if (importers::CompressionOf(first) != "none") return true;
  if (importers::SniffTraceFormat(first) != nullptr && !first.starts_with("{") && !first.starts_with("[")) return true;
  for (std::streamsize i = 0; i < n; ++i) {
    char c = head[i];
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    return c == '{' || c == '[';
  }
  return false;
}

}  // namespace

bool LooksLikeTraceFile(const std::string& path) {
  if (!MayBeTrace(path)) return false;
  auto input = importers::TraceInput::Open(path);
  if (!input.ok()) return false;
  std::string head = importers::ReadHead(**input, 64 * 1024);
  const importers::TraceFormat* format = importers::SniffTraceFormat(head);
  if (format == nullptr) return false;
  if (format->name != "chrome_json") return true;  // a Spark event log, ...
  // A bare array of JSON objects is a trace only when its events have a phase ("ph"): an
  // out holding records ([{"id": 1}, ...]) is data, not a trace.
  size_t first = head.find_first_not_of(" \t\r\n\xEF\xBB\xBF");
  return first == std::string::npos || head[first] != '[' || head.find("\"ph\"") != std::string::npos;
}

TraceStitching::TraceStitching(model::RunBuilder* builder, model::PhaseId run_phase, std::string host, Hooks hooks)
    : builder_(builder), run_phase_(run_phase), host_(std::move(host)), hooks_(std::move(hooks)) {}

void TraceStitching::AddGlob(std::string pattern) { globs_.push_back(std::move(pattern)); }

void TraceStitching::AddEngineLogs(std::string dir) { engine_log_dirs_.push_back(std::move(dir)); }

std::vector<TraceStitching::Request> TraceStitching::EngineLogs() const {
  std::vector<Request> out;
  for (const std::string& dir : engine_log_dirs_) {
    std::vector<std::string> found;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      std::string name = it->path().filename().string();
      std::error_code type_ec;
      if (name.starts_with("dask-") && name.ends_with(".jsonl") && it->is_regular_file(type_ec)) {
        found.push_back(it->path().string());
      }
    }
    std::sort(found.begin(), found.end());
    for (std::string& f : found) out.push_back({.path = std::move(f), .origin = "dask"});
  }
  return out;
}

void TraceStitching::AddStepOuts(const std::vector<std::string>& outs, const std::string& cwd, model::PhaseId step) {
  if (!outs.empty()) step_outs_.push_back({outs, cwd, step});
}

std::vector<TraceStitching::Request> TraceStitching::ProfilerExports() const {
  std::vector<model::Phase> exports = builder_->PhasesWhere([](const model::Phase& p) {
    return p.leaf_type() == kTraceExportType && TagOf(p, kTracePathTag).has_value();
  });
  // A path written twice holds the last export.
  std::stable_sort(exports.begin(), exports.end(),
                   [](const model::Phase& a, const model::Phase& b) { return a.start_ns > b.start_ns; });
  std::vector<Request> out;
  for (const model::Phase& e : exports) {
    Request r{.path = *TagOf(e, kTracePathTag), .origin = "torch.profiler"};
    if (auto anchor = TagOf(e, kTraceAnchorTag)) r.anchor_ns = ParseNs(*anchor);
    // The process that wrote it: the export phase's nearest process ancestor.
    for (std::optional<model::Phase> p = builder_->GetPhase(e.parent); p; p = builder_->GetPhase(p->parent)) {
      if (p->leaf_is(model::kPhaseTypeProcess)) {
        r.process = p->id;
        r.under = p->id;
        break;
      }
      if (p->parent == 0) break;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<TraceStitching::Request> TraceStitching::StepOutTraces() const {
  std::vector<Request> out;
  for (const StepOuts& s : step_outs_) {
    for (const std::string& written : s.outs) {
      fs::path path = fs::path(written).is_absolute() ? fs::path(written) : fs::path(s.cwd) / written;
      std::error_code ec;
      if (fs::is_regular_file(path, ec)) {
        if (LooksLikeTraceFile(path.string())) out.push_back({.path = path.string(), .under = s.step, .origin = "step outs"});
        continue;
      }
      if (!fs::is_directory(path, ec)) continue;
      // A directory that is one trace (a Spark eventlog_v2_* directory), or one holding traces.
      if (importers::IsTraceDirectory(path.string())) {
        out.push_back({.path = path.string(), .under = s.step, .origin = "step outs"});
        continue;
      }
      std::vector<std::string> found;
      size_t scanned = 0;
      for (auto it = fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, ec);
           !ec && it != fs::recursive_directory_iterator() && scanned < kMaxOutFilesScanned; it.increment(ec)) {
        std::error_code type_ec;
        if (it->is_directory(type_ec) && !it->is_symlink(type_ec) && importers::IsTraceDirectory(it->path().string())) {
          found.push_back(it->path().string());
          it.disable_recursion_pending();
          continue;
        }
        if (!it->is_regular_file(type_ec)) continue;
        ++scanned;
        if (LooksLikeTraceFile(it->path().string())) found.push_back(it->path().string());
      }
      std::sort(found.begin(), found.end());
      for (std::string& f : found) out.push_back({.path = std::move(f), .under = s.step, .origin = "step outs"});
    }
  }
  return out;
}

std::vector<TraceStitching::Request> TraceStitching::GlobMatches(std::vector<std::string>& errors) const {
  std::vector<Request> out;
  for (const std::string& pattern : globs_) {
    glob_t g{};
    int rc = glob(pattern.c_str(), GLOB_TILDE | GLOB_BRACE, nullptr, &g);
    if (rc == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) {
        std::error_code ec;
        if (fs::is_regular_file(g.gl_pathv[i], ec) || importers::IsTraceDirectory(g.gl_pathv[i])) {
          out.push_back({.path = g.gl_pathv[i], .origin = "--import"});
        }
      }
    } else {
      errors.push_back(fmt::format("--import '{}' matched no file", EscapeControl(pattern)));
    }
    globfree(&g);
  }
  return out;
}

void TraceStitching::Import(const Request& r, TimeNs end, Outcome& outcome) {
  // Only regular files (and the directories a directory format reads): a path a program
  // tagged may name a FIFO or a device, whose reading would never end.
  std::error_code ec;
  if (!fs::is_regular_file(r.path, ec) && !importers::IsTraceDirectory(r.path)) {
    outcome.errors.push_back(fmt::format("trace {} ({}) not imported: {}", EscapeControl(r.path), r.origin,
                                         fs::exists(r.path, ec) ? "not a regular file" : "no such file"));
    return;
  }
  importers::ImportTarget target{.builder = builder_};
  target.under = r.under != 0 ? r.under : run_phase_;
  target.hosts.push_back({.name = host_});  // the recording host: the run's clock
  target.anchor_ns = r.anchor_ns;
  target.host_name_of = ResolvedHostName;
  target.processes = builder_->PhasesWhere(
      [](const model::Phase& p) { return p.leaf_is(model::kPhaseTypeProcess); });
  std::optional<model::Phase> window = builder_->GetPhase(r.process != 0 ? r.process : target.under);
  if (window) {
    target.align_start_ns = window->start_ns;
    target.align_end_ns = window->ended() ? window->end_ns : end;
  }
  if (r.process != 0 && window) {
    target.host = window->host;
    target.pid = window->pid;
    target.process_phase = r.process;
    if (hooks_.process_resource) target.process_resource = hooks_.process_resource(window->pid, r.process);
    // The process's recorded iterations: its phases (same pid) of type iteration whose
    // parent chain reaches the process phase.
    std::vector<model::Phase> own = builder_->PhasesWhere(
        [&](const model::Phase& p) { return p.pid == window->pid && p.host == window->host; });
    std::unordered_map<model::PhaseId, model::PhaseId> parent_of;
    for (const model::Phase& p : own) parent_of[p.id] = p.parent;
    for (model::Phase& p : own) {
      if (p.leaf_type() != kIterationType) continue;
      model::PhaseId at = p.parent;
      while (at != 0 && at != r.process) {
        auto it = parent_of.find(at);
        at = it == parent_of.end() ? 0 : it->second;
      }
      if (at == r.process) {
        if (!p.ended()) p.end_ns = target.align_end_ns;
        target.iterations.push_back(std::move(p));
      }
    }
  } else {
    target.host = host_;
  }
  target.stop = hooks_.stop;
  if (hooks_.flush || hooks_.stop) {
    target.flush = [this]() -> Status {
      if (hooks_.stop && hooks_.stop()) return FailedPrecondition("{}", "stopped (grademl was asked to stop)");
      if (hooks_.flush) hooks_.flush();
      return Status::Ok();  // a failing store is the writer's to report; the import goes on
    };
  }
  auto result = importers::ImportTraceFile(r.path, target);
  if (!result.ok()) {
    outcome.errors.push_back(fmt::format("trace {} ({}) not imported: {}", EscapeControl(r.path), r.origin,
                                         EscapeControl(result.status().message())));
    return;
  }
  if (result->partial || !result->error.ok()) {
    outcome.errors.push_back(fmt::format("trace {} ({}) imported in part: {}", EscapeControl(r.path), r.origin,
                                         EscapeControl(result->error.message())));
  }
  outcome.imported.push_back(fmt::format("{} ({}): {} phases", EscapeControl(r.path), r.origin, result->phases));
}

TraceStitching::Outcome TraceStitching::ImportAll(TimeNs end, std::function<bool()> stop) {
  if (stop) hooks_.stop = std::move(stop);
  Outcome outcome;
  std::vector<Request> requests = ProfilerExports();
  for (Request& r : StepOutTraces()) requests.push_back(std::move(r));
  for (Request& r : GlobMatches(outcome.errors)) requests.push_back(std::move(r));
  for (Request& r : EngineLogs()) requests.push_back(std::move(r));
  std::set<std::string> done;
  for (size_t i = 0; i < requests.size(); ++i) {
    const Request& r = requests[i];
    if (hooks_.stop && hooks_.stop()) {
      std::set<std::string> left;
      for (size_t j = i; j < requests.size(); ++j) {
        if (!done.count(Identity(requests[j].path))) left.insert(Identity(requests[j].path));
      }
      outcome.errors.push_back(fmt::format("{} trace file(s) not imported: grademl was asked to stop", left.size()));
      break;
    }
    if (!done.insert(Identity(r.path)).second) continue;
    Import(r, end, outcome);
  }
  return outcome;
}

}  // namespace grademl::record
