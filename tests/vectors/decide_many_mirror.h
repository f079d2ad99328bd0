// decide_many_mirror.h — a store-neutral check of Store::decide_many_async against the pure
// functions: random calls (several keys and policies, mixed costs, acquire and peek ops,
// independent and all-or-nothing) replayed on the store and on a model that holds one
// AlgorithmState per (policy, key) and decides with algo::decide / algo::decide_all (LimitOp),
// at the same manual-clock times. Every decision must be identical.
//
// Why beside the vectors: it is how every store (MemoryStore, the Lua scripts) is held to the
// core for the multi-key path, in one place, as the vectors do for single decisions.
// The store must read time from `clock` (MemoryStoreOptions::clock, RedisStoreOptions::test_clock).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ratelimit/clock.h"
#include "ratelimit/policy.h"
#include "ratelimit/store.h"

namespace ratelimit::vectors {

// Runs `calls` random decide_many calls with `seed`, keys prefixed by `key_prefix`. Returns
// one line per mismatch (empty: identical), at most 20.
std::vector<std::string> check_decide_many(Store& store, ManualClock& clock,
                                           const std::vector<Policy>& policies, int calls,
                                           uint32_t seed, const std::string& key_prefix);

// Policies covering every algorithm and mode, with awkward rates (non-integer, below one per
// second), named "dm-<algorithm>[-cd]".
std::vector<Policy> decide_many_policies();

}  // namespace ratelimit::vectors
