#include "importers/dask/dask_log_reader.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <span>

#include <fmt/format.h>

#include "core/strings.h"
#include "core/text.h"
#include "importers/json_text.h"

namespace grademl::importers::dask {
namespace {

namespace dom = simdjson::dom;
constexpr size_t kLinePadding = std::max<size_t>(simdjson::SIMDJSON_PADDING, 64);

// What went wrong with one line, before the line number is added.
struct LineError {
  std::string what;
};

// The fields of one array record, checked by position.
class Fields {
 public:
  Fields(std::string_view kind, std::vector<dom::element> items) : kind_(kind), items_(std::move(items)) {}
  size_t size() const { return items_.size(); }
  bool IsNull(size_t i) const { return i >= items_.size() || items_[i].is_null(); }

  std::optional<LineError> String(size_t i, std::string_view what, std::string_view* out, bool nullable = false) const {
    if (nullable && IsNull(i)) {
      *out = {};
      return std::nullopt;
    }
    if (i >= items_.size() || items_[i].get_string().get(*out) != simdjson::SUCCESS) return Expected(what, "a string");
    return std::nullopt;
  }
  std::optional<LineError> Number(size_t i, std::string_view what, double* out) const {
    if (i >= items_.size() || items_[i].get_double().get(*out) != simdjson::SUCCESS || !std::isfinite(*out)) {
      return Expected(what, "a number");
    }
    return std::nullopt;
  }
  std::optional<LineError> OptNumber(size_t i, std::string_view what, std::optional<double>* out) const {
    if (IsNull(i)) {
      out->reset();
      return std::nullopt;
    }
    double v = 0;
    if (auto e = Number(i, what, &v)) return e;
    *out = v;
    return std::nullopt;
  }
  std::optional<LineError> Integer(size_t i, std::string_view what, int64_t* out) const {
    if (i >= items_.size() || items_[i].get_int64().get(*out) != simdjson::SUCCESS) return Expected(what, "an integer");
    return std::nullopt;
  }
  std::optional<LineError> OptInteger(size_t i, std::string_view what, std::optional<int64_t>* out) const {
    if (IsNull(i)) {
      out->reset();
      return std::nullopt;
    }
    int64_t v = 0;
    if (auto e = Integer(i, what, &v)) return e;
    *out = v;
    return std::nullopt;
  }
  // (A default dom::array cannot be iterated: a nullable array is checked with IsNull first.)
  std::optional<LineError> Array(size_t i, std::string_view what, dom::array* out) const {
    if (i >= items_.size() || items_[i].get_array().get(*out) != simdjson::SUCCESS) return Expected(what, "an array");
    return std::nullopt;
  }
  const dom::element& at(size_t i) const { return items_[i]; }

  LineError Expected(std::string_view what, std::string_view type) const {
    return {fmt::format("\"{}\" record: {} is not {}", kind_, what, type)};
  }

