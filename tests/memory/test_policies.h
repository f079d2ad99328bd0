// test_policies.h — what the MemoryStore tests share: policies, one per algorithm (and mode),
// each with capacity `limit`, so a test can be run "for every algorithm" by parameter; and
// store options on a ManualClock.
#pragma once

#include <string>
#include <vector>

#include "ratelimit/clock.h"
#include "ratelimit/memory_store.h"
#include "ratelimit/policy.h"

namespace ratelimit::testing_memory {

struct NamedPolicy {
  std::string label;  // for test names
  Policy policy;
};

// Every algorithm with capacity `limit` and a refill/window slow enough that nothing comes
// back within a test that keeps its ManualClock still.
inline std::vector<NamedPolicy> all_algorithms(int64_t limit) {
  const Micros minute{60'000'000};
  const double slow = 1e-3;  // one unit per 1000 s
  return {
      {"fixed_window", Policy::fixed_window(limit, minute).value()},
      {"sliding_window_log", Policy::sliding_window_log(limit, minute).value()},
      {"sliding_window_counter", Policy::sliding_window_counter(limit, minute).value()},
      {"token_bucket", Policy::token_bucket(slow, limit).value()},
      {"leaky_bucket_police", Policy::leaky_bucket(slow, limit, LeakyMode::kPolice).value()},
      {"leaky_bucket_shape", Policy::leaky_bucket(slow, limit, LeakyMode::kShape).value()},
  };
}

// Options for a store that reads `clock`, with the given bounds.
inline MemoryStoreOptions manual(const ManualClock& clock, size_t max_keys = 1'000'000,
                                 size_t shards = 64) {
  MemoryStoreOptions o;
  o.max_keys = max_keys;
  o.shards = shards;
  o.clock = &clock;
  return o;
}

}  // namespace ratelimit::testing_memory
