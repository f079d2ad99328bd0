// config_parser.h — the strict YAML reader every part of the configuration parser shares
// (src/server/config*.cc): "file:line: reason" errors, maps checked against their known keys,
// scalars parsed by hand (no yaml-cpp conversions, which accept "0x10" or "1e3" as integers and
// throw), and a string naming one of a fixed set read into its enum (one_of), so each such key
// is refused with the same message form. Internal to src/server.
#pragma once

#include <algorithm>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "ratelimit/policy.h"
#include "ratelimit/status.h"
#include "try.h"  // RL_TRY, RL_TRY_ASSIGN

namespace ratelimit::server::config_detail {

class Parser {
 public:
  explicit Parser(std::string_view file) : file_(file) {}

  // Reasons quote the file's bytes (a key, a value): every byte outside printable ASCII is
  // written as \xNN, so a bad file cannot put an escape sequence or a forged line into the log
  // or a terminal.
  Status error(int line, std::string_view reason) const {
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
  static int line_of(const YAML::Node& n) {
    const YAML::Mark m = n.Mark();
    return m.is_null() ? 0 : m.line + 1;
  }
  Status error(const YAML::Node& n, std::string_view reason) const {
    return error(line_of(n), reason);
  }

  // A map whose keys must all be in `allowed`; also refuses a key given twice.
  Status check_map(const YAML::Node& n, std::string_view what,
                   std::initializer_list<std::string_view> allowed) const {
    if (!n.IsMap()) return error(n, std::string(what) + " must be a mapping");
    std::vector<std::string> seen;
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!it->first.IsScalar()) return error(it->first, std::string(what) + ": keys must be plain names");
      const std::string& k = it->first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) {
        std::string m = "unknown key '" + k + "' in " + std::string(what) + " (allowed:";
        for (auto a : allowed) { m += ' '; m += a; }
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

  Result<std::string> string(const YAML::Node& n, std::string_view what) const {
    if (!n.IsScalar()) return error(n, std::string(what) + " must be a string");
    return n.Scalar();
  }

  // A string that must be one of `choices`' names; the value paired with it. Otherwise the
  // error lists the names in the order given: "<what> must be a or b, got 'x'" ("a, b or c").
  template <typename T>
  Result<T> one_of(const YAML::Node& n, std::string_view what,
                   std::initializer_list<std::pair<std::string_view, T>> choices) const {
    auto s = string(n, what);
    if (!s) return s.status();
    for (const auto& [name, value] : choices) {
      if (*s == name) return value;
    }
    std::string m = std::string(what) + " must be ";
    size_t i = 0;
    for (const auto& c : choices) {
      if (i > 0) m += i + 1 == choices.size() ? " or " : ", ";
      m += c.first;
      ++i;
    }
    return error(n, m + ", got '" + *s + "'");
  }

  Result<int64_t> integer(const YAML::Node& n, std::string_view what, int64_t lo,
                          int64_t hi) const {
    if (!n.IsScalar()) return error(n, std::string(what) + " must be an integer");
    const std::string& s = n.Scalar();
    int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || s.empty()) {
      return error(n, std::string(what) + " must be a whole number, got '" + s + "'");
    }
    if (v < lo || v > hi) {
      return error(n, std::string(what) + " must be between " + std::to_string(lo) + " and " +
                          std::to_string(hi) + ", got " + s);
    }
    return v;
  }

  Result<double> number(const YAML::Node& n, std::string_view what) const {
    if (!n.IsScalar()) return error(n, std::string(what) + " must be a number");
    const std::string& s = n.Scalar();
    double v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || s.empty() || !std::isfinite(v)) {
      return error(n, std::string(what) + " must be a number, got '" + s + "'");
    }
    return v;
  }

  Result<bool> boolean(const YAML::Node& n, std::string_view what) const {
    if (n.IsScalar() && n.Scalar() == "true") return true;
    if (n.IsScalar() && n.Scalar() == "false") return false;
    return error(n, std::string(what) + " must be true or false");
  }

  Result<Micros> duration(const YAML::Node& n, std::string_view what) const {
    if (!n.IsScalar()) return error(n, std::string(what) + " must be a duration like 500ms or 1m");
    auto d = parse_duration(n.Scalar());
    if (!d) return error(n, std::string(what) + ": " + d.status().message());
    return *d;
  }

 private:
  std::string_view file_;
};

// RL_TRY / RL_TRY_ASSIGN: src/common/try.h (shared with the Envoy rule loader).

}  // namespace ratelimit::server::config_detail