 private:
  std::string_view kind_;
  std::vector<dom::element> items_;
};

std::optional<LineError> ParseHeader(dom::element doc, DaskHeader* h) {
  dom::object obj;
  if (doc.get_object().get(obj) != simdjson::SUCCESS) return LineError{"not a Dask task log (no header object)"};
  std::string_view format;
  if (obj["format"].get_string().get(format) != simdjson::SUCCESS || format != kDaskLogFormat) {
    return LineError{"not a Dask task log (the header's format is not \"grademl-dask\")"};
  }
  if (obj["version"].get_int64().get(h->version) != simdjson::SUCCESS) return LineError{"the header has no version"};
  if (h->version < 1 || h->version > kDaskLogVersion) {
    return LineError{fmt::format("version {} of the Dask task log (this grademl reads versions 1 to {})", h->version,
                                 kDaskLogVersion)};
  }
  std::string_view s;
  if (obj["scheduler"].get_string().get(s) == simdjson::SUCCESS) h->scheduler = ValidUtf8(s);
  if (obj["hostname"].get_string().get(s) == simdjson::SUCCESS) h->hostname = ValidUtf8(s);
  if (obj["distributed"].get_string().get(s) == simdjson::SUCCESS) h->distributed = ValidUtf8(s);
  int64_t pid = 0;
  if (obj["pid"].get_int64().get(pid) == simdjson::SUCCESS) h->pid = pid;
  double t = 0;
  if (obj["t"].get_double().get(t) == simdjson::SUCCESS && std::isfinite(t)) h->t = t;
  return std::nullopt;
}

// Parses one record line and hands it to the visitor. `error` is set for a damaged line.
Status DeliverRecord(dom::element doc, DaskLogVisitor& visitor, std::optional<LineError>* error) {
  dom::array array;
  if (doc.get_array().get(array) != simdjson::SUCCESS) {
    *error = LineError{"a record is not an array"};
    return Status::Ok();
  }
  std::vector<dom::element> items;
  for (dom::element e : array) items.push_back(e);
  std::string_view kind;
  if (items.empty() || items[0].get_string().get(kind) != simdjson::SUCCESS) {
    *error = LineError{"a record without its kind (a string first)"};
    return Status::Ok();
  }
  Fields f(kind, std::move(items));
  auto fail = [&](std::optional<LineError> e) {
    *error = std::move(e);
    return Status::Ok();
  };
  if (kind == "t") {
    DaskTaskRecord t;
    if (auto e = f.String(1, "key", &t.key)) return fail(e);
    if (auto e = f.String(2, "prefix", &t.prefix, true)) return fail(e);
    if (auto e = f.String(3, "state", &t.state)) return fail(e);
    if (auto e = f.String(4, "worker", &t.worker, true)) return fail(e);
    if (auto e = f.OptInteger(5, "nbytes", &t.nbytes)) return fail(e);
    if (auto e = f.String(6, "type", &t.type, true)) return fail(e);
    if (!f.IsNull(7)) {
      int64_t i = 0;
      uint64_t u = 0;
      std::string_view s;
      if (f.at(7).get_int64().get(i) == simdjson::SUCCESS) {
        t.thread = std::to_string(i);
      } else if (f.at(7).get_uint64().get(u) == simdjson::SUCCESS) {
        t.thread = std::to_string(u);
      } else if (f.at(7).get_string().get(s) == simdjson::SUCCESS) {
        t.thread = std::string(s);
      } else {
        return fail(f.Expected("thread", "a number"));
      }
    }
    if (auto e = f.OptNumber(8, "sent", &t.sent)) return fail(e);
    if (auto e = f.Number(9, "done", &t.done)) return fail(e);
    if (!f.IsNull(10)) {
      dom::array ss;
      if (auto e = f.Array(10, "startstops", &ss)) return fail(e);
      for (dom::element s : ss) {
        dom::array one;
        if (s.get_array().get(one) != simdjson::SUCCESS) return fail(f.Expected("a startstop", "an array"));
        std::vector<dom::element> parts;
        for (dom::element p : one) parts.push_back(p);
        Fields sf("t", std::move(parts));
        DaskStartStop x;
        if (auto e = sf.String(0, "a startstop's action", &x.action)) return fail(e);
        if (auto e = sf.Number(1, "a startstop's start", &x.start)) return fail(e);
        if (auto e = sf.Number(2, "a startstop's stop", &x.stop)) return fail(e);
        if (auto e = sf.String(3, "a startstop's source", &x.source, true)) return fail(e);
        t.startstops.push_back(x);
      }
    }
    if (auto e = f.String(11, "error", &t.error, true)) return fail(e);
    return visitor.OnTask(t);
  }
  if (kind == "d") {
    DaskDepsRecord d;
    if (auto e = f.String(1, "key", &d.key)) return fail(e);
    dom::array deps;
    if (auto e = f.Array(2, "deps", &deps)) return fail(e);
    for (dom::element k : deps) {
      std::string_view s;
      if (k.get_string().get(s) != simdjson::SUCCESS) return fail(f.Expected("a dependency", "a string"));
      d.deps.push_back(s);
    }
    return visitor.OnDeps(d);
  }
  if (kind == "w") {
    DaskWorkerRecord w;
    if (auto e = f.String(1, "address", &w.address)) return fail(e);
    if (auto e = f.String(2, "host", &w.host, true)) return fail(e);
    if (!f.IsNull(3)) {
      if (auto e = f.Integer(3, "pid", &w.pid)) return fail(e);
    }
    if (auto e = f.String(4, "name", &w.name, true)) return fail(e);
    if (!f.IsNull(5)) {
      if (auto e = f.Integer(5, "nthreads", &w.nthreads)) return fail(e);
    }
    if (auto e = f.OptNumber(6, "time_delay", &w.time_delay)) return fail(e);
    if (auto e = f.Number(7, "t", &w.t)) return fail(e);
    return visitor.OnWorker(w);
  }
  if (kind == "x") {
    DaskWorkerLeftRecord x;
    if (auto e = f.String(1, "address", &x.address)) return fail(e);
    if (auto e = f.OptNumber(2, "time_delay", &x.time_delay)) return fail(e);
    if (auto e = f.Number(3, "t", &x.t)) return fail(e);
    return visitor.OnWorkerLeft(x);
  }
  if (kind == "n") {
    int64_t n = 0;
    if (auto e = f.Integer(1, "count", &n)) return fail(e);
    return visitor.OnDropped(n);
  }
  if (kind == "e") {
    double t = 0;
    if (auto e = f.Number(1, "t", &t)) return fail(e);
    return visitor.OnEnd(t);
  }
  return visitor.OnUnknown(kind);
}

}  // namespace

bool LooksLikeDaskLog(std::string_view head) {
  size_t eol = head.find('\n');
  std::string_view first = TrimSpace(head.substr(0, eol));
  if (first.empty() || first.front() != '{') return false;
  // The plugin writes the format first; allow any order within the first line.
  return first.find("\"format\"") != std::string_view::npos &&
         first.find(fmt::format("\"{}\"", kDaskLogFormat)) != std::string_view::npos;
}

DaskReadOutcome ReadDaskLog(TraceInput& input, const std::string& name, DaskLogVisitor& visitor, int64_t max_lines) {
  DaskReadOutcome out;
  dom::parser parser;
  std::string line;
  std::string repaired;  // a line simdjson refused, repaired (importers/json_text.h)
  bool header_seen = false;
  bool too_long = false;
  auto line_error = [&](int64_t number, std::string_view what) {
    return Corrupt("{}: line {}: {}", name, number, EscapeControl(what));
  };
  // Handles one complete line (number out.lines + 1). Returns false to stop.
  auto handle = [&](std::string_view text) -> bool {
    int64_t number = out.lines + 1;
    visitor.line = number;
    if (too_long) {
      out.status = line_error(number, fmt::format("longer than {} bytes", kMaxLineBytes));
      return false;
    }
    std::string_view trimmed = TrimSpace(text);
    if (trimmed.empty()) {
      ++out.lines;
      return true;
    }
    // The parser reads up to kLinePadding bytes past the end: keep them allocated.
    if (line.capacity() < line.size() + kLinePadding) line.reserve(line.size() + kLinePadding);
    dom::element doc;
    auto e = parser.parse(line.data(), line.size(), false).get(doc);
    if ((e == simdjson::UTF8_ERROR || e == simdjson::STRING_ERROR) && RepairJsonText(line, &repaired)) {
      // Bytes that are not UTF-8 or a lone surrogate escape (Python writes one for a name it
      // decoded with surrogateescape): the line is read again repaired, each such character
      // U+FFFD, the rest of it as written.
      const size_t len = repaired.size();
      repaired.resize(len + kLinePadding, '\0');
      e = parser.parse(repaired.data(), len, false).get(doc);
    }
    if (e != simdjson::SUCCESS) {
      out.status = line_error(number, fmt::format("not JSON ({})", simdjson::error_message(e)));
      return false;
    }
    std::optional<LineError> error;
    if (!header_seen) {
      DaskHeader header;
      error = ParseHeader(doc, &header);
      if (!error) {
        header_seen = true;
        if (Status st = visitor.OnHeader(header); !st.ok()) {
          out.status = st;
          return false;
        }
      }
    } else if (Status st = DeliverRecord(doc, visitor, &error); !st.ok()) {
      out.status = st;
      return false;
    }
    if (error) {
      out.status = line_error(number, error->what);
      return false;
    }
    ++out.lines;
    ++out.records;
    return true;
  };
  while (max_lines < 0 || out.lines < max_lines) {
    auto chunk = input.Next();
    if (!chunk.ok()) {
      out.status = chunk.status();
      return out;
    }
    if (chunk->empty()) break;
    std::string_view rest(chunk->data(), chunk->size());
    while (!rest.empty()) {
      size_t eol = rest.find('\n');
      std::string_view part = rest.substr(0, eol);
      if (!too_long) {
        if (line.size() + part.size() > kMaxLineBytes) {
          too_long = true;
          line.clear();
          line.shrink_to_fit();
        } else {
          line.append(part);
        }
      }
      if (eol == std::string_view::npos) break;
      rest.remove_prefix(eol + 1);
      bool go_on = handle(line);
      line.clear();
      too_long = false;
      if (!go_on) return out;
      if (max_lines >= 0 && out.lines >= max_lines) return out;
    }
  }
  if (max_lines >= 0 && out.lines >= max_lines) return out;
  // The last line has no newline: a line cut short unless it parses.
  if (!line.empty() || too_long) {
    if (!handle(line)) return out;
  }
  if (!header_seen && out.status.ok()) out.status = Corrupt("{}: line 1: empty Dask task log", name);
  return out;
}

}  // namespace grademl::importers::dask
