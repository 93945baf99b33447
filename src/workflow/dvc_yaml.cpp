// DVC's pipeline format (dvc.yaml): `stages:` with cmd/deps/outs/params/metrics/plots/wdir,
// `foreach`/`do` and `matrix` stages, and `${...}` interpolation from params.yaml, `vars:`
// and the foreach/matrix item. What DVC only uses for caching (cache, persist, frozen, ...)
// is accepted and ignored: GradeML runs the commands, it does not version data.
#include <cctype>
#include <filesystem>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "workflow/spec_yaml_support.h"

namespace grademl::workflow::spec_internal {
namespace {

struct ValueField;

// A YAML value detached from yaml-cpp (whose nodes share state on assignment): the
// interpolation context (params.yaml, vars) and the foreach/matrix items. The members that
// touch `fields` are defined after ValueField, once both types are complete (clang with
// libstdc++ refuses a std::pair of the incomplete Value).
struct Value {
  enum class Kind { kNull, kScalar, kList, kMap };
  Kind kind = Kind::kNull;
  std::string text;                                     // kScalar, as written
  bool plain = true;                                    // kScalar: unquoted (so `true` is a boolean)
  std::vector<Value> items;                             // kList
  std::vector<ValueField> fields;                       // kMap, in file order
  std::unordered_map<std::string, size_t> field_index;  // kMap: key -> position in `fields`

  // The destructor is defined after the class: with clang and libstdc++, an implicit one
  // needs std::pair<std::string, Value> complete while Value is still incomplete.
  Value() = default;
  ~Value();
  Value(const Value&) = default;
  Value(Value&&) = default;
  Value& operator=(const Value&) = default;
  Value& operator=(Value&&) = default;

  bool composite() const { return kind == Kind::kList || kind == Kind::kMap; }

  // Lookups and updates take constant time: a params file may have tens of thousands of keys.
  const Value* Find(const std::string& key) const;
  Value* Find(const std::string& key);
  // Sets a field of a mapping, replacing one of the same name.
  void Set(const std::string& key, Value v);
  // Merges a mapping into this one: nested mappings merge, anything else is replaced.
  void Merge(const Value& other);

