#include "store/postgres/pg_redact.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>

namespace grademl::store::pg {
namespace {

bool IsSpace(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// password, sslpassword, and any other keyword naming one.
bool IsPasswordKey(std::string_view key) { return Lower(key).ends_with("password"); }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// %XX sequences decoded; a malformed one kept as written.
std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

void AddSecret(std::vector<std::string>& secrets, std::string_view written, std::string decoded) {
  if (!written.empty()) secrets.emplace_back(written);
  if (!decoded.empty() && decoded != written) secrets.push_back(std::move(decoded));
}

// --- URIs: scheme://[user[:password]@][host[:port][,...]][/dbname][?key=value&...] ---------

struct UriParts {
  std::string_view before_query;  // scheme:// up to the '?'
  std::string_view query;         // after the '?'
  bool has_query = false;
  // In before_query: [cut_begin, cut_end) is dropped from the shown location (":password"),
  // and each of `starred` is shown as ***.
  size_t cut_begin = 0, cut_end = 0;
  std::vector<std::pair<size_t, size_t>> starred;
};

// Where a URI's part after "scheme://" starts ("scheme:" and slashes, for a misspelt one:
// postgresql:/u:pw@h/db); npos for text that is no URI (key=value words).
size_t UriStart(std::string_view location) {
  if (size_t at = location.find("://"); at != std::string_view::npos) return at + 3;
  size_t colon = location.find(':');
  if (colon == std::string_view::npos || colon == 0 || !std::isalpha(static_cast<unsigned char>(location[0]))) {
    return std::string_view::npos;
  }
  for (char c : location.substr(0, colon)) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '.' && c != '-') return std::string_view::npos;
  }
  size_t start = colon + 1;
  while (start < location.size() && location[start] == '/') ++start;
  return start;
}

UriParts SplitUri(std::string_view location, std::vector<std::string>* secrets) {
  UriParts u;
  const size_t start = UriStart(location);
  const size_t q = location.find('?', start);
  u.before_query = location.substr(0, q);
  if (q != std::string_view::npos) {
    u.query = location.substr(q + 1);
    u.has_query = true;
  }
  std::string_view rest = location.substr(start);
  std::string_view body = u.before_query.substr(start);
  // The user information as libpq reads it: up to the first '@' before any '/'.
  size_t i = 0;
  while (i < rest.size() && rest[i] != '@' && rest[i] != '/') ++i;
  if (i < rest.size() && rest[i] == '@' && secrets != nullptr) {
    std::string_view user_info = rest.substr(0, i);
    if (size_t colon = user_info.find(':'); colon != std::string_view::npos) {
      std::string_view password = user_info.substr(colon + 1);
      AddSecret(*secrets, password, PercentDecode(password));
    }
  }
  // And as it may have been meant: up to the last '@' before the query.
  if (size_t at = body.rfind('@'); at != std::string_view::npos) {
    size_t colon = body.find(':');
    if (colon < at) {
      u.cut_begin = start + colon;
      u.cut_end = start + at;
      std::string_view password = body.substr(colon + 1, at - colon - 1);
      if (secrets != nullptr) AddSecret(*secrets, password, PercentDecode(password));
    }
  } else {
    // No user information: a port that is not a number may be a password whose '@' is
    // missing (u:s3cret/db).
    std::string_view hosts = body.substr(0, body.find('/'));
    size_t begin = 0;
    while (begin <= hosts.size()) {
      size_t end = std::min(hosts.find(',', begin), hosts.size());
      std::string_view host = hosts.substr(begin, end - begin);
      size_t colon = host.starts_with("[") ? host.find("]:") : host.find(':');
      if (colon != std::string_view::npos) {
        size_t port_begin = colon + (host.starts_with("[") ? 2 : 1);
        std::string_view port = host.substr(port_begin);
        if (!port.empty() && port.find_first_not_of("0123456789") != std::string_view::npos) {
          u.starred.push_back({start + begin + port_begin, start + end});
          if (secrets != nullptr) AddSecret(*secrets, port, PercentDecode(port));
        }
      }
      begin = end + 1;
    }
  }
  if (secrets != nullptr) {
    size_t begin = 0;
    while (u.has_query && begin <= u.query.size()) {
      size_t end = std::min(u.query.find('&', begin), u.query.size());
      std::string_view param = u.query.substr(begin, end - begin);
      size_t eq = param.find('=');
      if (eq != std::string_view::npos && IsPasswordKey(PercentDecode(param.substr(0, eq)))) {
        std::string_view value = param.substr(eq + 1);
        AddSecret(*secrets, value, PercentDecode(value));
      }
      begin = end + 1;
    }
  }
  return u;
}

std::string RedactUri(std::string_view location) {
  UriParts u = SplitUri(location, nullptr);
  std::string out;
  for (size_t i = 0; i < u.before_query.size();) {
    if (u.cut_end > u.cut_begin && i == u.cut_begin) {
      i = u.cut_end;
      continue;
    }
    auto star = std::find_if(u.starred.begin(), u.starred.end(), [&](const auto& s) { return s.first == i; });
    if (star != u.starred.end()) {
      out += "***";
      i = star->second;
      continue;
    }
    out += u.before_query[i++];
  }
  if (u.has_query) {
    std::string kept;
    size_t begin = 0;
    while (begin <= u.query.size()) {
      size_t end = std::min(u.query.find('&', begin), u.query.size());
      std::string_view param = u.query.substr(begin, end - begin);
      size_t eq = param.find('=');
      if (eq == std::string_view::npos || !IsPasswordKey(PercentDecode(param.substr(0, eq)))) {
        if (!kept.empty()) kept += '&';
        kept += param;
      }
      begin = end + 1;
    }
    if (!kept.empty()) out += "?" + kept;
  }
  return out;
}

// --- key=value words, as libpq's conninfo_parse reads them ----------------------------------

struct Word {
  size_t begin = 0, end = 0;  // the whole word in the text
  bool has_value = false;     // key=value (else a bare word: a malformed string)
  std::string key;
  std::string_view value;     // as written, quotes included
  std::string decoded;        // quotes and backslashes undone
};

std::vector<Word> SplitWords(std::string_view s) {
  std::vector<Word> words;
  size_t i = 0;
  while (true) {
    while (i < s.size() && IsSpace(s[i])) ++i;
    if (i >= s.size()) break;
    Word w;
    w.begin = i;
    while (i < s.size() && s[i] != '=' && !IsSpace(s[i])) ++i;
    w.key = std::string(s.substr(w.begin, i - w.begin));
    size_t after_key = i;
    while (i < s.size() && IsSpace(s[i])) ++i;
    if (i >= s.size() || s[i] != '=') {
      w.end = after_key;
      i = after_key;
      words.push_back(std::move(w));
      continue;
    }
    ++i;
    while (i < s.size() && IsSpace(s[i])) ++i;
    size_t value_begin = i;
    if (i < s.size() && s[i] == '\'') {
      ++i;
      while (i < s.size()) {
        if (s[i] == '\\' && i + 1 < s.size()) {
          w.decoded += s[i + 1];
          i += 2;
        } else if (s[i] == '\'') {
          ++i;
          break;
        } else {
          w.decoded += s[i++];
        }
      }
    } else {
      while (i < s.size() && !IsSpace(s[i])) {
        if (s[i] == '\\' && i + 1 < s.size()) {
          w.decoded += s[i + 1];
          i += 2;
        } else {
          w.decoded += s[i++];
        }
      }
    }
    w.has_value = true;
    w.value = s.substr(value_begin, i - value_begin);
    w.end = i;
    words.push_back(std::move(w));
  }
  return words;
}

// Which words are secret: password values, and the bare words after an unquoted one.
std::vector<bool> SecretWords(const std::vector<Word>& words) {
  std::vector<bool> secret(words.size(), false);
  bool after_password = false;
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i].has_value) {
      after_password = IsPasswordKey(words[i].key);
      secret[i] = after_password;
    } else {
      secret[i] = after_password;
    }
  }
  return secret;
}

