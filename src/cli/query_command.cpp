// `grademl query [RUN] "SELECT ..." [--format table|csv|json]`: read-only SQL over one run
// (the latest by default), through the views documented in docs/query.md: `phases`,
// `edges`, `samples`, `kernels`, `step_executions` (the store's data, store/query_session.h)
// and `redundant_steps`, `attribution`, `bottlenecks`, `issues`, `gpu_breakdown` (the
// analyses' results, computed when the query names them; the run is loaded and analysed as
// every verb does, reuse/stored_run.h).
#include <stdlib.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "analysis/attribution.h"
#include "analysis/bottlenecks.h"
#include "analysis/gpu_breakdown.h"
#include "analysis/run_analysis.h"
#include "cli/commands.h"
#include "cli/query_guard.h"
#include "report/text_format.h"
#include "store/database.h"
#include "store/query_session.h"
#include "reuse/artifact_store.h"
#include "reuse/stored_run.h"

namespace grademl::cli {
namespace {

using store::QueryBlob;
using store::QueryColumn;
using store::QueryValue;
using store::QueryView;
using Rows = std::vector<std::vector<QueryValue>>;

// --- the analyses' views ---------------------------------------------------------------------

const QueryView kRedundantStepsView = {
    "redundant_steps",
    "one row per step the run ran although an earlier run had executed the same computation (same key): the "
    "reuse analysis's redundant steps (docs/reuse.md)",
    {
        {"step", "TEXT", "the step's name"},
        {"phase_id", "INTEGER", "the step's phase"},
        {"cost_s", "REAL", "what running it cost this run, in seconds: what reuse could have saved"},
        {"earlier_run_id", "INTEGER",
         "the latest earlier run (a smaller id, or an earlier start) that ran it or reused it with the same key"},
        {"earlier_run_uuid", "TEXT", "that run's uuid"},
        {"earlier_step", "TEXT", "the step's name in that run"},
        {"outputs_identical", "INTEGER",
         "1 when both executions have as many outputs and each has the hash of the other's output at the same path "
         "(none unreadable), else 0"},
    },
};

const QueryView kAttributionView = {
    "attribution",
    "one row per phase and measured metric: how much of it the phase used (docs/attribution.md)",
    {
        {"phase_id", "INTEGER", "the phase"},
        {"name", "TEXT", "the phase's name"},
        {"metric", "TEXT",
         "`cpu`, `io.read_bytes`, `io.write_bytes`, `memory.rss` (by PSS where recorded), `disk.busy`, "
         "`net.rx_bytes`, `net.tx_bytes`, `gpu.utilization`, `gpu.memory_used`"},
        {"unit", "TEXT", "`core-s`, `bytes`, `byte-s`, `disk-s`, `GPU-s`"},
        {"usage", "REAL", "what the phase used, its subtree included"},
        {"self_usage", "REAL", "what the phase used itself: usage minus its children's"},
        {"could_have_used", "REAL",
         "its share of the resource's capacity in the same moments, subtree included; NULL when no capacity is known"},
        {"utilization", "REAL", "usage / could_have_used; NULL when that is unknown or 0"},
    },
};

const QueryView kBottlenecksView = {
    "bottlenecks",
    "one row per phase and what limited it, for each nonzero part of its duration (docs/bottlenecks.md)",
    {
        {"phase_id", "INTEGER", "the phase"},
        {"name", "TEXT", "the phase's name"},
        {"resource", "TEXT",
         "`cpu`, `memory`, `disk`, `network`, `gpu` (bound by it); `waiting` (on nothing measured: sleep, locks, "
         "children); `unknown` (no sample covered it)"},
        {"seconds", "REAL", "seconds of the phase's duration; a phase's rows add up to its duration"},
        {"saturated_seconds", "REAL", "of those, the time the whole machine's resource was full (a global bottleneck)"},
        {"local_seconds", "REAL", "seconds - saturated_seconds: the phase's own share was full"},
        {"fraction", "REAL", "seconds / the phase's duration"},
    },
};

const QueryView kIssuesView = {
    "issues",
    "one row per ranked issue, the largest saving first (docs/analysis.md)",
    {
        {"rank", "INTEGER", "1 for the issue whose fix would save the most"},
        {"kind", "TEXT",
         "`cpu`, `memory`, `disk`, `network`, `gpu`, `waiting`, `imbalance`, `straggler`, `data_wait`, "
         "`concurrency`, `redundant_step`, ... (every kind: docs/analysis.md)"},
        {"phase_id", "INTEGER", "the phase it is about (imbalance, stragglers: the slowest one); NULL for none"},
        {"name", "TEXT", "that phase's name"},
        {"impact_seconds", "REAL", "what the change would save, by the what-if engine"},
        {"impact_fraction", "REAL", "impact_seconds / the run's duration"},
        {"change", "TEXT", "the what-if change behind the estimate: `grademl whatif RUN CHANGE...`"},
        {"text", "TEXT", "one plain sentence"},
    },
};

const QueryView kGpuBreakdownView = {
    "gpu_breakdown",
    "one row per rank of the imported GPU traces: HTA's temporal breakdown and communication overlap (docs/gpu.md)",
    {
        {"rank", "INTEGER", "the trace's rank (distributedInfo.rank; 0 when the trace has none)"},
        {"kernel_us", "REAL", "from the first kernel's start to the last kernel's end, over all streams, in µs"},
        {"idle_us", "REAL", "of that span, the time no stream ran a kernel"},
        {"compute_us", "REAL", "the time COMPUTATION kernels ran (overlaps merged)"},
        {"non_compute_us", "REAL", "the other busy time (communication, memory, ... not overlapping computation)"},
        {"idle_pct", "REAL", "idle_us / kernel_us * 100"},
        {"compute_pct", "REAL", "compute_us / kernel_us * 100"},
        {"non_compute_pct", "REAL", "non_compute_us / kernel_us * 100"},
        {"comm_comp_overlap_pct", "REAL",
         "share of communication kernel time that overlapped computation, in %; NULL when the rank ran no "
         "communication kernel"},
    },
};

// Every view, in the order of docs/query.md.
std::vector<QueryView> AllViews() {
  std::vector<QueryView> views = store::QuerySession::BuiltinViews();
  views.push_back(kRedundantStepsView);
  views.push_back(kAttributionView);
  views.push_back(kBottlenecksView);
  views.push_back(kIssuesView);
  views.push_back(kGpuBreakdownView);
  return views;
}

QueryValue Real(double v) { return std::isnan(v) ? QueryValue() : QueryValue(v); }
QueryValue PhaseName(const model::Run& run, model::PhaseId id) {
  const model::Phase* p = run.FindPhase(id);
  return p ? QueryValue(p->name) : QueryValue();
}

Rows AttributionRows(const model::Run& run, const analysis::Attribution& a) {
  Rows rows;
  for (size_t i = 0; i < run.phases.size(); ++i) {
    const model::Phase& p = run.phases[i];
    for (const analysis::MetricAttribution& m : a.metrics) {
      if (i >= m.usage.size()) continue;
      rows.push_back({p.id, p.name, m.name, m.unit, Real(m.usage[i]), Real(analysis::SelfUsage(run, m, p.id)),
                      i < m.could_have_used.size() ? Real(m.could_have_used[i]) : QueryValue(),
                      Real(m.Utilization(i))});
    }
  }
  return rows;
}

Rows BottleneckRows(const model::Run& run, const analysis::Bottlenecks& bottlenecks) {
  Rows rows;
  for (const analysis::PhaseBottlenecks& b : bottlenecks.phases) {
    QueryValue name = PhaseName(run, b.phase);
    auto add = [&](std::string_view resource, double seconds, double saturated) {
      if (!(seconds > 0)) return;
      rows.push_back({b.phase, name, std::string(resource), seconds, saturated, seconds - saturated,
                      b.duration_s > 0 ? QueryValue(seconds / b.duration_s) : QueryValue()});
    };
    for (int r = 0; r < analysis::kBoundResourceCount; ++r) {
      auto resource = static_cast<analysis::BoundResource>(r);
      add(analysis::BoundResourceName(resource), b.bound(resource), b.saturated(resource));
    }
    add("waiting", b.total_waiting_s(), 0);
    add("unknown", b.unknown_s, 0);
  }
  return rows;
}

Rows IssueRows(const model::Run& run, const std::vector<analysis::Issue>& issues) {
  Rows rows;
  for (size_t i = 0; i < issues.size(); ++i) {
    const analysis::Issue& issue = issues[i];
    rows.push_back({static_cast<int64_t>(i + 1), issue.kind, issue.phase != 0 ? QueryValue(issue.phase) : QueryValue(),
                    PhaseName(run, issue.phase), Real(issue.impact_s), Real(issue.impact_fraction), issue.change,
                    issue.text});
  }
  return rows;
}

Rows RedundantStepRows(const analysis::ReuseAnalysis& reuse) {
  Rows rows;
  for (const analysis::StepReuse& s : reuse.steps) {
    if (!s.redundant) continue;
    rows.push_back({s.step, s.phase, s.cost_s, s.earlier_run, s.earlier_uuid, s.earlier_step,
                    int64_t{s.outputs_identical ? 1 : 0}});
  }
  return rows;
}

Rows GpuBreakdownRows(const analysis::GpuAnalysis& gpu) {
  std::map<int64_t, double> overlap;
  for (const analysis::GpuOverlap& o : gpu.overlap) overlap[o.rank] = o.comm_comp_overlap_pct;
  Rows rows;
  for (const analysis::GpuTemporal& t : gpu.temporal) {
    auto it = overlap.find(t.rank);
    rows.push_back({t.rank, Real(t.kernel_us), Real(t.idle_us), Real(t.compute_us), Real(t.non_compute_us),
                    Real(t.idle_pct), Real(t.compute_pct), Real(t.non_compute_pct),
                    it == overlap.end() ? QueryValue() : Real(it->second)});
  }
  return rows;
}

// Whether the SQL names a view (a whole word, any case): then it is computed.
bool Mentions(const std::string& sql, const std::string& view) {
  std::regex word("(^|[^A-Za-z0-9_$])" + view + "($|[^A-Za-z0-9_$])", std::regex::icase);
  return std::regex_search(sql, word);
}

// Adds the analyses' tables the query needs to the session. `location` is the run's store:
// the experiment graph is read from it (the session may hold a copy of the run only).
Status AddAnalysisTables(store::QuerySession& session, const std::string& location, const std::string& sql) {
  const bool redundant = Mentions(sql, kRedundantStepsView.name);
  const bool attribution = Mentions(sql, kAttributionView.name);
  const bool bottlenecks = Mentions(sql, kBottlenecksView.name);
  const bool issues = Mentions(sql, kIssuesView.name);
  const bool gpu = Mentions(sql, kGpuBreakdownView.name);
  if (!redundant && !attribution && !bottlenecks && !issues && !gpu) return Status::Ok();
  GRADEML_ASSIGN_OR_RETURN(model::Run loaded, session.database().LoadRun(session.run_id()));
  // The issues and the redundant steps need the store's experiment graph: read as every verb
  // reads it (reuse/stored_run.h), so that they are the ones `grademl report` shows.
  reuse::StoredRun stored = issues || redundant ? reuse::WithExperimentGraph(location, std::move(loaded))
                                                : reuse::StoredRun{.run = std::move(loaded), .graph = std::nullopt};
  const model::Run& run = stored.run;
  if (gpu) GRADEML_RETURN_IF_ERROR(session.AddTable(kGpuBreakdownView, GpuBreakdownRows(analysis::AnalyzeGpu(run))));
  if (attribution) {
    GRADEML_RETURN_IF_ERROR(
        session.AddTable(kAttributionView, AttributionRows(run, analysis::AttributeResources(run))));
  }
  if (issues) {
    // The issues need every other analysis; the bottlenecks and the reuse come with them.
    analysis::RunAnalysis a = reuse::AnalyzeStoredRun(stored);
    GRADEML_RETURN_IF_ERROR(session.AddTable(kIssuesView, IssueRows(run, a.issues)));
    if (bottlenecks) GRADEML_RETURN_IF_ERROR(session.AddTable(kBottlenecksView, BottleneckRows(run, a.bottlenecks)));
    if (redundant) GRADEML_RETURN_IF_ERROR(session.AddTable(kRedundantStepsView, RedundantStepRows(a.reuse)));
    return Status::Ok();
  }
  if (bottlenecks) {
    GRADEML_RETURN_IF_ERROR(session.AddTable(kBottlenecksView, BottleneckRows(run, analysis::FindBottlenecks(run))));
  }
  if (redundant) {
    GRADEML_RETURN_IF_ERROR(
        session.AddTable(kRedundantStepsView, RedundantStepRows(reuse::AnalyzeStoredReuse(stored))));
  }
  return Status::Ok();
}

// --- output ----------------------------------------------------------------------------------

std::string Hex(const std::string& bytes) {
  std::string out = "x'";
  for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
  return out + "'";
}

// A cell as text: NULL as `null_text`, reals exactly (the shortest text that reads back the
// same) when `precise`, else with 12 significant digits (no float noise: 2.75, not 2.74999999999999).
std::string CellText(const QueryValue& v, bool precise, std::string_view null_text) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&v)) {
    double x = *d == 0 ? 0.0 : *d;  // no "-0"
    return precise ? fmt::format("{}", x) : fmt::format("{:.12g}", x);
  }
  if (const auto* t = std::get_if<std::string>(&v)) return *t;
  if (const auto* b = std::get_if<QueryBlob>(&v)) return Hex(b->bytes);
  return std::string(null_text);
}

