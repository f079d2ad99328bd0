// log_format.cc — compiling nginx and Apache log formats and matching lines against them
// (see log_format.h for the field names and the matching rules).
#include "log_format.h"

#include <algorithm>
#include <cctype>
#include <optional>

#include "apache_directive.h"
#include "timestamps.h"
#include "text.h"

namespace ratelimit::sim {
namespace {

constexpr std::string_view kNginxCombined =
    R"($remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent")";
constexpr std::string_view kNginxMain =
    R"($remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$http_x_forwarded_for")";
constexpr std::string_view kApacheCommon = R"(%h %l %u %t "%r" %>s %b)";
constexpr std::string_view kApacheVhostCombined =
    R"(%v:%p %h %l %u %t "%r" %>s %O "%{Referer}i" "%{User-Agent}i")";

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

using text::trim_space;

// Unwraps "log_format NAME [escape=...] 'part' 'part';" (or just the quoted parts) to the
// format itself; anything else is returned as it is.
std::string unwrap_nginx(std::string_view spec) {
  std::string_view s = trim_space(spec);
  if (s.substr(0, 10) == "log_format") {
    s.remove_prefix(10);
    s = trim_space(s);
    while (!s.empty() && s.front() != '\'' && s.front() != '"') {  // the name, escape=
      const size_t sp = s.find_first_of(" \t");
      if (sp == std::string_view::npos) break;
      s = trim_space(s.substr(sp));
    }
  }
  if (!s.empty() && s.back() == ';') s = trim_space(s.substr(0, s.size() - 1));
  if (s.empty() || (s.front() != '\'' && s.front() != '"')) return std::string(s);
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const char q = s[i];
    if (q != '\'' && q != '"') return std::string(trim_space(spec));  // not a list of quoted parts
    size_t j = i + 1;
    while (j < s.size() && s[j] != q) {
      if (s[j] == '\\' && j + 1 < s.size()) ++j;
      out += s[j++];
    }
    if (j >= s.size()) return std::string(trim_space(spec));
    i = j + 1;
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])) != 0) ++i;
  }
  return out;
}

// Unwraps 'LogFormat "..." nickname' and resolves the config-file escapes \" \\ \t \n.
std::string unwrap_apache(std::string_view spec) {
  std::string_view s = trim_space(spec);
  bool quoted = false;
  if (s.substr(0, 9) == "LogFormat") {
    s = trim_space(s.substr(9));
  }
  if (!s.empty() && s.front() == '"') {
    quoted = true;
    s.remove_prefix(1);
  }
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      const char n = s[++i];
      out += n == 't' ? '\t' : n == 'n' ? '\n' : n;
      continue;
    }
    if (quoted && s[i] == '"') break;  // the closing quote; a nickname may follow
    out += s[i];
  }
  return out;
}

Status bad_spec(std::string_view spec, size_t pos, const std::string& why) {
  return Status::invalid_argument("--log-format: " + why + " at column " +
                                  std::to_string(pos + 1) + " of '" + printable(spec, 80) + "'");
}

}  // namespace

void AccessLogFormat::add_literal(std::string_view text) {
  if (text.empty()) return;
  if (!elements_.empty() && elements_.back().field < 0) {
    elements_.back().literal += text;
    return;
  }
  Element e;
  e.literal = std::string(text);
  elements_.push_back(std::move(e));
}

Status AccessLogFormat::add_field(std::string name) {
  if (!elements_.empty() && elements_.back().field >= 0) {
    return Status::invalid_argument("fields " + names_.back() + " and " + name +
                                    " touch: nothing in a line could tell where one ends");
  }
  Element e;
  e.field = static_cast<int>(names_.size());
  names_.push_back(std::move(name));
  elements_.push_back(std::move(e));
  return {};
}

void AccessLogFormat::finish() {
  for (size_t i = 0; i < elements_.size(); ++i) {
    Element& e = elements_[i];
    if (e.field < 0 || i == 0 || i + 1 >= elements_.size()) continue;
    const std::string& before = elements_[i - 1].literal;
    const std::string& after = elements_[i + 1].literal;
    e.quoted = !before.empty() && before.back() == '"' && !after.empty() && after.front() == '"';
  }
  required_ = elements_.size();
}

