// region_store.h — policies counted across regions (`scope: global`): a Store in front of this
// region's own store that decides each such policy on its own region's count plus the last
// known counts of the other regions, and an exchange loop that reads those counts from the
// other regions' stores every sync_interval.
//
//   own region's Redis ── RegionStore ── decisions: own count + Σ others ≤ limit, atomically in
//                            │             the own store (the limit lowered by what others hold)
//                            └─ every sync_interval: read each key in use from every other
//                               region's store (its own count there), merge by max (G-counter)
//
// The math (what the others weigh, the merge, the share cap, the bounds) is
// include/ratelimit/regions.h; policies without consistency().across_regions pass straight
// through to `own`.
//
// Why pull (each region reads the others' own counts) and not push: the reader is the one that
// must know how old its view is — it measures the age of each region's view directly (the
// metric), notices a region it cannot reach (the log line, the share cap) the moment a read
// fails, and reads exactly the keys it decides on, no more. The region that owns a count is its
// only writer (a G-counter's rule: each replica increments its own entry), and a read that
// arrives late or twice merges to the same value.
//
// Partition: a region is "unreachable" from the moment a read of it fails or no read has
// succeeded for 3 × sync_interval, until a read succeeds. Meanwhile decisions go on with the
// last counts known; with partition_share each region's own count is capped at
// ⌊limit × share⌋ while any region is unreachable (regions.h: bounds). Reachability changes are
// reported through options.on_reachability (ratelimitd logs them).
//
// Thread-safety: every method from any thread. Completions run inline or on the own store's
// thread. One background thread runs the exchange.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ratelimit/clock.h"
#include "ratelimit/regions.h"
#include "ratelimit/shared_counts.h"
#include "ratelimit/store.h"

namespace ratelimit {

// Another region: its name and its store (a RedisStore connected to that region's Redis, with
// the same key prefix as that region's ratelimitd).
struct RegionPeer {
  std::string name;
  std::shared_ptr<SharedCounts> counts;
};

struct RegionStoreOptions {
  std::string region;  // this region's name (for messages)
  // How often every key in use is read from every other region. 1 ms ... 1 min. Default 100 ms.
  Micros sync_interval{100'000};
  // Cap this region's own count at ⌊limit × share⌋ while a region is unreachable.
  bool partition_share = false;
  // This region's share, in (0, 1]. 0: 1 / (peers + 1).
  double share = 0;
  // (policy, key) pairs tracked; beyond it, new keys decide on the own count only (counted).
  size_t max_keys = 100'000;
  // The decisions' time, in the own store's time base (Redis: its TIME, Unix µs). nullptr: the
  // system clock. Not owned.
  const Clock* clock = nullptr;
  // Time source for the ages of views: reachability (3 × sync_interval without a read), the
  // view ages reported, the share cap. Only differences are used. nullptr: MonotonicClock.
  // Tests pass a ManualClock. Not owned.
  const Clock* age_clock = nullptr;
  // false: no background thread (tests feed seen() and set_reachable() by hand).
  bool run_exchange = true;
  // Called (on the exchange thread, no lock held) when a region becomes unreachable (with why)
  // or reachable again (why = "").
  std::function<void(const std::string& region, bool reachable, const std::string& why)>
      on_reachability;
};

// One other region as this one sees it.
struct RegionStatus {
  std::string name;
  bool reachable = false;    // the last read succeeded and is recent
  bool ever_reached = false;
  int64_t view_age_us = -1;  // since the last successful read; -1: never
  uint64_t reads = 0;        // reads sent
  uint64_t read_failures = 0;
};

struct RegionCounters {
  uint64_t decisions = 0;         // decisions of global policies
  uint64_t capped = 0;            // ... decided while the share cap applied
  uint64_t denied_by_others = 0;  // ... denied because the others' counts alone filled the limit
  uint64_t untracked = 0;         // ... on keys beyond max_keys (own count only)
  uint64_t keys = 0;              // gauge: (policy, key) pairs tracked
};

class RegionStore final : public StoreDecorator {
 public:
  // kInvalidArgument for a null store, no peer, a peer without a store or a name twice, or an
  // option out of range.
  static Result<std::shared_ptr<RegionStore>> wrap(std::shared_ptr<Store> own,
                                                   std::vector<RegionPeer> peers,
                                                   RegionStoreOptions options);
  ~RegionStore() override;

  // The door (store.h). Global policies are decided as the top says (all-or-nothing groups
  // too: each op's limit is lowered, the group stays one atomic call); reset (inherited)
  // clears the own region's count only (the others' are theirs).
  void decide_many_async(std::span<const StoreOp> ops, Atomicity atomicity,
                         OpsCallback done) override;

  // What the exchange does with a read: merges `count` of `region` for (policy, key). Tests
  // use it to set a view by hand. kInvalidArgument for an unknown region or a policy that is
  // not global.
  Status seen(const Policy& policy, std::string_view key, const std::string& region,
              const algo::RegionCount& count);
  // Marks a region reachable or not by hand (tests without the exchange thread).
  void set_reachable(const std::string& region, bool reachable);

  std::vector<RegionStatus> regions() const;
  RegionCounters counters() const;
  Store& own() const;

  struct Core;

 private:
  RegionStore(std::shared_ptr<Store> own, std::shared_ptr<Core> core);
  std::shared_ptr<Core> core_;
};

}  // namespace ratelimit