// The output of a query in one format: columns, then rows, then Finish.
class Printer {
 public:
  virtual ~Printer() = default;
  virtual void Columns(const std::vector<std::string>& columns) = 0;
  virtual void Row(const std::vector<QueryValue>& row) = 0;
  virtual void Finish() = 0;
  // The query failed: what is held is written, without an ending.
  virtual void Stop() {}

 protected:
  static void Write(const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); }
};

// Aligned columns for people: every string sanitized and cut to `max_width` columns,
// numbers right-aligned, NULL as NULL, a row count at the end. The widths come from the
// first kMeasuredRows rows (fewer when their text passes kMeasuredBytes: wide cells with
// --max-width 0), held until then; later rows are written as they come (a wider cell
// there pushes its line's later columns right), so memory stays bounded however many rows
// the query returns.
class TablePrinter : public Printer {
 public:
  static constexpr size_t kMeasuredRows = 1000;
  static constexpr size_t kMeasuredBytes = size_t{16} << 20;

  explicit TablePrinter(size_t max_width) : max_width_(max_width) {}
  void Columns(const std::vector<std::string>& columns) override {
    columns_known_ = true;
    for (const auto& c : columns) header_.push_back(Cut(report::Sanitize(c)));
    numeric_.assign(columns.size(), true);
    any_value_.assign(columns.size(), false);
  }
  void Row(const std::vector<QueryValue>& row) override {
    std::vector<std::string> cells;
    for (size_t i = 0; i < row.size(); ++i) {
      const QueryValue& v = row[i];
      bool number = std::holds_alternative<int64_t>(v) || std::holds_alternative<double>(v);
      bool null = std::holds_alternative<std::monostate>(v);
      if (!null && !measured_) {
        any_value_[i] = true;
        if (!number) numeric_[i] = false;
      }
      cells.push_back(Cut(report::Sanitize(CellText(v, false, "NULL"))));
      held_bytes_ += cells.back().size();
    }
    ++count_;
    if (measured_) {
      Write(Line(cells));
      return;
    }
    rows_.push_back(std::move(cells));
    if (rows_.size() >= kMeasuredRows || held_bytes_ >= kMeasuredBytes) WriteMeasured();
  }
  void Finish() override {
    if (!measured_) WriteMeasured();
    Write(fmt::format("({} row{})\n", count_, count_ == 1 ? "" : "s"));
  }
  void Stop() override {
    if (!measured_ && columns_known_) WriteMeasured();
  }

