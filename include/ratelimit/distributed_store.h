// distributed_store.h — the `lease` and `async` consistency modes: a Store in front of a shared
// store (RedisStore) that decides a policy's requests locally, the way the policy's
// consistency() asks, and talks to the shared store once per slice (lease) or once per
// sync_interval (async) instead of once per decision.
//
//   auto redis = ratelimit::RedisStore::connect(opts).value();
//   auto store = ratelimit::DistributedStore::wrap(redis, redis, {}).value();  // a Store
//   // policies with consistency exact pass straight through to `redis`.
//
// What each mode does and its bounds: include/ratelimit/consistency.h and docs/distributed.md.
// Here, per (policy, key) this instance uses:
//   lease  a slice: units reserved by one reserve call (sized by slice_size from this
//          instance's recent demand), spent by local admissions until it runs out, its window
//          ends or lease_ttl passes; the next reserve gives back what is left in the same call,
//          and the background thread gives back slices that expired unused. A request the slice
//          cannot cover waits for one reserve (requests arriving meanwhile wait with it: one call
//          in flight per key). When the store has nothing left, denials are answered locally
//          from the last view for up to sync_interval before the store is asked again.
//   async  the last view of the global count plus the hits admitted here and not yet in it.
//          The background thread pushes hits twice per sync_interval (a read when the key was
//          used but nothing is pending), so a view is at most half an interval old and the hits
//          it lacks were pushed at most half an interval before it was read: what an instance
//          cannot see spans sync_interval + round trip. A failed push is kept and re-sent. A key's
//          first request, and a request on a view older than stale_after, wait for one read.
// Store failure: requests that need the store (a reserve, a read) are answered by
// options.on_failure (kStoreFailedOpen / kStoreFailedClosed) and counted; for a sync_interval
// after a failure such requests are answered so without a call. Admissions made by the
// failure policy in async mode are pushed like any other hit.
// What passes straight through to `inner` (exact): policies with consistency exact; every
// all-or-nothing group of two or more ops, acquire_all of two or more policies among them (a
// local and a shared decision cannot be made atomic together); new keys while options.max_keys
// are held (counted).
// Stopping: the destructor gives back every slice and pushes every pending hit, waiting at most
// options.flush_timeout. A process killed -9 loses its unpushed hits (async: over-admission of
// at most what it admitted in one sync_interval + round trip) and keeps its slices counted
// until their window ends (lease: under-admission of at most its slices).
//
// Thread-safety: every method from any thread, concurrently. Completions run inline (a local
// answer, before the call returns) or on the shared store's thread (an answer that needed it);
// they must not block on this store. The store keeps `inner` and `shared` alive.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "ratelimit/clock.h"
#include "ratelimit/failure_policy.h"
#include "ratelimit/shared_counts.h"
#include "ratelimit/store.h"

namespace ratelimit {

struct DistributedStoreOptions {
  // Answer of a request that needs the shared store while it fails. Default kOpen.
  FailurePolicy on_failure = FailurePolicy::kOpen;
  // async: a view older than max(stale_after, 3 × sync_interval) is refreshed by one read
  // before a decision (so a store that stopped answering turns into the failure policy, not
  // into decisions on an ever older count). 1 ms ... 1 h. Default 1 s.
  Micros stale_after{1'000'000};
  // (policy, key) pairs held; new keys beyond it are decided exactly (passed to inner).
  // 1 ... 100,000,000. Default 100,000.
  size_t max_keys = 100'000;
  // Destructor: longest wait for the give-backs and pushes of the last flush. Default 1 s.
  Micros flush_timeout{1'000'000};
  // Time source (only differences are used). nullptr: a monotonic clock. Not owned.
  const Clock* clock = nullptr;
};

// Counters since construction (gauges marked), for /metrics.
struct DistributedCounters {
  uint64_t local_decisions = 0;   // answered without a store call
  uint64_t exact_passthrough = 0; // ops passed to inner because max_keys were held
  uint64_t failed_open = 0;       // answered by the failure policy
  uint64_t failed_closed = 0;
  // lease
  uint64_t lease_reserves = 0;         // reserve calls sent (give-backs included)
  uint64_t lease_reserve_failures = 0;
  uint64_t lease_units_granted = 0;
  uint64_t lease_units_returned = 0;   // given back and acknowledged
  uint64_t lease_units_held = 0;       // gauge: units in live slices, not yet spent
  // async
  uint64_t async_pushes = 0;           // add_hits calls sent (reads included)
  uint64_t async_push_failures = 0;    // ... that failed (their hits were kept for the next)
  uint64_t async_units_pushed = 0;     // hits acknowledged by the store
  uint64_t async_units_pending = 0;    // gauge: hits admitted here, not yet acknowledged
  uint64_t async_units_over_limit = 0; // pushed hits the store's count had no room for: the
                                       // units admitted past the limit, seen by this instance
  uint64_t async_view_age_us = 0;      // gauge: age of the oldest view of a key in use
  uint64_t keys = 0;                   // gauge: (policy, key) pairs held
};

class DistributedStore final : public StoreDecorator {
 public:
  // `inner` answers exact decisions, `shared` the lease/async calls (usually the same
  // RedisStore). kInvalidArgument for a null store or an option out of range.
  static Result<std::shared_ptr<DistributedStore>> wrap(std::shared_ptr<Store> inner,
                                                        std::shared_ptr<SharedCounts> shared,
                                                        DistributedStoreOptions options = {});
  ~DistributedStore() override;

  // The door (store.h); see the top for what is local and what passes through.
  void decide_many_async(std::span<const StoreOp> ops, Atomicity atomicity,
                         OpsCallback done) override;
  // Forgets the key here (its slice is dropped, not given back: the reset clears the count)
  // and resets it in inner.
  void reset_async(const Policy& policy, std::string_view key, StatusCallback done) override;

  // Gives back every slice and pushes every pending hit now, waiting at most `bound`. OK when
  // every call was answered; kDeadlineExceeded otherwise. Decisions may continue meanwhile.
  Status flush(Micros bound);

  // Counters so far; lease_units_held and async_units_pending as of this call. Any thread.
  DistributedCounters counters() const;

  struct Core;

 private:
  DistributedStore(std::shared_ptr<Store> inner, std::shared_ptr<Core> core);
  std::shared_ptr<Core> core_;
};

}  // namespace ratelimit
