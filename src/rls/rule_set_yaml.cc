// rule_set_yaml.cc — how the RuleSet loader types a YAML leaf as envoyproxy/ratelimit's yaml.v2
// does (booleans, floats, big integers), and `metadata` rendered as JSON (rule_set_detail.h).
// Why: envoyproxy/ratelimit refuses a file by the type yaml.v2 gives a leaf, not by its text;
// matching those rules here keeps the same files accepted and refused.
#include <charconv>
#include <cmath>

#include "rule_set_detail.h"

namespace ratelimit::rls::rule_set_detail {
namespace {

std::string json_escape(std::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          static const char* hex = "0123456789abcdef";
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

}  // namespace

bool contains(std::span<const std::string_view> list, std::string_view k) {
  return std::find(list.begin(), list.end(), k) != list.end();
}

// YAML 1.1 plain scalars that yaml.v2 reads as something other than a string, int or bool
// (a float, or an integer beyond int64): envoyproxy/ratelimit refuses them as leaves.
bool is_float_like(const std::string& s) {
  if (s == ".inf" || s == ".Inf" || s == ".INF" || s == "-.inf" || s == "+.inf" ||
      s == "-.Inf" || s == "+.Inf" || s == "-.INF" || s == "+.INF" || s == ".nan" ||
      s == ".NaN" || s == ".NAN") {
    return true;
  }
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t digits = 0, frac = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') { ++i; ++digits; }
  bool dot = false;
  if (i < s.size() && s[i] == '.') {
    dot = true;
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') { ++i; ++frac; }
  }
  if (digits + frac == 0) return false;
  bool exp = false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    exp = true;
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t e = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') { ++i; ++e; }
    if (e == 0) return false;
  }
  if (i != s.size()) return false;
  if (dot || exp) return true;
  // An integer: a float to yaml.v2 only when it does not fit an int64.
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data() + (s[0] == '+' ? 1 : 0), s.data() + s.size(), v);
  return ec == std::errc::result_out_of_range;
}



// `metadata` as compact JSON: plain numbers and booleans keep their type, the rest are strings.
void to_json(const YAML::Node& n, std::string& out) {
  if (n.IsMap()) {
    out += '{';
    bool first = true;
    for (auto it = n.begin(); it != n.end(); ++it) {
      if (!first) out += ',';
      first = false;
      out += json_escape(it->first.IsScalar() ? it->first.Scalar() : std::string("?"));
      out += ':';
      to_json(it->second, out);
    }
    out += '}';
  } else if (n.IsSequence()) {
    out += '[';
    for (size_t i = 0; i < n.size(); ++i) {
      if (i) out += ',';
      to_json(n[i], out);
    }
    out += ']';
  } else if (n.IsScalar()) {
    const std::string& s = n.Scalar();
    bool b = false;
    int64_t iv = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), iv);
    if (is_plain(n) && !s.empty() && ec == std::errc() && p == s.data() + s.size()) {
      out += s;
    } else if (is_plain(n) && is_yaml_bool(s, b)) {
      out += b ? "true" : "false";
    } else if (is_plain(n) && is_float_like(s) && s.find_first_of("nN") == std::string::npos &&
               s.find_first_of("iI") == std::string::npos) {
      double d = 0;
      auto [q, ec2] = std::from_chars(s.data() + (s[0] == '+' ? 1 : 0), s.data() + s.size(), d);
      if (ec2 == std::errc()) {
        char buf[32];
        auto r = std::to_chars(buf, buf + sizeof buf, d);
        out.append(buf, r.ptr);
      } else {
        out += json_escape(s);
      }
    } else {
      out += json_escape(s);
    }
  } else {
    out += "null";
  }
}

}  // namespace ratelimit::rls::rule_set_detail