 private:
  std::string Cut(const std::string& s) const { return max_width_ == 0 ? s : report::TruncateToWidth(s, max_width_); }

  std::string Line(const std::vector<std::string>& cells) const {
    std::string out;
    for (size_t i = 0; i < header_.size(); ++i) {
      if (i) out += "  ";
      bool right = numeric_[i] && any_value_[i];
      out += right ? report::PadLeft(cells[i], width_[i]) : report::PadRight(cells[i], width_[i]);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  }

  // The header and the rows held so far, aligned on them; later rows stream.
  void WriteMeasured() {
    const size_t n = header_.size();
    width_.assign(n, 0);
    for (size_t i = 0; i < n; ++i) {
      width_[i] = report::DisplayWidth(header_[i]);
      for (const auto& row : rows_) width_[i] = std::max(width_[i], report::DisplayWidth(row[i]));
    }
    std::string out = Line(header_);
    std::vector<std::string> rules;
    for (size_t w : width_) rules.push_back(std::string(w, '-'));
    out += Line(rules);
    Write(out);
    for (const auto& row : rows_) Write(Line(row));
    rows_ = {};
    measured_ = true;
  }

  size_t max_width_;
  std::vector<std::string> header_;
  std::vector<bool> numeric_, any_value_;
  std::vector<size_t> width_;
  std::vector<std::vector<std::string>> rows_;  // held until the widths are known
  size_t held_bytes_ = 0;                        // their text
  bool columns_known_ = false;
  bool measured_ = false;
  size_t count_ = 0;
};

// RFC 4180: a header line, fields with a comma, quote or line break in double quotes (a
// quote doubled); NULL is an empty field. Lines end in \n. Text is written as stored.
class CsvPrinter : public Printer {
 public:
  void Columns(const std::vector<std::string>& columns) override {
    std::vector<QueryValue> header(columns.begin(), columns.end());
    Row(header);
  }
  void Row(const std::vector<QueryValue>& row) override {
    std::string out;
    for (size_t i = 0; i < row.size(); ++i) {
      if (i) out += ',';
      std::string cell = CellText(row[i], true, "");
      if (cell.find_first_of(",\"\r\n") != std::string::npos) {
        out += '"';
        for (char c : cell) out += c == '"' ? std::string("\"\"") : std::string(1, c);
        out += '"';
      } else {
        out += cell;
      }
    }
    Write(out + "\n");
  }
  void Finish() override {}
};

// A JSON array of objects, one per row and line, keys in column order; a repeated column
// name gets ":2", ":3", ... Text is made valid UTF-8; a BLOB is its x'..' hex text.
class JsonPrinter : public Printer {
 public:
  void Columns(const std::vector<std::string>& columns) override {
    std::map<std::string, int> seen;
    for (const auto& c : columns) {
      std::string key = report::ValidUtf8(c);
      int n = ++seen[key];
      keys_.push_back(n == 1 ? key : fmt::format("{}:{}", key, n));
    }
  }
  void Row(const std::vector<QueryValue>& row) override {
    nlohmann::ordered_json object = nlohmann::ordered_json::object();
    for (size_t i = 0; i < row.size(); ++i) {
      const QueryValue& v = row[i];
      nlohmann::ordered_json& cell = object[keys_[i]];
      if (const auto* x = std::get_if<int64_t>(&v)) {
        cell = *x;
      } else if (const auto* d = std::get_if<double>(&v)) {
        cell = *d == 0 ? 0.0 : *d;
      } else if (const auto* t = std::get_if<std::string>(&v)) {
        cell = report::ValidUtf8(*t);
      } else if (const auto* b = std::get_if<QueryBlob>(&v)) {
        cell = Hex(b->bytes);
      }  // NULL stays null
    }
    Write((rows_ == 0 ? "[\n  " : ",\n  ") + object.dump());
    ++rows_;
  }
  void Finish() override { Write(rows_ == 0 ? "[]\n" : "\n]\n"); }

