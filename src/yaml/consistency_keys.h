// consistency_keys.h — the reader of a policy's consistency keys (`consistency`, `sync_interval`,
// `lease_max`, `lease_ttl`; ConsistencyOptions in include/ratelimit/policy.h) from a YAML
// mapping, for both configurations that carry them: an entry of ratelimitd's `policies:`
// (src/server/config_policy.cc) and, as an extension, an envoyproxy/ratelimit rule's
// `rate_limit` (src/rls/rule_set_load.cc).
//
// Why one reader: the keys, their values and their checks mean the same in both places, so they
// are read and validated once — the values by parse_consistency / parse_duration, the
// combination by Policy::with_consistency (which refuses a mode an algorithm does not define,
// a lease_max above the limit, a duration out of range) — and a rule file cannot accept what a
// policy refuses, or the reverse.
// Invariants: nothing is applied unless every key present is valid (the policy is assigned
// only on success); each error names the node it is about, so the caller can give its line.
// Thread-safety: a pure function.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "ratelimit/policy.h"

namespace ratelimit::yaml {

// The keys, in the order the docs list them.
inline constexpr std::array<std::string_view, 4> kConsistencyKeys = {"consistency", "sync_interval",
                                                                     "lease_max", "lease_ttl"};

// What is wrong and where: `node` is the value (or the mapping) the reason is about; `reason`
// starts with `what` (the caller's name for the mapping, e.g. "policy 'api'") and has no file
// or line — the caller adds its own.
struct ConsistencyKeyError {
  YAML::Node node;
  std::string reason;
};

// True when `map` holds any of kConsistencyKeys.
bool has_consistency_keys(const YAML::Node& map);

// Reads the keys present in `map` (a mapping) and applies them to `policy` with
// Policy::with_consistency, starting from its current ConsistencyOptions. No key present:
// nothing changes. On error `policy` is unchanged.
std::optional<ConsistencyKeyError> apply_consistency_keys(const YAML::Node& map, const std::string& what,
                                                          Policy& policy);

}  // namespace ratelimit::yaml
