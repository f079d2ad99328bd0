// envoy_env_reader.cc — one environment variable, typed as envconfig types it (see
// envoy_env_reader.h).
#include "envoy_env_reader.h"

#include <array>
#include <charconv>
#include <cstdint>

namespace ratelimit::rls::env_detail {
namespace {

// A value as a message can show it: control bytes (a CR/LF that was meant to split a header)
// as \r, \n or \xHH, so the refusal itself stays one line.
std::string printable(std::string_view v) {
  std::string out;
  static const char* hex = "0123456789abcdef";
  for (const unsigned char c : v) {
    if (c == '\r') out += "\\r";
    else if (c == '\n') out += "\\n";
    else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace

Status Reader::text(std::string_view name, std::string& out) const {
  if (auto v = lookup_(name)) out = *v;
  return {};
}

Status Reader::boolean(std::string_view name, bool& out) const {
  auto v = lookup_(name);
  if (!v) return {};
  auto b = parse_bool(*v);
  if (!b) return bad(name, *v, kNotABoolean);
  out = *b;
  return {};
}

Status Reader::integer(std::string_view name, int64_t lo, int64_t hi, int64_t& out) const {
  auto v = lookup_(name);
  if (!v) return {};
  auto n = parse_go_int(*v);
  if (!n) return bad(name, *v, "is not a whole number");
  if (*n < lo || *n > hi) {
    return bad(name, *v, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
  }
  out = *n;
  return {};
}

Status Reader::port(std::string_view name, uint16_t& out) const {
  int64_t p = out;
  if (Status s = integer(name, 0, 65535, p); !s.is_ok()) return s;
  out = static_cast<uint16_t>(p);
  return {};
}

Status Reader::one_of(std::string_view name, std::string& out, std::initializer_list<std::string_view> allowed,
                      std::string_view why, bool any_case) const {
  if (Status s = text(name, out); !s.is_ok()) return s;
  const std::string v = any_case ? env_upper(out) : out;
  for (const std::string_view a : allowed) {
    if (v == a) return {};
  }
  return bad(name, out, why);
}

Status Reader::bad(std::string_view name, std::string_view value, std::string_view why) {
  return Status::invalid_argument(std::string(name) + ": '" + printable(value) + "' " + std::string(why));
}

std::optional<bool> Reader::parse_bool(std::string_view v) {
  static constexpr std::array<std::string_view, 6> kTrue = {"1", "t", "T", "TRUE", "true", "True"};
  static constexpr std::array<std::string_view, 6> kFalse = {"0", "f", "F", "FALSE", "false", "False"};
  for (auto t : kTrue) if (v == t) return true;
  for (auto f : kFalse) if (v == f) return false;
  return std::nullopt;
}

std::optional<int64_t> Reader::parse_go_int(std::string_view v) {
  bool neg = false;
  if (!v.empty() && (v[0] == '+' || v[0] == '-')) {
    neg = v[0] == '-';
    v.remove_prefix(1);
  }
  int base = 10;
  bool prefixed = false;
  if (v.size() > 1 && v[0] == '0') {
    const char c = v[1];
    if (c == 'x' || c == 'X') { base = 16; v.remove_prefix(2); prefixed = true; }
    else if (c == 'o' || c == 'O') { base = 8; v.remove_prefix(2); prefixed = true; }
    else if (c == 'b' || c == 'B') { base = 2; v.remove_prefix(2); prefixed = true; }
    else { base = 8; v.remove_prefix(1); prefixed = true; }
  }
  std::string digits;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '_' && prefixed && i > 0 && i + 1 < v.size() && v[i - 1] != '_') continue;
    digits += v[i];
  }
  if (digits.empty()) return std::nullopt;
  uint64_t u = 0;
  auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), u, base);
  if (ec != std::errc() || p != digits.data() + digits.size()) return std::nullopt;
  if (!neg && u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
  if (neg && u > static_cast<uint64_t>(INT64_MAX) + 1) return std::nullopt;
  return neg ? static_cast<int64_t>(0 - u) : static_cast<int64_t>(u);
}

}  // namespace ratelimit::rls::env_detail