 private:
  std::vector<std::string> keys_;
  size_t rows_ = 0;
};

std::unique_ptr<Printer> MakePrinter(const std::string& format, size_t max_width) {
  if (format == "csv") return std::make_unique<CsvPrinter>();
  if (format == "json") return std::make_unique<JsonPrinter>();
  return std::make_unique<TablePrinter>(max_width);
}

// `--list-views`: as text, each view and its columns; as CSV or JSON, one row per column.
void ListViews(const std::string& format) {
  std::vector<QueryView> views = AllViews();
  if (format == "table") {
    std::string out;
    for (const QueryView& v : views) {
      out += fmt::format("{}{}: {}\n", out.empty() ? "" : "\n", v.name, v.description);
      size_t width = 0;
      for (const QueryColumn& c : v.columns) width = std::max(width, c.name.size());
      for (const QueryColumn& c : v.columns) {
        out += fmt::format("  {:<{}}  {:<7}  {}\n", c.name, width, c.type, c.meaning);
      }
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return;
  }
  std::unique_ptr<Printer> printer = MakePrinter(format, 0);
  printer->Columns({"view", "column", "type", "meaning"});
  for (const QueryView& v : views) {
    for (const QueryColumn& c : v.columns) printer->Row({v.name, c.name, c.type, c.meaning});
  }
  printer->Finish();
}

}  // namespace

Action RegisterQueryCommand(CLI::App& app, CommonOptions& common) {
  struct Options {
    std::vector<std::string> args;
    std::string run;
    std::string format = "table";
    bool csv = false;
    bool json = false;
    size_t max_width = 60;
    bool list_views = false;
    double timeout_s = 60;
    std::string max_memory = "2G";
  };
  auto opts = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "query",
      "Run a read-only SQL query over a run: its phases, edges, samples, imported GPU kernels and workflow step "
      "executions (with the steps an earlier run had already computed), and what the analyses found (attribution, "
      "bottlenecks, issues, gpu_breakdown) (docs/query.md)");
  sub->add_option("SQL", opts->args,
                  "[RUN] SQL: the run (an id, -N for the N-th latest, or latest; default: the latest run), then one "
                  "SELECT statement ('-' reads it from stdin)")
      ->type_name("");
  sub->add_option("--run", opts->run, "Run id, or -N for the N-th latest (instead of the RUN argument)");
  auto* format = sub->add_option("--format", opts->format, "Output format: table (aligned columns), csv or json")
                     ->check(CLI::IsMember({"table", "csv", "json"}))
                     ->capture_default_str();
  auto* csv = sub->add_flag("--csv", opts->csv, "The same as --format csv")->excludes(format);
  sub->add_flag("--json", opts->json, "The same as --format json")->excludes(format)->excludes(csv);
  sub->add_option("--max-width", opts->max_width, "table: cut cells to this many columns, 0 to 100000 (0: never)")
      ->check(WholeNumberIn(0, 100000))
      ->capture_default_str();
  sub->add_flag("--list-views", opts->list_views, "List the views and their columns, then exit");
  sub->add_option("--timeout", opts->timeout_s,
                  "Stop the command when still running after this many seconds (copying a PostgreSQL run, the "
                  "analyses, the statement and its output), with an error (0: no limit)")
      ->envname("GRADEML_QUERY_TIMEOUT")
      ->check(CLI::Validator(
          [](std::string& value) -> std::string {
            double v = 0;
            try {
              v = std::stod(value);
            } catch (...) {
              return "expected a number of seconds";
            }
            return v >= 0 && v <= 1e6 ? "" : "expected a number of seconds from 0 to 1000000";
          },
          "SECONDS"))
      ->capture_default_str();
  sub->add_option("--max-memory", opts->max_memory,
                  "SQLite's memory for the query: the run's phases, sorts, groups, temporary results (never spilled "
                  "to disk); one string or BLOB may take an eighth of it. E.g. 512M, 4G; 0: no limit")
      ->envname("GRADEML_QUERY_MAX_MEMORY")
      ->type_name("SIZE")
      ->capture_default_str();
  sub->footer(
      "grademl query [RUN] SQL [--format table|csv|json]\n\n"
      "Views: phases, edges, samples, kernels, step_executions, redundant_steps, attribution, bottlenecks, issues,\n"
      "gpu_breakdown (grademl query --list-views).\n"
      "Only reads are allowed: INSERT, UPDATE, DELETE, CREATE, DROP, ATTACH, PRAGMA assignments and the like are\n"
      "refused. The store's tables of every run stay readable as main.runs, main.phases, ... (docs/store.md).\n"
      "Rows are written as they come (a table aligns on its first 1000 rows).\n"
      "Limits (docs/query.md): the command stops with a one-line error naming the limit and exit code 1 when\n"
      "still running after --timeout seconds (default 60; $GRADEML_QUERY_TIMEOUT), or when SQLite's memory would\n"
      "pass --max-memory (default 2G; $GRADEML_QUERY_MAX_MEMORY), or one string or BLOB an eighth of it. SIGINT,\n"
      "SIGTERM and SIGHUP stop it within a second (exit code 128 + the signal's number).\n"
      "Examples:\n"
      "  grademl query \"SELECT name, duration_s FROM phases ORDER BY duration_s DESC LIMIT 5\"\n"
      "  grademl query -2 \"SELECT * FROM bottlenecks WHERE resource = 'cpu'\" --format csv\n"
      "  grademl query \"SELECT rank, impact_seconds, text FROM issues\" --json");
  return [opts, &common]() -> int {
    std::string format = opts->csv ? "csv" : opts->json ? "json" : opts->format;
    if (opts->list_views) {
      if (!opts->args.empty() || !opts->run.empty()) {
        PrintError("--list-views takes no run and no SQL");
        return kExitUsage;
      }
      ListViews(format);
      return 0;
    }
    if (opts->args.empty()) {
      PrintError("query: no SQL given, e.g. grademl query \"SELECT name, duration_s FROM phases\"");
      return kExitUsage;
    }
    if (opts->args.size() > 2) {
      PrintError(fmt::format("query: {} arguments given, expected [RUN] SQL (quote the SQL as one argument)",
                             opts->args.size()));
      return kExitUsage;
    }
    std::string run_spec = opts->run;
    std::string sql = opts->args.back();
    if (opts->args.size() == 2) {
      if (!opts->run.empty()) {
        PrintError("query: the run is given twice (RUN and --run)");
        return kExitUsage;
      }
      run_spec = opts->args[0];
      static const std::regex kRun(R"(-?[0-9]+|latest)");
      if (!std::regex_match(run_spec, kRun)) {
        PrintError(fmt::format("query: '{}' is not a run (an id, -N or latest): give the run first, then the SQL",
                               report::TruncateToWidth(report::Sanitize(run_spec), 40)));
        return kExitUsage;
      }
    }
    store::QueryOptions options;
    {
      auto memory = reuse::ParseByteSize(opts->max_memory);
      if (!memory.ok()) {
        PrintError("query: --max-memory: " + memory.status().message());
        return kExitUsage;
      }
      if (*memory != 0 && *memory < (int64_t{16} << 20)) {
        PrintError(fmt::format("query: --max-memory: '{}' is less than the 16M a query needs at least (0: no limit)",
                               report::TruncateToWidth(report::Sanitize(opts->max_memory), 40)));
        return kExitUsage;
      }
      options.limits.memory_bytes = *memory;
    }
    if (sql == "-") {
      // The SQL is read within the limit on one value: SQLite would refuse a longer one.
      const size_t most = static_cast<size_t>(options.limits.value_bytes());
      sql.clear();
      char buf[65536];
      while (std::cin.read(buf, sizeof buf) || std::cin.gcount() > 0) {
        sql.append(buf, static_cast<size_t>(std::cin.gcount()));
        if (sql.size() > most) {
          PrintError(fmt::format("query: the SQL on stdin is longer than {} bytes, the limit on one value (an eighth "
                                 "of --max-memory)",
                                 most));
          return kExitUsage;
        }
      }
    }

    // From here every step is bounded by the guard: it interrupts the statement, or ends
    // the process when a step cannot be interrupted. It starts first, so that a signal
    // can no longer end the process with its default action once anything exists.
    QueryGuard guard(static_cast<DurationNs>(opts->timeout_s * kNsPerSec));
    // A PostgreSQL store's run is copied into a private directory, removed at the end
    // (and by the guard, should it have to end the process).
    struct PrivateDir {
      std::string path;
      ~PrivateDir() {
        std::error_code ec;
        if (!path.empty()) std::filesystem::remove_all(path, ec);
      }
    } private_dir;
    const std::string location = common.ResolvedDbPath();
    if (store::IsPostgresLocation(location)) {
      std::error_code ec;
      std::string pattern = (std::filesystem::temp_directory_path(ec) / "grademl_query_XXXXXX").string();
      if (ec || mkdtemp(pattern.data()) == nullptr) {
        const std::string why = ec ? ec.message() : std::string(std::strerror(errno));
        guard.Finish();
        PrintError(
            fmt::format("query: cannot make a private directory in the temporary directory ({}): {}", why, pattern));
        return kExitFailure;
      }
      private_dir.path = options.snapshot_dir = pattern;
      guard.RemoveOnExit(pattern);
    }

    // The last words of the command: the guard's reason when it stopped it, else `st`'s
    // with `exit_code`.
    auto finish = [&](const Status& st, int exit_code) -> int {
      std::fflush(stdout);
      guard.Finish();
      if (guard.stopped()) {
        PrintError(guard.reason().message());
        return guard.exit_code();
      }
      if (st.ok()) return 0;
      PrintError(st.message());
      return exit_code;
    };

    auto session = store::QuerySession::Open(location, run_spec, options);
    if (!session.ok()) return finish(session.status(), kExitFailure);
    guard.Watch(session->get());
    struct Unwatch {
      QueryGuard& guard;
      ~Unwatch() { guard.Watch(nullptr); }
    } unwatch{guard};
    if (Status st = AddAnalysisTables(**session, location, sql); !st.ok()) return finish(st, kExitFailure);
    std::unique_ptr<Printer> printer = MakePrinter(format, opts->max_width);
    Status st = (*session)->Execute(
        sql, [&](const std::vector<std::string>& columns) { printer->Columns(columns); },
        [&](const std::vector<QueryValue>& row) {
          printer->Row(row);
          return true;
        });
    if (st.ok()) {
      printer->Finish();
    } else {
      printer->Stop();  // the rows that came before the error stay on stdout
    }
    return finish(st, st.code() == StatusCode::kInvalidArgument ? kExitUsage : kExitFailure);
  };
}

}  // namespace grademl::cli
