// consistency_keys.cc — reads `consistency`, `sync_interval`, `lease_max`, `lease_ttl` from a
// YAML mapping and applies them through Policy::with_consistency (contract in
// consistency_keys.h). The scalar rules are ratelimitd's own configuration's (a duration like
// 500ms, a whole number in range), so a message reads the same from either file.
#include "consistency_keys.h"

#include <charconv>

namespace ratelimit::yaml {
namespace {

using Error = std::optional<ConsistencyKeyError>;

Error read_duration(const YAML::Node& n, const std::string& what, Micros& out) {
  if (!n.IsScalar()) return ConsistencyKeyError{n, what + " must be a duration like 500ms or 1m"};
  auto d = parse_duration(n.Scalar());
  if (!d) return ConsistencyKeyError{n, what + ": " + d.status().message()};
  out = *d;
  return std::nullopt;
}

Error read_integer(const YAML::Node& n, const std::string& what, int64_t lo, int64_t hi, int64_t& out) {
  if (!n.IsScalar()) return ConsistencyKeyError{n, what + " must be an integer"};
  const std::string& s = n.Scalar();
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) {
    return ConsistencyKeyError{n, what + " must be a whole number, got '" + s + "'"};
  }
  if (v < lo || v > hi) {
    return ConsistencyKeyError{n, what + " must be between " + std::to_string(lo) + " and " + std::to_string(hi) +
                                      ", got " + s};
  }
  out = v;
  return std::nullopt;
}

}  // namespace

bool has_consistency_keys(const YAML::Node& map) {
  if (!map.IsMap()) return false;
  for (std::string_view k : kConsistencyKeys) {
    if (map[std::string(k)]) return true;
  }
  return false;
}

std::optional<ConsistencyKeyError> apply_consistency_keys(const YAML::Node& map, const std::string& what,
                                                          Policy& policy) {
  if (!has_consistency_keys(map)) return std::nullopt;
  ConsistencyOptions o = policy.consistency();
  if (const YAML::Node n = map["consistency"]) {
    if (!n.IsScalar()) return ConsistencyKeyError{n, what + ".consistency must be a string"};
    auto mode = parse_consistency(n.Scalar());
    if (!mode) return ConsistencyKeyError{n, what + ": " + mode.status().message()};
    o.mode = *mode;
  }
  if (const YAML::Node n = map["sync_interval"]) {
    if (Error e = read_duration(n, what + ".sync_interval", o.sync_interval)) return e;
  }
  if (const YAML::Node n = map["lease_ttl"]) {
    if (Error e = read_duration(n, what + ".lease_ttl", o.lease_ttl)) return e;
  }
  if (const YAML::Node n = map["lease_max"]) {
    if (Error e = read_integer(n, what + ".lease_max", 0, kMaxLimit, o.lease_max)) return e;
  }
  auto with = policy.with_consistency(o);
  if (!with) {
    // with_consistency's reasons open with the key they are about ("lease_max must be ..."):
    // point at that key's line; a reason about the mode (or the algorithm) at `consistency`.
    const std::string m = with.status().message();
    YAML::Node at = map["consistency"] ? map["consistency"] : map;
    for (std::string_view k : kConsistencyKeys) {
      if (m.rfind(k, 0) == 0 && map[std::string(k)]) at = map[std::string(k)];
    }
    return ConsistencyKeyError{at, what + ": " + m};
  }
  policy = *std::move(with);
  return std::nullopt;
}

}  // namespace ratelimit::yaml