  static Value Map();
  static Value Scalar(std::string text, bool plain = false);
  static Value FromYaml(const YAML::Node& node);
};

// One field of a mapping (named like std::pair's members, for structured bindings).
struct ValueField {
  std::string first;
  Value second;
};

Value Value::Map() {
  Value v;
  v.kind = Kind::kMap;
  return v;
}
Value Value::Scalar(std::string text, bool plain) {
  Value v;
  v.kind = Kind::kScalar;
  v.text = std::move(text);
  v.plain = plain;
  return v;
}
const Value* Value::Find(const std::string& key) const {
  auto it = field_index.find(key);
  return it == field_index.end() ? nullptr : &fields[it->second].second;
}
Value* Value::Find(const std::string& key) {
  auto it = field_index.find(key);
  return it == field_index.end() ? nullptr : &fields[it->second].second;
}
void Value::Set(const std::string& key, Value v) {
  auto [it, inserted] = field_index.emplace(key, fields.size());
  if (inserted) {
    fields.push_back(ValueField{key, std::move(v)});
  } else {
    fields[it->second].second = std::move(v);
  }
}
void Value::Merge(const Value& other) {
  for (const auto& [k, v] : other.fields) {
    Value* mine = Find(k);
    if (mine && mine->kind == Kind::kMap && v.kind == Kind::kMap) {
      mine->Merge(v);
    } else {
      Set(k, v);
    }
  }
}
Value Value::FromYaml(const YAML::Node& node) {
  Value v;
  switch (node.Type()) {
    case YAML::NodeType::Scalar: return Scalar(node.Scalar(), node.Tag() == "?");
    case YAML::NodeType::Sequence:
      v.kind = Kind::kList;
      for (const YAML::Node& item : node) v.items.push_back(FromYaml(item));
      return v;
    case YAML::NodeType::Map:
      v.kind = Kind::kMap;
      for (const MapEntry& e : MapEntries(node)) v.Set(e.key.Scalar(), FromYaml(e.value));
      return v;
    default: return v;
  }
}

Value::~Value() = default;

bool IsTrue(const Value& v) {
  return v.kind == Value::Kind::kScalar && v.plain && (v.text == "true" || v.text == "True" || v.text == "TRUE");
}
bool IsFalse(const Value& v) {
  return v.kind == Value::Kind::kScalar && v.plain && (v.text == "false" || v.text == "False" || v.text == "FALSE");
}

// A scalar as DVC prints it in an interpolation: booleans in lower case, null as None.
std::string ToText(const Value& v) {
  if (IsTrue(v)) return "true";
  if (IsFalse(v)) return "false";
  if (v.kind == Value::Kind::kNull) return "None";
  return v.text;
}

// Python's shlex.quote, which DVC applies to strings unpacked from a mapping into `cmd`.
std::string ShellQuote(const std::string& s) {
  if (s.empty()) return "''";
  bool safe = true;
  for (unsigned char c : s) {
    if (!(std::isalnum(c) || std::string_view("@%+=:,./-_").find(static_cast<char>(c)) != std::string_view::npos)) {
      safe = false;
      break;
    }
  }
  if (safe) return s;
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\"'\"'";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// Where a value is read, for error messages: the stage ("stage 'x': ", or "" outside
// stages) and the line.
struct Where {
  std::string stage;  // "stage 'x': " or ""
  int line = 0;
};

// What one dvc.yaml may generate (docs/workflows.md): the YAML itself is bounded by
// ReadYamlFile, but foreach and matrix multiply it, and every instance copies its
// interpolation context.
constexpr size_t kMaxInstancesPerStage = 10'000;    // foreach items, matrix combinations
constexpr size_t kMaxGeneratedSteps = 50'000;       // foreach and matrix instances in all
constexpr size_t kMaxInterpolatedBytes = 1 << 20;   // one string after interpolation
constexpr size_t kMaxCopiedNodes = 20'000'000;      // values copied into scopes, in all
constexpr size_t kMaxCopiedBytes = 256 << 20;       // text copied into scopes and steps, in all

// Reads one dvc.yaml. Every string of a stage is interpolated before it is used.
class DvcReader {
 public:
  explicit DvcReader(const std::string& path) : file_(path), dir_(DirectoryOf(path)) {}

  StatusOr<ParsedSpec> Read(const YAML::Node& root) {
    ParsedSpec parsed;
    parsed.spec.path = file_;
    parsed.spec.format = "dvc";
    parsed.spec.name = std::filesystem::path(dir_).filename().string();
    if (!root.IsMap()) {
      return Error(root.IsNull() ? 0 : LineOf(root),
                   fmt::format("a dvc.yaml must be a mapping with 'stages:', not {}", KindName(root)));
    }
    Value context = Value::Map();
    GRADEML_RETURN_IF_ERROR(LoadDefaultParams(&context));
    YAML::Node stages_key, stages;
    std::unordered_set<std::string> seen;
    for (const MapEntry& e : MapEntries(root)) {
      const std::string key = e.key.Scalar();
      if (!seen.insert(key).second) return Error(LineOf(e.key), fmt::format("duplicate key '{}'", key));
      if (key == "stages") {
        stages_key.reset(e.key);
        stages.reset(e.value);
      } else if (key == "vars") {
        GRADEML_RETURN_IF_ERROR(LoadVars(e.key, e.value, dir_, &context));
      } else if (key != "plots" && key != "metrics" && key != "params" && key != "artifacts" && key != "datasets") {
        return Error(LineOf(e.key),
                     fmt::format("unknown top-level key '{}' (expected stages, vars, params, metrics, plots, "
                                 "artifacts, datasets)",
                                 key));
      }
    }
    if (stages.IsNull() || (stages.IsMap() && stages.size() == 0)) return Error(LineOf(stages_key), "no stages");
    if (!stages.IsMap()) {
      return Error(LineOf(stages),
                   fmt::format("'stages' must be a mapping of stage name to stage, not {}", KindName(stages)));
    }
    for (const MapEntry& e : MapEntries(stages)) {
      if (!e.key.IsScalar() || e.key.Scalar().empty()) {
        return Error(LineOf(e.key), "a stage name must be a non-empty string");
      }
      GRADEML_RETURN_IF_ERROR(ReadEntry(e.key.Scalar(), LineOf(e.key), e.value, context, &parsed));
    }
    if (parsed.spec.steps.empty()) return Error(LineOf(stages_key), "no stages (every foreach and matrix is empty)");
    return parsed;
  }

 private:
  Status Error(int line, const std::string& reason) const { return SpecError(file_, line, reason); }

  // --- the expansion budget ---

  // Counts a copy of `v` (a scope, an item) against the budget; an error once it is spent.
  Status Spend(const Value& v, const Where& where) const {
    std::vector<const Value*> todo{&v};
    size_t nodes = 0, bytes = 0;
    while (!todo.empty()) {
      const Value* at = todo.back();
      todo.pop_back();
      ++nodes;
      bytes += at->text.size();
      for (const Value& item : at->items) todo.push_back(&item);
      for (const auto& [k, f] : at->fields) {
        bytes += k.size();
        todo.push_back(&f);
      }
    }
    copied_nodes_ += nodes;
    return SpendText(bytes, where);
  }
  Status SpendText(size_t bytes, const Where& where) const {
    copied_bytes_ += bytes;
    if (copied_nodes_ > kMaxCopiedNodes || copied_bytes_ > kMaxCopiedBytes) {
      return Error(where.line, fmt::format("{}expanding the stages would copy more than {} values or {} MiB "
                                           "(foreach, matrix and vars multiply the parameters)",
                                           where.stage, kMaxCopiedNodes, kMaxCopiedBytes >> 20));
    }
    return Status::Ok();
  }
  // Counts `count` more generated steps (foreach or matrix instances) of one stage.
  Status Generate(size_t count, const Where& where) const {
    if (count > kMaxInstancesPerStage) {
      return Error(where.line, fmt::format("{}generates {} steps; GradeML generates at most {} per stage",
                                           where.stage, count, kMaxInstancesPerStage));
    }
    generated_ += count;
    if (generated_ > kMaxGeneratedSteps) {
      return Error(where.line, fmt::format("{}the foreach and matrix stages generate more than {} steps in all",
                                           where.stage, kMaxGeneratedSteps));
    }
    return Status::Ok();
  }

  // --- variables ---

  // params.yaml next to dvc.yaml, when there is one, is always in the context.
  Status LoadDefaultParams(Value* context) const {
    const std::string params = (std::filesystem::path(file_).parent_path() / "params.yaml").string();
    std::error_code ec;
    if (!std::filesystem::is_regular_file(params, ec)) return Status::Ok();
    GRADEML_ASSIGN_OR_RETURN(YAML::Node node, ReadYamlFile(params));
    if (node.IsNull()) return Status::Ok();
    if (!node.IsMap()) {
      return SpecError(params, LineOf(node), fmt::format("parameters must be a mapping, not {}", KindName(node)));
    }
    context->Merge(Value::FromYaml(node));
    return Status::Ok();
  }

  // `vars:` is a list of inline mappings and of parameter files ("file.yaml" or
  // "file.yaml:key1,key2"), relative to `base_dir`; later entries win.
  Status LoadVars(const YAML::Node& key, const YAML::Node& vars, const std::string& base_dir, Value* context) const {
    if (vars.IsNull()) return Status::Ok();
    if (!vars.IsSequence()) {
      return Error(ValueLine(key, vars),
                   fmt::format("'vars' must be a list of mappings and file names, not {}", KindName(vars)));
    }
    for (const YAML::Node& entry : vars) {
      if (entry.IsMap()) {
        context->Merge(Value::FromYaml(entry));
      } else if (entry.IsScalar() && !entry.Scalar().empty()) {
        GRADEML_RETURN_IF_ERROR(LoadVarsFile(entry.Scalar(), LineOf(entry), base_dir, context));
      } else {
        return Error(LineOf(entry), fmt::format("'vars' entries must be mappings or file names, not {}",
                                                entry.IsScalar() ? "an empty string" : KindName(entry)));
      }
    }
    return Status::Ok();
  }

  Status LoadVarsFile(const std::string& entry, int line, const std::string& base_dir, Value* context) const {
    const size_t colon = entry.find(':');
    const std::string name = entry.substr(0, colon);
    std::string ext = std::filesystem::path(name).extension().string();
    if (ext != ".yaml" && ext != ".yml" && ext != ".json") {
      return Error(line, fmt::format("vars: cannot read '{}': GradeML reads YAML and JSON parameter files only", name));
    }
    const std::string path = ResolvePath(base_dir, name);
    StatusOr<YAML::Node> node = ReadYamlFile(path);
    if (!node.ok()) {
      if (node.status().code() == StatusCode::kInvalidArgument) return node.status();  // a syntax error in it
      return Error(line, "vars: " + node.status().message());
    }
    if (!node->IsNull() && !node->IsMap()) {
      return SpecError(path, LineOf(*node), fmt::format("parameters must be a mapping, not {}", KindName(*node)));
    }
    Value all = Value::FromYaml(*node);
    if (all.kind != Value::Kind::kMap) all = Value::Map();
    if (colon == std::string::npos) {
      context->Merge(all);
      return Status::Ok();
    }
    // Only the keys named: "file.yaml:a,b.c".
    Value chosen = Value::Map();
    size_t start = colon + 1;
    for (;;) {
      const size_t comma = entry.find(',', start);
      const std::string wanted =
          Trim(entry.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
      if (!wanted.empty()) {
        const std::vector<std::string> parts = SplitKey(wanted);
        const Value* v = Select(all, parts);
        if (!v) return Error(line, fmt::format("vars: '{}' is not in '{}'", wanted, name));
        Value* at = &chosen;
        for (size_t i = 0; i + 1 < parts.size(); ++i) {
          if (!at->Find(parts[i]) || at->Find(parts[i])->kind != Value::Kind::kMap) at->Set(parts[i], Value::Map());
          at = at->Find(parts[i]);
        }
        at->Set(parts.back(), *v);
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    context->Merge(chosen);
    return Status::Ok();
  }

  static std::string Trim(const std::string& s) {
    const size_t b = s.find_first_not_of(" \t");
    if (b == std::string::npos) return "";
    return s.substr(b, s.find_last_not_of(" \t") - b + 1);
  }

  // "a.b[0].c" -> {a, b, 0, c}; empty when the expression is malformed.
  static std::vector<std::string> SplitKey(const std::string& expr) {
    std::string s;
    for (char c : expr) {
      if (c == '[') {
        s += '.';
      } else if (c != ']') {
        s += c;
      }
    }
    std::vector<std::string> parts;
    size_t start = 0;
    for (;;) {
      const size_t dot = s.find('.', start);
      const std::string part = Trim(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
      if (part.empty()) return {};
      parts.push_back(part);
      if (dot == std::string::npos) break;
      start = dot + 1;
    }
    return parts;
  }

  static const Value* Select(const Value& root, const std::vector<std::string>& parts) {
    const Value* v = &root;
    for (const std::string& part : parts) {
      if (v->kind == Value::Kind::kMap) {
        v = v->Find(part);
      } else if (v->kind == Value::Kind::kList && !part.empty() &&
                 part.find_first_not_of("0123456789") == std::string::npos && part.size() < 9) {
        const size_t i = std::stoul(part);
        v = i < v->items.size() ? &v->items[i] : nullptr;
      } else {
        v = nullptr;
      }
      if (!v) return nullptr;
    }
    return v;
  }

  // --- interpolation ---

  // One `${...}` in a string: [begin, end) and the expression inside.
  struct Match {
    size_t begin = 0, end = 0;
    std::string expr;
  };
  static std::vector<Match> FindMatches(const std::string& s) {
    std::vector<Match> matches;
    size_t pos = 0;
    while ((pos = s.find("${", pos)) != std::string::npos) {
      if (pos > 0 && s[pos - 1] == '\\') {  // "\${" is a literal "${"
        pos += 2;
        continue;
      }
      const size_t close = s.find('}', pos + 2);
      if (close == std::string::npos) break;
      matches.push_back({pos, close + 1, s.substr(pos + 2, close - pos - 2)});
      pos = close + 1;
    }
    return matches;
  }

  StatusOr<const Value*> Lookup(const Value& context, const std::string& expr, const Where& where) const {
    const std::vector<std::string> parts = SplitKey(expr);
    if (parts.empty()) return Error(where.line, fmt::format("{}invalid expression '${{{}}}'", where.stage, expr));
    const Value* v = Select(context, parts);
    if (!v) return Error(where.line, fmt::format("{}'${{{}}}' is not defined", where.stage, expr));
    return v;
  }

  // Appends "--key value" arguments for a mapping, as DVC does for `${dict}` in `cmd`.
  Status Unpack(const Value& map, const std::string& prefix, const Where& where, std::string* out) const {
    for (const auto& [k, v] : map.fields) {
      const std::string key = prefix.empty() ? k : prefix + "." + k;
      if (v.kind == Value::Kind::kMap) {
        GRADEML_RETURN_IF_ERROR(Unpack(v, key, where, out));
        continue;
      }
      std::string arg;
      if (IsTrue(v)) {
        arg = "--" + key;
      } else if (IsFalse(v)) {
        continue;
      } else if (v.kind == Value::Kind::kList) {
        arg = "--" + key;
        for (const Value& item : v.items) {
          if (item.composite()) {
            return Error(where.line,
                         fmt::format("{}cannot unpack the nested list or mapping in '{}'", where.stage, key));
          }
          arg += " " + (item.kind == Value::Kind::kScalar ? ShellQuote(item.text) : ToText(item));
        }
      } else {
        arg = "--" + key + " " + (v.kind == Value::Kind::kScalar ? ShellQuote(v.text) : ToText(v));
      }
      *out += (out->empty() ? "" : " ") + arg;
    }
    return Status::Ok();
  }

  // Replaces every `${...}` of a string by its value. In `cmd`, a mapping becomes
  // "--key value" arguments; elsewhere only scalars can be interpolated.
  StatusOr<std::string> Interpolate(const std::string& s, const Value& context, const Where& where,
                                    bool in_cmd = false) const {
    const std::vector<Match> matches = FindMatches(s);
    std::string out;
    size_t pos = 0;
    for (const Match& m : matches) {
      GRADEML_ASSIGN_OR_RETURN(const Value* v, Lookup(context, m.expr, where));
      if (out.size() > kMaxInterpolatedBytes) {
        return Error(where.line, fmt::format("{}a string longer than {} MiB after interpolation", where.stage,
                                             kMaxInterpolatedBytes >> 20));
      }
      out += s.substr(pos, m.begin - pos);
      if (v->kind == Value::Kind::kMap && in_cmd) {
        std::string args;
        GRADEML_RETURN_IF_ERROR(Unpack(*v, "", where, &args));
        out += args;
      } else if (v->composite()) {
        return Error(where.line, fmt::format("{}cannot interpolate {} '${{{}}}' here", where.stage,
                                             v->kind == Value::Kind::kMap ? "a mapping" : "a list", m.expr));
      } else {
        out += ToText(*v);
      }
      pos = m.end;
    }
    out += s.substr(pos);
    if (out.size() > kMaxInterpolatedBytes) {
      return Error(where.line, fmt::format("{}a string longer than {} MiB after interpolation", where.stage,
                                           kMaxInterpolatedBytes >> 20));
    }
    // "\${" is a literal "${": drop the backslashes, in one pass.
    std::string unescaped;
    unescaped.reserve(out.size());
    for (size_t at = 0; at < out.size(); ++at) {
      if (out[at] == '\\' && out.compare(at + 1, 2, "${") == 0) continue;
      unescaped += out[at];
    }
    GRADEML_RETURN_IF_ERROR(SpendText(unescaped.size(), where));
    return unescaped;
  }

  // The data of a foreach or matrix: a string that is exactly "${x}" is the value of x
  // (which may be a list or mapping); other strings are interpolated.
  StatusOr<Value> ResolveData(const YAML::Node& node, const Value& context, const Where& where) const {
    Where here{where.stage, LineOf(node) ? LineOf(node) : where.line};
    if (node.IsScalar()) {
      const std::vector<Match> matches = FindMatches(node.Scalar());
      if (matches.size() == 1 && matches[0].begin == 0 && matches[0].end == node.Scalar().size()) {
        GRADEML_ASSIGN_OR_RETURN(const Value* v, Lookup(context, matches[0].expr, here));
        GRADEML_RETURN_IF_ERROR(Spend(*v, here));
        return *v;
      }
      GRADEML_ASSIGN_OR_RETURN(std::string text, Interpolate(node.Scalar(), context, here));
      return Value::Scalar(std::move(text), node.Tag() == "?");
    }
    Value v;
    if (node.IsSequence()) {
      v.kind = Value::Kind::kList;
      for (const YAML::Node& item : node) {
        GRADEML_ASSIGN_OR_RETURN(Value resolved, ResolveData(item, context, here));
        v.items.push_back(std::move(resolved));
      }
    } else if (node.IsMap()) {
      v.kind = Value::Kind::kMap;
      for (const MapEntry& e : MapEntries(node)) {
        GRADEML_ASSIGN_OR_RETURN(std::string key, Interpolate(e.key.Scalar(), context, here));
        GRADEML_ASSIGN_OR_RETURN(Value resolved, ResolveData(e.value, context, here));
        v.Set(key, std::move(resolved));
      }
    }
    return v;
  }

  // --- stages ---

  // A stage entry: plain, foreach/do, or matrix.
  Status ReadEntry(const std::string& name, int line, const YAML::Node& def, const Value& context,
                   ParsedSpec* parsed) const {
    const Where where{fmt::format("stage '{}': ", name), line};
    if (def.IsMap()) {
      YAML::Node foreach_key, foreach_node, do_node, matrix_key, matrix_node;
      bool has_foreach = false, has_do = false, has_matrix = false;
      std::unordered_set<std::string> seen;
      for (const MapEntry& e : MapEntries(def)) {
        const std::string& k = e.key.Scalar();
        if (!seen.insert(k).second) {
          return Error(LineOf(e.key), fmt::format("{}duplicate key '{}'", where.stage, k));
        }
        if (k == "foreach") {
          foreach_key.reset(e.key);
          foreach_node.reset(e.value);
          has_foreach = true;
        } else if (k == "do") {
          do_node.reset(e.value);
          has_do = true;
        } else if (k == "matrix") {
          matrix_key.reset(e.key);
          matrix_node.reset(e.value);
          has_matrix = true;
        }
      }
      if (has_foreach || has_do) {
        for (const MapEntry& e : MapEntries(def)) {
          const std::string& k = e.key.Scalar();
          if (k != "foreach" && k != "do") {
            return Error(LineOf(e.key),
                         fmt::format("{}unknown key '{}' next to 'foreach' (expected foreach, do)", where.stage, k));
          }
        }
        if (!has_foreach) return Error(line, where.stage + "'do' without 'foreach'");
        if (!has_do) return Error(line, where.stage + "'foreach' without 'do'");
        return ReadForeach(name, line, foreach_key, foreach_node, do_node, context, parsed);
      }
      if (has_matrix) return ReadMatrix(name, line, matrix_key, matrix_node, def, context, parsed);
    }
    return ReadStage(name, line, def, context, parsed);
  }

  // The name suffix of an item of a foreach over a list: its value, or its index when any
  // item of the list is a list or mapping (DVC's rule).
  Status ReadForeach(const std::string& name, int line, const YAML::Node& key, const YAML::Node& data,
                     const YAML::Node& body, const Value& context, ParsedSpec* parsed) const {
    const Where where{fmt::format("stage '{}': ", name), ValueLine(key, data)};
    GRADEML_ASSIGN_OR_RETURN(Value items, ResolveData(data, context, where));
    if (!items.composite()) {
      return Error(where.line, fmt::format("{}'foreach' must be a list or a mapping, not {}", where.stage,
                                           items.kind == Value::Kind::kNull ? "empty" : "a string"));
    }
    if (!body.IsMap()) {
      return Error(LineOf(body),
                   fmt::format("{}'do' must be a mapping (cmd, deps, outs, ...), not {}", where.stage, KindName(body)));
    }
    GRADEML_RETURN_IF_ERROR(
        Generate(items.kind == Value::Kind::kMap ? items.fields.size() : items.items.size(), where));
    GRADEML_RETURN_IF_ERROR(Spend(context, where));
    Value scope = context;
    if (items.kind == Value::Kind::kMap) {
      for (const auto& [k, v] : items.fields) {
        GRADEML_RETURN_IF_ERROR(Spend(v, where));
        scope.Set("item", v);
        scope.Set("key", Value::Scalar(k));
        GRADEML_RETURN_IF_ERROR(ReadStage(name + "@" + k, line, body, scope, parsed, Origin::kForeach));
      }
      return Status::Ok();
    }
    bool by_index = false;
    for (const Value& v : items.items) by_index = by_index || v.composite();
    for (size_t i = 0; i < items.items.size(); ++i) {
      const Value& v = items.items[i];
      GRADEML_RETURN_IF_ERROR(Spend(v, where));
      scope.Set("item", v);
      GRADEML_RETURN_IF_ERROR(ReadStage(name + "@" + (by_index ? std::to_string(i) : ToText(v)), line, body, scope,
                                        parsed, Origin::kForeach));
    }
    return Status::Ok();
  }

  // One instance per combination of the matrix's lists (the last list varies fastest),
  // named "stage@v1-v2" (a list or mapping value as "<key><index>", as DVC does).
  Status ReadMatrix(const std::string& name, int line, const YAML::Node& key, const YAML::Node& matrix,
                    const YAML::Node& def, const Value& context, ParsedSpec* parsed) const {
    const Where where{fmt::format("stage '{}': ", name), ValueLine(key, matrix)};
    if (!matrix.IsMap() || matrix.size() == 0) {
      return Error(where.line, fmt::format("{}'matrix' must be a mapping of name to list of values", where.stage));
    }
    std::vector<std::string> names;
    std::vector<Value> lists;
    for (const MapEntry& e : MapEntries(matrix)) {
      const Where at{where.stage, ValueLine(e.key, e.value)};
      GRADEML_ASSIGN_OR_RETURN(Value list, ResolveData(e.value, context, at));
      if (list.kind != Value::Kind::kList) {
        return Error(at.line, fmt::format("{}matrix '{}' must be a list of values", where.stage, e.key.Scalar()));
      }
      names.push_back(e.key.Scalar());
      lists.push_back(std::move(list));
    }
    for (const Value& list : lists) {
      if (list.items.empty()) return Status::Ok();
    }
    // The number of combinations, computed before any is made (and without overflow).
    size_t combinations = 1;
    for (const Value& list : lists) {
      if (combinations > kMaxInstancesPerStage / list.items.size()) {
        return Error(where.line, fmt::format("{}'matrix' has more than {} combinations; GradeML generates at most "
                                             "{} steps per stage",
                                             where.stage, kMaxInstancesPerStage, kMaxInstancesPerStage));
      }
      combinations *= list.items.size();
    }
    GRADEML_RETURN_IF_ERROR(Generate(combinations, where));
    GRADEML_RETURN_IF_ERROR(Spend(context, where));
    std::vector<size_t> index(lists.size(), 0);
    Value scope = context;
    for (;;) {
      Value item = Value::Map();
      std::string suffix;
      for (size_t i = 0; i < lists.size(); ++i) {
        const Value& v = lists[i].items[index[i]];
        GRADEML_RETURN_IF_ERROR(Spend(v, where));
        item.Set(names[i], v);
        suffix += (i ? "-" : "") + (v.composite() ? names[i] + std::to_string(index[i]) : ToText(v));
      }
      scope.Set("item", std::move(item));
      scope.Set("key", Value::Scalar(suffix));
      GRADEML_RETURN_IF_ERROR(ReadStage(name + "@" + suffix, line, def, scope, parsed, Origin::kMatrix));
      size_t i = lists.size();
      while (i > 0 && ++index[i - 1] == lists[i - 1].items.size()) index[--i] = 0;
      if (i == 0) break;
    }
    return Status::Ok();
  }

  // A list of paths, each a string or a single-key mapping {path: options}.
  Status ReadPaths(const YAML::Node& key, const YAML::Node& value, const Value& context, const Where& where,
                   std::vector<std::string>* out, std::vector<int>* lines,
                   std::vector<std::string>* persisted = nullptr) const {
    const std::string what = key.Scalar();
    if (value.IsNull()) return Status::Ok();
    if (!value.IsSequence()) {
      return Error(ValueLine(key, value),
                   fmt::format("{}'{}' must be a list, not {}", where.stage, what, KindName(value)));
    }
    for (const YAML::Node& entry : value) {
      const Where at{where.stage, LineOf(entry)};
      std::string written;
      if (entry.IsScalar()) {
        written = entry.Scalar();
      } else if (entry.IsMap() && entry.size() == 1 && entry.begin()->first.IsScalar() &&
                 (entry.begin()->second.IsMap() || entry.begin()->second.IsNull())) {
        written = entry.begin()->first.Scalar();
      } else {
        return Error(at.line, fmt::format("{}'{}' entries must be paths or single 'path: {{options}}' mappings, not {}",
                                          where.stage, what, KindName(entry)));
      }
      GRADEML_ASSIGN_OR_RETURN(std::string path, Interpolate(written, context, at));
      if (path.empty()) return Error(at.line, fmt::format("{}empty path in '{}'", where.stage, what));
      // `persist: true`: DVC keeps the out's old content when the stage runs, so the stage may
      // read it: an input no hash covers (docs/reuse.md).
      if (persisted != nullptr && entry.IsMap() && entry.begin()->second.IsMap()) {
        const YAML::Node persist = entry.begin()->second["persist"];
        if (persist && persist.IsScalar() && (persist.Scalar() == "true" || persist.Scalar() == "True")) {
          persisted->push_back(path);
        }
      }
      out->push_back(std::move(path));
      lines->push_back(at.line);
    }
    return Status::Ok();
  }

  // `params`: "key" (in params.yaml) or {file: [keys]} ({file: null}: the whole file).
  Status ReadParams(const YAML::Node& key, const YAML::Node& value, const Value& context, const Where& where,
                    std::vector<std::string>* out) const {
    if (value.IsNull()) return Status::Ok();
    if (!value.IsSequence()) {
      return Error(ValueLine(key, value),
                   fmt::format("{}'params' must be a list, not {}", where.stage, KindName(value)));
    }
    for (const YAML::Node& entry : value) {
      const Where at{where.stage, LineOf(entry)};
      if (entry.IsScalar()) {
        GRADEML_ASSIGN_OR_RETURN(std::string name, Interpolate(entry.Scalar(), context, at));
        out->push_back("params.yaml:" + name);
        continue;
      }
      if (!entry.IsMap()) {
        return Error(at.line, fmt::format("{}'params' entries must be names or 'file: [names]' mappings, not {}",
                                          where.stage, KindName(entry)));
      }
      for (const MapEntry& e : MapEntries(entry)) {
        GRADEML_ASSIGN_OR_RETURN(std::string file, Interpolate(e.key.Scalar(), context, at));
        const YAML::Node& names = e.value;
        if (names.IsNull() || (names.IsSequence() && names.size() == 0)) {
          out->push_back(file);
          continue;
        }
        if (!names.IsSequence()) {
          return Error(ValueLine(e.key, names), fmt::format("{}params of '{}' must be a list of names, not {}",
                                                            where.stage, file, KindName(names)));
        }
        for (const YAML::Node& n : names) {
          if (!n.IsScalar()) {
            return Error(LineOf(n),
                         fmt::format("{}params of '{}' must be names, not {}", where.stage, file, KindName(n)));
          }
          GRADEML_ASSIGN_OR_RETURN(std::string name, Interpolate(n.Scalar(), context, Where{at.stage, LineOf(n)}));
          out->push_back(file + ":" + name);
        }
      }
    }
    return Status::Ok();
  }

  StatusOr<std::string> ReadCmd(const YAML::Node& key, const YAML::Node& value, const Value& context,
                                const Where& where) const {
    std::string cmd;
    if (value.IsScalar()) {
      GRADEML_ASSIGN_OR_RETURN(cmd, Interpolate(value.Scalar(), context, Where{where.stage, LineOf(value)}, true));
    } else if (value.IsSequence()) {
      for (const YAML::Node& part : value) {
        if (!part.IsScalar()) {
          return Error(LineOf(part),
                       fmt::format("{}'cmd' list entries must be strings, not {}", where.stage, KindName(part)));
        }
        GRADEML_ASSIGN_OR_RETURN(std::string one,
                                 Interpolate(part.Scalar(), context, Where{where.stage, LineOf(part)}, true));
        if (one.find_first_not_of(" \t\r\n") == std::string::npos) continue;
        cmd += (cmd.empty() ? "" : " && ") + one;
      }
    } else if (!value.IsNull()) {
      return Error(LineOf(value),
                   fmt::format("{}'cmd' must be a string or a list of strings, not {}", where.stage, KindName(value)));
    }
    if (cmd.find_first_not_of(" \t\r\n") == std::string::npos) {
      return Error(ValueLine(key, value), where.stage + "'cmd' is empty");
    }
    return cmd;
  }

  // A plain stage, or one instance of a foreach/matrix (then `context` holds `item`, and
  // `key` for a mapping or matrix; a matrix instance's `def` is the stage with its `matrix`).
  enum class Origin { kPlain, kForeach, kMatrix };
  Status ReadStage(const std::string& name, int line, const YAML::Node& def, const Value& context, ParsedSpec* parsed,
                   Origin origin = Origin::kPlain) const {
    const Where where{fmt::format("stage '{}': ", name), line};
    if (!def.IsNull() && !def.IsMap()) {
      return Error(LineOf(def), fmt::format("{}a stage must be a mapping (cmd, deps, outs, ...), not {}", where.stage,
                                            KindName(def)));
    }
    StepSpec step;
    StepSource source;
    step.name = name;
    step.line = line;
    step.cwd = dir_;
    if (def.IsNull()) return Error(line, where.stage + "missing 'cmd'");

    // wdir and the stage's own vars come first: the other fields are read with them.
    const Value* scope = &context;
    Value with_vars;
    std::unordered_set<std::string> seen;
    for (const MapEntry& e : MapEntries(def)) {
      const std::string& k = e.key.Scalar();
      if (!seen.insert(k).second) {
        return Error(LineOf(e.key), fmt::format("{}duplicate key '{}'", where.stage, k));
      }
      if (k == "wdir") {
        if (!e.value.IsScalar() || e.value.Scalar().empty()) {
          return Error(ValueLine(e.key, e.value), where.stage + "'wdir' must be a non-empty string");
        }
        GRADEML_ASSIGN_OR_RETURN(std::string wdir,
                                 Interpolate(e.value.Scalar(), context, Where{where.stage, LineOf(e.value)}));
        step.cwd = ResolvePath(dir_, wdir);
      }
    }
    for (const MapEntry& e : MapEntries(def)) {
      if (e.key.Scalar() == "vars") {
        GRADEML_RETURN_IF_ERROR(Spend(context, Where{where.stage, LineOf(e.key)}));
        with_vars = context;
        GRADEML_RETURN_IF_ERROR(LoadVars(e.key, e.value, step.cwd, &with_vars));
        for (const char* generated : {"item", "key"}) {  // a foreach/matrix item wins over vars
          const Value* v = context.Find(generated);
          if (v && origin != Origin::kPlain) with_vars.Set(generated, *v);
        }
        scope = &with_vars;
      }
    }

    bool has_cmd = false;
    for (const MapEntry& e : MapEntries(def)) {
      const YAML::Node& key = e.key;
      const YAML::Node& value = e.value;
      const std::string& k = key.Scalar();
      if (origin == Origin::kMatrix && k == "matrix") continue;
      if (k == "cmd") {
        GRADEML_ASSIGN_OR_RETURN(step.cmd, ReadCmd(key, value, *scope, where));
        has_cmd = true;
      } else if (k == "deps") {
        GRADEML_RETURN_IF_ERROR(ReadPaths(key, value, *scope, where, &step.deps, &source.dep_lines));
      } else if (k == "outs" || k == "metrics" || k == "plots") {
        std::vector<std::string> persisted;
        GRADEML_RETURN_IF_ERROR(ReadPaths(key, value, *scope, where, &step.outs, &source.out_lines, &persisted));
        if (!persisted.empty() && step.not_reusable.empty()) {
          step.not_reusable = fmt::format("persist: true on out '{}'", persisted.front());
        }
      } else if (k == "always_changed") {
        if (value.IsScalar() && (value.Scalar() == "true" || value.Scalar() == "True")) {
          step.not_reusable = "always_changed: true";
        }
      } else if (k == "params") {
        GRADEML_RETURN_IF_ERROR(ReadParams(key, value, *scope, where, &step.params));
      } else if (k != "wdir" && k != "vars" && k != "desc" && k != "meta" && k != "frozen") {
        return Error(LineOf(key), fmt::format("{}unknown key '{}' (expected cmd, deps, outs, params, metrics, plots, "
                                              "wdir, vars, desc, meta, frozen, always_changed)",
                                              where.stage, k));
      }
    }
    if (!has_cmd) return Error(line, where.stage + "missing 'cmd'");
    parsed->spec.steps.push_back(std::move(step));
    parsed->sources.push_back(std::move(source));
    return Status::Ok();
  }

  std::string file_;
  std::string dir_;
  mutable size_t generated_ = 0;     // foreach and matrix instances so far
  mutable size_t copied_nodes_ = 0;  // the expansion budget spent so far
  mutable size_t copied_bytes_ = 0;
};

}  // namespace

StatusOr<ParsedSpec> ParseDvcSpec(const std::string& path, const YAML::Node& root) {
  return DvcReader(path).Read(root);
}

}  // namespace grademl::workflow::spec_internal
