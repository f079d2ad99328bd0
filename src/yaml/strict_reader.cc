// strict_reader.cc — the strict YAML leaf reader (see strict_reader.h).
#include "strict_reader.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <vector>

#include "ratelimit/policy.h"

namespace ratelimit::yaml {

int line_of(const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  return m.is_null() ? 1 : m.line + 1;
}

bool is_plain(const YAML::Node& n) { return n.Tag() == "?"; }

bool is_yaml_bool(const std::string& s, bool& v) {
  static constexpr std::array<std::string_view, 11> kTrue = {
      "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"};
  static constexpr std::array<std::string_view, 11> kFalse = {
      "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"};
  if (std::find(kTrue.begin(), kTrue.end(), s) != kTrue.end()) {
    v = true;
    return true;
  }
  if (std::find(kFalse.begin(), kFalse.end(), s) != kFalse.end()) {
    v = false;
    return true;
  }
  return false;
}

Status StrictReader::error(int line, std::string_view reason) const {
  std::string m(file_);
  m += ':';
  m += std::to_string(line < 1 ? 1 : line);
  m += ": ";
  static constexpr char kHex[] = "0123456789abcdef";
  for (const char ch : reason) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f) {
      m += ch;
    } else {
      m += "\\x";
      m += kHex[c >> 4];
      m += kHex[c & 15];
    }
  }
  return Status::invalid_argument(std::move(m));
}

Status StrictReader::check_map(const YAML::Node& n, std::string_view what,
                               std::initializer_list<std::string_view> allowed) const {
  if (!n.IsMap()) return error(n, std::string(what) + " must be a mapping");
  std::vector<std::string> seen;
  for (auto it = n.begin(); it != n.end(); ++it) {
    if (!it->first.IsScalar()) return error(it->first, std::string(what) + ": keys must be plain names");
    const std::string& k = it->first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
      std::string m = "unknown key '" + k + "' in " + std::string(what) + " (allowed:";
      for (auto a : allowed) {
        m += ' ';
        m += a;
      }
      m += ')';
      return error(it->first, m);
    }
    if (std::find(seen.begin(), seen.end(), k) != seen.end()) {
      return error(it->first, "key '" + k + "' given twice in " + std::string(what));
    }
    seen.push_back(k);
  }
  return {};
}

Result<std::string> StrictReader::string(const YAML::Node& n, std::string_view what) const {
  if (dialect_ == Dialect::kYamlV2 && (!n || n.IsNull())) return std::string();
  if (!n.IsScalar()) return error(n, std::string(what) + " must be a string");
  return n.Scalar();
}

Result<int64_t> StrictReader::integer(const YAML::Node& n, std::string_view what, int64_t lo,
                                      int64_t hi) const {
  const bool v2 = dialect_ == Dialect::kYamlV2;
  if (!n.IsScalar() || (v2 && !is_plain(n))) {
    return error(n, std::string(what) + (v2 ? " must be a whole number" : " must be an integer"));
  }
  const std::string& s = n.Scalar();
  int64_t v = 0;
  const char* b = s.data() + (v2 && !s.empty() && s[0] == '+' ? 1 : 0);
  auto [p, ec] = std::from_chars(b, s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) {
    return error(n, std::string(what) + " must be a whole number, got '" + s + "'");
  }
  if (v < lo || v > hi) {
    return error(n, std::string(what) + " must be between " + std::to_string(lo) + " and " +
                        std::to_string(hi) + ", got " + s);
  }
  return v;
}

Result<double> StrictReader::number(const YAML::Node& n, std::string_view what) const {
  if (!n.IsScalar()) return error(n, std::string(what) + " must be a number");
  const std::string& s = n.Scalar();
  double v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty() || !std::isfinite(v)) {
    return error(n, std::string(what) + " must be a number, got '" + s + "'");
  }
  return v;
}

Result<bool> StrictReader::boolean(const YAML::Node& n, std::string_view what) const {
  if (dialect_ == Dialect::kYamlV2) {
    if (!n || n.IsNull()) return false;
    bool v = false;
    if (n.IsScalar() && is_plain(n) && is_yaml_bool(n.Scalar(), v)) return v;
    return error(n, std::string(what) + " must be true or false, got " +
                        (n.IsScalar() ? "'" + n.Scalar() + "'" : std::string("a collection")));
  }
  if (n.IsScalar() && n.Scalar() == "true") return true;
  if (n.IsScalar() && n.Scalar() == "false") return false;
  return error(n, std::string(what) + " must be true or false");
}

Result<Micros> StrictReader::duration(const YAML::Node& n, std::string_view what) const {
  if (!n.IsScalar()) return error(n, std::string(what) + " must be a duration like 500ms or 1m");
  auto d = parse_duration(n.Scalar());
  if (!d) return error(n, std::string(what) + ": " + d.status().message());
  return *d;
}

Status StrictReader::sequence(const YAML::Node& n, std::string_view what) const {
  if (!n || n.IsNull() || n.IsSequence()) return {};
  return error(n, std::string(what) + " must be a list");
}

}  // namespace ratelimit::yaml
