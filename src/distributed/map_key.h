// map_key.h — the key under which src/distributed's per-key maps hold a (policy, key) pair:
// DistributedStore's KeyStates and RegionStore's views of the other regions. Internal.
// Invariant: distinct pairs have distinct map keys — the policy's name, a NUL, then the key;
// a policy name never holds a NUL (validate_policy_name: letters, digits and _ . : -), so the
// first NUL ends the name whatever bytes the key holds.
#pragma once

#include <string>
#include <string_view>

#include "ratelimit/policy.h"

namespace ratelimit::distributed_detail {

inline std::string map_key(const Policy& policy, std::string_view key) {
  std::string out;
  out.reserve(policy.name().size() + 1 + key.size());
  out += policy.name();
  out += '\0';
  out += key;
  return out;
}

}  // namespace ratelimit::distributed_detail
