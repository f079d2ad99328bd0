// regions.h — the decision math of a policy counted across regions (`scope: global`): each
// region has its own store and decides against it; the other regions' counts reach it as a
// grow-only count per (key, region, window) — a G-counter, the way Redis Active-Active counts —
// merged by max, and a decision admits when
//     own region's count + the last known counts of the other regions + cost <= limit
// (for sliding_window_counter: the algorithm's estimate over all regions' counts).
//
// How a region applies it (RegionStore, include/ratelimit/region_store.h): the region's own
// count is the policy's ordinary state in its own store, decided exactly by the store's own
// script with the policy's limit lowered to effective_limit() — what the other regions hold is
// taken off the limit. So every region-side line of the decision is the algorithm's own (the
// shared vectors of that algorithm already hold its Redis script and src/core together), and
// what is new is here: what the others' counts weigh, the share cap during a partition, the
// merge of what was seen, and the bounds. tests/vectors/regions.json holds this file and both
// stores together.
//
// Why only fixed_window and sliding_window_counter (Policy::with_consistency refuses the rest):
// a G-counter needs a state that only grows between resets and whose value is a sum over
// replicas: a window's count is (each region adds its own admissions; the sum is the global
// count; a count of an earlier window never changes again). A bucket's level falls with time
// and depends on when each unit arrived, so per-region levels do not add up to the global
// level; a sliding log is a set of timestamps, not a count. Count-denied mode would let a
// region's count grow by denials it decided on a partial view.
//
// Bounds (docs/distributed.md, regions; tested by tests/server/e2e_regions_test.cc):
//   latency   a region's view of another is at most sync_interval + round trip old, so the
//             over-admission is at most (regions − 1) × ⌈rate × (sync_interval + rtt)⌉ units per
//             window, rate being one region's admission rate (latency_over_admission_bound).
//             That holds while rtt < sync_interval: with one read per (key, region) in flight, a
//             round trip of an interval or more makes a tick skip the key until the answer is
//             in, so reads come up to rtt + sync_interval apart and a view is up to
//             sync_interval + 2 × rtt old — the bound then uses 2 × rtt (found by the
//             simulator's model of RegionStore, src/sim/distributed_regions.h).
//   partition each region keeps deciding on the last counts it knows. Without the share cap, a
//             window that begins during the partition knows nothing of the others: each region
//             admits up to the limit, over-admission ≤ (regions − 1) × limit per window. With
//             the share cap (partition_cap) a region whose view of some region is stale admits
//             at most ⌊limit × share⌋ of its own; shares sum to ≤ 1, so such windows admit at
//             most the limit in all — and a region may under-admit by up to limit − its cap.
//   converge  once a partition heals, the next exchange (within sync_interval + round trip)
//             brings each region the others' full counts.
// Rounding: a sliding counter's others are weighed with ⌈ ⌉ and its own with ⌊ ⌋ (the
// algorithm's), so a region may deny one unit the joint estimate would admit, never admit one
// more.
//
// Conventions as algorithms.h: integer microseconds; all functions are pure and allocation-free.
#pragma once

#include <cstdint>
#include <span>

#include "ratelimit/consistency.h"
#include "ratelimit/decision.h"
#include "ratelimit/policy.h"

namespace ratelimit::algo {

// One region's count of one key as another region last saw it: the window starting at
// window_start_us and, for sliding_window_counter, the one before (0 for fixed_window).
// Value-initialised: nothing seen.
struct RegionCount {
  int64_t window_start_us = 0;
  int64_t prev = 0;
  int64_t curr = 0;

  friend bool operator==(const RegionCount&, const RegionCount&) = default;
};

// The count a read of the region's own store returned (SharedView of add_hits with 0 hits).
RegionCount region_count_of(const SharedView& view);

// Merges `seen` into `into` by max per window (the G-counter join: commutative, associative,
// idempotent, so reads that arrive late, twice or out of order change nothing they should
// not). A later window replaces an earlier one; for sliding_window_counter the window just
// before the latest stays as prev.
void merge_region_count(const Policy& policy, RegionCount& into, const RegionCount& seen);

// The limit the region's own count is decided against at `now_us`: limit − what the other
// regions' counts weigh now (their counts rolled to now's window, summed; a sliding counter's
// previous windows weighed by the remaining fraction, rounded up), and at most `cap` (pass
// the limit for none). May be ≤ 0: the others alone fill the limit.
int64_t effective_limit(const Policy& policy, std::span<const RegionCount> others, int64_t now_us,
                        int64_t cap);

// What a region sends its own store for a request of `cost` on a global policy, given the other
// regions' counts and the cap in force (the limit, or partition_cap during a partition): the
// limit to decide with — effective_limit clamped to [1, limit], as a policy's limit is at least
// 1 — and whether the others alone deny it (effective_limit < cost). Such a request must count
// nothing in this region (its own count is what the others read): it is sent as a peek and
// answered by region_denial. A cost above the policy's limit is decided on the policy itself
// (the store answers kExceedsCapacity). One rule for RegionStore and the simulator.
struct RegionSend {
  int64_t limit = 0;
  bool denied_by_others = false;
};
RegionSend region_send(const Policy& policy, std::span<const RegionCount> others, int64_t now_us,
                       int64_t cap, int64_t cost);

// The answer when effective_limit < cost (so no own count could admit): denied (kOverLimit),
// remaining 0, and reset_after / retry_after the algorithm's own on the others' counts alone
// (at least until the current window ends when the cap is the reason).
Decision region_denial(const Policy& policy, std::span<const RegionCount> others, int64_t now_us,
                       int64_t cost);

// ⌊limit × share⌋: what a region may admit of its own while a partition keeps it from another
// region's count (share in (0, 1]).
int64_t partition_cap(const Policy& policy, double share);

// The latency bound above: the async formula with regions in place of instances, and the round
// trip doubled when it is sync_interval or more.
int64_t latency_over_admission_bound(int64_t regions, double rate_per_region, Micros sync_interval,
                                     Micros round_trip, int64_t limit);

}  // namespace ratelimit::algo
