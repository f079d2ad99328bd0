// shared_counts.h — the two calls the `lease` and `async` consistency modes make on a shared
// store: reserve a slice (giving back the last one's unused units in the same call) and add
// pushed hits. Both are one atomic call whose math is include/ratelimit/consistency.h.
//
// Why an interface of its own: these are not decisions (the Store interface), and only a store
// shared by several processes has a reason to offer them; RedisStore implements it, and
// DistributedStore (distributed_store.h) is its only caller.
// Contract: completions run exactly once, on a thread of the store's choosing (inline for
// invalid input), and must not block on the store. Errors: kInvalidArgument (bad key, a policy
// whose algorithm the calls are not defined for), kUnavailable / kDeadlineExceeded when the
// store cannot answer — no failure policy is applied here: the caller decides what an outage
// means for its local decisions. A call that failed may or may not have run (a timeout), so
// DistributedStore re-sends a failed push (twice counted errs toward under-admission, never
// over) and never re-sends a give-back (given back twice could admit past the limit; never
// given back only holds the units until their window ends).
// Thread-safety: any method from any thread, concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "ratelimit/consistency.h"
#include "ratelimit/policy.h"
#include "ratelimit/status.h"

namespace ratelimit {

using SharedViewCallback = std::function<void(Result<algo::SharedView>)>;

class SharedCounts {
 public:
  virtual ~SharedCounts() = default;
  // algo::reserve on the shared state of `key` under `policy`, atomically.
  virtual void reserve_async(const Policy& policy, std::string_view key,
                             int64_t give_back_window_us, int64_t give_back, int64_t want,
                             SharedViewCallback done) = 0;
  // algo::add_hits on the shared state, atomically (hits 0: a read).
  virtual void add_hits_async(const Policy& policy, std::string_view key, int64_t window_us,
                              int64_t hits, SharedViewCallback done) = 0;
};

}  // namespace ratelimit