int AccessLogFormat::field_index(std::string_view name) const {
  for (size_t i = 0; i < names_.size(); ++i) {
    if (names_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

Result<AccessLogFormat> AccessLogFormat::compile(std::string_view spec) {
  const std::string_view s = trim_space(spec);
  // "combined $msec": a predefined layout with fields appended (strict, like any spec).
  for (const auto& [name, layout] : {std::pair{std::string_view("combined"), kNginxCombined},
                                     std::pair{std::string_view("main"), kNginxMain},
                                     std::pair{std::string_view("common"), kApacheCommon},
                                     std::pair{std::string_view("vhost_combined"), kApacheVhostCombined}}) {
    if (s.size() > name.size() + 1 && s.substr(0, name.size()) == name && s[name.size()] == ' ') {
      auto f = compile(std::string(layout) + std::string(s.substr(name.size())));
      if (f) f->description_ = std::string(s) + " (" + f->description_ + ")";
      return f;
    }
  }
  if (s == "combined") {
    auto f = nginx(kNginxCombined);
    f->description_ = "combined (" + std::string(kNginxCombined) + ")";
    f->allow_trailing_ = true;
    f->required_ = 11;  // through $body_bytes_sent: a common-format line matches too
    return f;
  }
  if (s == "main") {
    auto f = nginx(kNginxMain);
    f->description_ = "main (" + std::string(kNginxMain) + ")";
    f->allow_trailing_ = true;
    f->required_ = 11;
    return f;
  }
  if (s == "common") {
    auto f = apache(kApacheCommon);
    f->description_ = "common (" + std::string(kApacheCommon) + ")";
    f->allow_trailing_ = true;
    return f;
  }
  if (s == "vhost_combined") {
    auto f = apache(kApacheVhostCombined);
    f->description_ = "vhost_combined (" + std::string(kApacheVhostCombined) + ")";
    f->allow_trailing_ = true;
    return f;
  }
  const size_t dollar = s.find('$');
  const size_t percent = s.find('%');
  if (dollar == std::string_view::npos && percent == std::string_view::npos) {
    return Status::invalid_argument(
        "--log-format: '" + printable(spec, 80) +
        "' has no $variable (nginx) or %directive (Apache) and is not combined, main, common "
        "or vhost_combined");
  }
  return dollar < percent ? nginx(spec) : apache(spec);
}

AccessLogFormat AccessLogFormat::combined() { return *compile("main"); }

Result<AccessLogFormat> AccessLogFormat::nginx(std::string_view spec_in) {
  const std::string spec = unwrap_nginx(spec_in);
  AccessLogFormat f;
  f.description_ = spec;
  size_t lit_start = 0;
  size_t i = 0;
  while (i < spec.size()) {
    if (spec[i] != '$') {
      ++i;
      continue;
    }
    f.add_literal(std::string_view(spec).substr(lit_start, i - lit_start));
    const size_t at = i++;
    std::string name;
    if (i < spec.size() && spec[i] == '{') {
      const size_t close = spec.find('}', i);
      if (close == std::string::npos) return bad_spec(spec, at, "unterminated ${");
      name = spec.substr(i + 1, close - i - 1);
      i = close + 1;
    } else {
      while (i < spec.size() && is_name_char(spec[i])) name += spec[i++];
    }
    if (name.empty() || !std::all_of(name.begin(), name.end(), is_name_char)) {
      return bad_spec(spec, at, "'$' without a variable name");
    }
    if (auto st = f.add_field(std::move(name)); !st.is_ok()) return bad_spec(spec, at, st.message());
    lit_start = i;
  }
  f.add_literal(std::string_view(spec).substr(lit_start));
  if (f.names_.empty()) return bad_spec(spec, 0, "no $variable");
  f.finish();
  return f;
}

Result<AccessLogFormat> AccessLogFormat::apache(std::string_view spec_in) {
  const std::string spec = unwrap_apache(spec_in);
  AccessLogFormat f;
  f.description_ = spec;
  std::string lit;
  size_t i = 0;
  auto field = [&](std::string name, size_t at) -> Status {
    f.add_literal(lit);
    lit.clear();
    if (auto st = f.add_field(std::move(name)); !st.is_ok()) return bad_spec(spec, at, st.message());
    return {};
  };
  while (i < spec.size()) {
    if (spec[i] != '%') {
      lit += spec[i++];
      continue;
    }
    const size_t at = i++;
    if (i < spec.size() && spec[i] == '%') {
      lit += '%';
      ++i;
      continue;
    }
    // Modifiers: < or > (original or final request), ! and status lists (log only for some
    // statuses, "-" otherwise) — they change nothing about where the field sits.
    while (i < spec.size() && (spec[i] == '<' || spec[i] == '>' || spec[i] == '!' ||
                               spec[i] == ',' || std::isdigit(static_cast<unsigned char>(spec[i])))) {
      ++i;
    }
    std::optional<std::string> arg;
    if (i < spec.size() && spec[i] == '{') {
      const size_t close = spec.find('}', i);
      if (close == std::string::npos) return bad_spec(spec, at, "unterminated %{");
      arg = spec.substr(i + 1, close - i - 1);
      i = close + 1;
    }
    if (i >= spec.size()) return bad_spec(spec, at, "'%' at the end without a directive");
    const char d = spec[i++];
    if (d == 't' && !arg) {
      lit += '[';  // %t writes the CLF time in brackets
      if (auto st = field("time_local", at); !st.is_ok()) return st;
      lit += ']';
      continue;
    }
    Result<std::string> name = apache_field_name(d, arg);
    if (!name) return bad_spec(spec, at, name.status().message());
    if (auto st = field(std::move(*name), at); !st.is_ok()) return st;
  }
  f.add_literal(lit);
  if (f.names_.empty()) return bad_spec(spec, 0, "no %directive");
  f.finish();
  return f;
}

Status AccessLogFormat::match(std::string_view line, std::vector<std::string_view>& values) const {
  values.assign(names_.size(), std::string_view{});
  size_t pos = 0;
  auto mismatch = [&](const std::string& expected, size_t i) {
    std::string after = i == 0 ? "at the start" : "after " + (elements_[i - 1].field >= 0
                                                       ? "$" + names_[static_cast<size_t>(elements_[i - 1].field)]
                                                       : "'" + printable(elements_[i - 1].literal) + "'");
    return Status::invalid_argument("does not match the log format: expected " + expected + " " +
                                    after + " at column " + std::to_string(pos + 1) +
                                    ", found '" + printable(line.substr(pos), 24) + "'");
  };
  for (size_t i = 0; i < elements_.size(); ++i) {
    const Element& e = elements_[i];
    const bool optional = i >= required_ && allow_trailing_;
    if (optional && pos >= line.size()) return {};
    if (e.field < 0) {
      if (line.substr(pos, e.literal.size()) != e.literal) {
        if (optional) return {};
        return mismatch("'" + printable(e.literal) + "'", i);
      }
      pos += e.literal.size();
      continue;
    }
    const auto index = static_cast<size_t>(e.field);
    if (i + 1 == elements_.size()) {
      size_t end = line.size();
      if (allow_trailing_) end = std::min(end, line.find(' ', pos));
      values[index] = line.substr(pos, end - pos);
      pos = end;
      continue;
    }
    const std::string& next = elements_[i + 1].literal;
    size_t end = pos;
    for (;;) {
      end = line.find(next, end);
      if (end == std::string_view::npos || !e.quoted) break;
      // A quote preceded by an odd number of backslashes is part of the value.
      size_t bs = 0;
      while (end - bs > pos && line[end - bs - 1] == '\\') ++bs;
      if (bs % 2 == 0) break;
      ++end;
    }
    if (end == std::string_view::npos) {
      if (i + 1 >= required_ && allow_trailing_) {
        // The line stops inside the optional part: the value runs to where the line ends
        // with the start of the literal ("...\"Mozilla/5.0 (X11)\"" against '" "'), else to
        // the next space.
        for (size_t k = next.size() - 1; k > 0; --k) {
          const std::string_view head = std::string_view(next).substr(0, k);
          if (line.size() >= pos + k && line.substr(line.size() - k) == head) {
            values[index] = line.substr(pos, line.size() - k - pos);
            return {};
          }
        }
        const size_t stop = std::min(line.size(), line.find(' ', pos));
        values[index] = line.substr(pos, stop - pos);
        return {};
      }
      return Status::invalid_argument("does not match the log format: no '" + printable(next) +
                                      "' after $" + names_[index] + " (from column " +
                                      std::to_string(pos + 1) + ": '" +
                                      printable(line.substr(pos), 24) + "')");
    }
    values[index] = line.substr(pos, end - pos);
    pos = end;
  }
  if (pos != line.size() && !allow_trailing_) {
    return Status::invalid_argument("does not match the log format: unexpected text after the "
                                    "last field at column " + std::to_string(pos + 1) + ": '" +
                                    printable(line.substr(pos), 24) + "'");
  }
  return {};
}

}  // namespace ratelimit::sim