bool IsUri(std::string_view location) { return UriStart(location) != std::string_view::npos; }

}  // namespace

std::vector<std::string> ConnectionSecrets(std::string_view location) {
  std::vector<std::string> secrets;
  if (IsUri(location)) {
    SplitUri(location, &secrets);
  } else {
    std::vector<Word> words = SplitWords(location);
    std::vector<bool> secret = SecretWords(words);
    for (size_t i = 0; i < words.size(); ++i) {
      if (!secret[i]) continue;
      if (words[i].has_value) {
        AddSecret(secrets, words[i].value, words[i].decoded);
      } else {
        AddSecret(secrets, location.substr(words[i].begin, words[i].end - words[i].begin), "");
      }
    }
  }
  std::sort(secrets.begin(), secrets.end());
  secrets.erase(std::unique(secrets.begin(), secrets.end()), secrets.end());
  return secrets;
}

std::string RedactPassword(std::string_view location) {
  if (IsUri(location)) return RedactUri(location);
  std::vector<Word> words = SplitWords(location);
  std::vector<bool> secret = SecretWords(words);
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (secret[i]) continue;
    if (!out.empty()) out += ' ';
    out += location.substr(words[i].begin, words[i].end - words[i].begin);
  }
  return out;
}

std::string RedactMessage(std::string_view message, std::string_view location,
                          std::vector<std::string> more_secrets) {
  std::vector<std::string> secrets = ConnectionSecrets(location);
  if (const char* env = std::getenv("PGPASSWORD"); env != nullptr && env[0] != '\0') secrets.emplace_back(env);
  for (std::string& s : more_secrets) {
    if (!s.empty()) secrets.push_back(std::move(s));
  }
  auto holds_secret = [&](std::string_view part) {
    return std::any_of(secrets.begin(), secrets.end(), [&](const std::string& s) {
      return part.find(s) != std::string_view::npos || s.find(part) != std::string::npos;
    });
  };
  std::string out;
  size_t i = 0;
  while (i < message.size()) {
    size_t open = message.find('"', i);
    size_t close = open == std::string_view::npos ? open : message.find('"', open + 1);
    if (close == std::string_view::npos) {
      out += message.substr(i);
      break;
    }
    std::string_view part = message.substr(open + 1, close - open - 1);
    out += message.substr(i, open + 1 - i);
    if (part.empty() || !holds_secret(part)) {
      out += part;
    } else if (part == location) {
      std::string shown = RedactPassword(location);
      out += holds_secret(shown) ? "***" : shown;
    } else {
      out += "***";
    }
    out += '"';
    i = close + 1;
  }
  // Secrets outside quotes (a message that quotes otherwise, a secret holding a quote).
  for (const std::string& s : secrets) {
    if (s.size() < 4) continue;
    for (size_t at = out.find(s); at != std::string::npos; at = out.find(s, at + 3)) out.replace(at, s.size(), "***");
  }
  return out;
}

}  // namespace grademl::store::pg
