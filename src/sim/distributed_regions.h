// distributed_regions.h — the simulator's model of RegionStore (include/ratelimit/region_store.h):
// R regions, each with its own store, deciding one global limit on their own count plus the
// last counts they read of the others.
//
// Why a model of its own: the regions mode is not a variant of async — its semantics are the
// real RegionStore's, and the comparison with real daemons (tools/sim/compare_distributed.py,
// mode regions) is only worth something if the model does what the daemon does:
//   - each region's store holds the policy's ordinary state; instances of a region share it and
//     decide on it exactly (one call per decision, latency rtt), with the limit lowered to
//     algo::effective_limit of what that instance has read of the other regions; when the others
//     alone leave no room the answer is a denial and nothing is counted (the call is a peek);
//   - every instance reads, every sync_interval (its own grid, instance i offset i/N of it), each
//     key it used within max(window, 10 × sync_interval) from every other region's store: the
//     read reaches that store after cross_rtt / 2 (the count it returns is that store's then,
//     algo::add_hits of 0 hits → algo::region_count_of), and its answer is merged by max
//     (algo::merge_region_count) cross_rtt after it was sent. At most one read per (key, region)
//     is in flight: a tick that finds one still out skips it (so with cross_rtt ≥ sync_interval
//     a key is read less often — the bound in regions.h accounts for it). A key an instance uses
//     for the first time (or again after it was dropped) is read at once, and is decided on its
//     own region's count until that answer arrives;
//   - no partition: every read is answered (the e2e tests measure partitions on the real thing).
// Every decision and every count is the library's (algo::decide, effective_limit, add_hits,
// region_count_of, merge_region_count, latency_over_admission_bound); this file moves time and
// counts.
// Not thread-safe; memory: per key, one state per region and one view per instance.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "distributed_types.h"
#include "ratelimit/policy.h"

namespace ratelimit::sim {

class RegionsModel {
 public:
  // Runs `f` at time `t` (>= the current time): the engine's event queue.
  using Schedule = std::function<void(int64_t t, std::function<void()> f)>;

  // `policy`: the run's fixed_window or sliding_window_counter policy (counted across regions).
  RegionsModel(const Policy& policy, const DistributedOptions& options, Schedule schedule);
  RegionsModel(RegionsModel&&) noexcept;
  RegionsModel& operator=(RegionsModel&&) noexcept;
  ~RegionsModel();

  struct Outcome {
    bool allowed = false;
    int64_t latency_us = 0;
  };
  // Instance `instance` decides `cost` units of key `key` (a dense id) at `t_us`; requests come
  // in non-decreasing time, after every event up to t_us has run.
  Outcome decide(int64_t t_us, uint32_t key, int64_t cost, int64_t instance);
  // Starts each instance's exchange grid at the first request's time.
  void start(int64_t t0_us);

  int64_t reads() const;        // reads of another region's store (each a store call)
  int64_t own_calls() const;    // calls to the own region's store (one per decision)
  // The latency bound of regions.h with the highest admission rate one region reached over any
  // span of sync_interval + cross_rtt (units per window); 0 for one region (exact).
  int64_t bound() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ratelimit::sim
