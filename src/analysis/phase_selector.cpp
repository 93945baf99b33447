#include "analysis/phase_selector.h"

#include <charconv>


namespace grademl::analysis {
namespace {

// Matches one bracket expression starting at glob[i] == '['. Returns the index just past
// its ']' and sets *matched, or npos when the bracket is not closed.
size_t MatchBracket(std::string_view glob, size_t i, char c, bool* matched) {
  size_t j = i + 1;
  bool negate = false;
  if (j < glob.size() && (glob[j] == '!' || glob[j] == '^')) {
    negate = true;
    ++j;
  }
  bool found = false;
  bool first = true;
  while (j < glob.size() && (glob[j] != ']' || first)) {
    first = false;
    char lo = glob[j];
    if (lo == '\\' && j + 1 < glob.size()) lo = glob[++j];
    char hi = lo;
    if (j + 2 < glob.size() && glob[j + 1] == '-' && glob[j + 2] != ']') {
      hi = glob[j + 2];
      if (hi == '\\' && j + 3 < glob.size()) {
        hi = glob[j + 3];
        ++j;
      }
      j += 2;
    }
    if (lo <= c && c <= hi) found = true;
    ++j;
  }
  if (j >= glob.size()) return std::string_view::npos;
  *matched = found != negate;
  return j + 1;
}

// The position of the first unclosed '[' in glob, or npos.
size_t UnclosedBracket(std::string_view glob) {
  for (size_t i = 0; i < glob.size(); ++i) {
    if (glob[i] == '\\') {
      ++i;
    } else if (glob[i] == '[') {
      bool unused;
      size_t end = MatchBracket(glob, i, '\0', &unused);
      if (end == std::string_view::npos) return i;
      i = end - 1;
    }
  }
  return std::string_view::npos;
}

}  // namespace

bool GlobMatch(std::string_view glob, std::string_view text) {
  // Iterative matching with one backtrack point: the last '*' seen.
  size_t g = 0, t = 0;
  size_t star_g = std::string_view::npos, star_t = 0;
  while (t < text.size()) {
    if (g < glob.size()) {
      char p = glob[g];
      if (p == '*') {
        star_g = g++;
        star_t = t;
        continue;
      }
      if (p == '?') {
        ++g;
        ++t;
        continue;
      }
      if (p == '[') {
        bool matched = false;
        size_t next = MatchBracket(glob, g, text[t], &matched);
        if (next != std::string_view::npos) {
          if (matched) {
            g = next;
            ++t;
            continue;
          }
        } else if (text[t] == '[') {  // unclosed: a literal '['
          ++g;
          ++t;
          continue;
        }
      } else {
        if (p == '\\' && g + 1 < glob.size()) p = glob[g + 1];
        if (p == text[t]) {
          g += glob[g] == '\\' && g + 1 < glob.size() ? 2 : 1;
          ++t;
          continue;
        }
      }
    }
    if (star_g == std::string_view::npos) return false;
    g = star_g + 1;
    t = ++star_t;
  }
  while (g < glob.size() && glob[g] == '*') ++g;
  return g == glob.size();
}

bool PhaseSelector::Matches(const model::Phase& phase) const {
  switch (kind) {
    case Kind::kId: return phase.id == id;
    case Kind::kType: return GlobMatch(glob, phase.type) || GlobMatch(glob, phase.leaf_type());
    case Kind::kName: return GlobMatch(glob, phase.name);
  }
  return false;
}

StatusOr<PhaseSelector> ParsePhaseSelector(std::string_view text, size_t offset) {
  PhaseSelector sel;
  sel.text = std::string(text);
  if (text.empty()) return InvalidArgument("expected a phase name, type:GLOB or #ID (at character {})", offset + 1);
  if (text[0] == '#') {
    std::string_view digits = text.substr(1);
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), sel.id);
    if (digits.empty() || ec != std::errc() || ptr != digits.data() + digits.size() || sel.id <= 0) {
      size_t bad = ec == std::errc() && ptr != digits.data() + digits.size() ? static_cast<size_t>(ptr - text.data())
                                                                             : 1;
      return InvalidArgument("expected a phase id after '#' (at character {})", offset + bad + 1);
    }
    sel.kind = PhaseSelector::Kind::kId;
    return sel;
  }
  size_t glob_at = 0;
  if (text.starts_with("type:")) {
    sel.kind = PhaseSelector::Kind::kType;
    glob_at = 5;
    if (text.size() == glob_at) {
      return InvalidArgument("expected a type glob after 'type:' (at character {})", offset + glob_at + 1);
    }
  }
  sel.glob = std::string(text.substr(glob_at));
  if (size_t bad = UnclosedBracket(sel.glob); bad != std::string_view::npos) {
    return InvalidArgument("unclosed '[' in the glob (at character {})", offset + glob_at + bad + 1);
  }
  return sel;
}

}  // namespace grademl::analysis
