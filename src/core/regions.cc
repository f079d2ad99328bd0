// regions.cc — the math of a policy counted across regions: what the other regions' counts
// weigh, the G-counter merge, the denial when they fill the limit, the share cap (contracts and
// the argument for each bound in include/ratelimit/regions.h).
// Invariants: counts are rolled the way decide() rolls a state (a window before the current one
// becomes prev of a sliding counter, anything older weighs nothing); a merge never lowers a
// count of a window it keeps.
#include "ratelimit/regions.h"

#include <algorithm>
#include <cmath>

#include "units.h"

namespace ratelimit::algo {
namespace {

struct Weight {
  int64_t start = 0;  // window containing now
  int64_t prev = 0;   // the others' counts of the window before (sliding counter only)
  int64_t curr = 0;   // of the current window
};

Weight sum_at(const Policy& policy, std::span<const RegionCount> others, int64_t now_us) {
  const int64_t window = policy.window().count();
  const int64_t t = std::max<int64_t>(0, now_us);
  Weight w{window_start(t, window), 0, 0};
  const bool sliding = policy.algorithm() == Algorithm::kSlidingWindowCounter;
  for (const RegionCount& c : others) {
    if (c.window_start_us == w.start) {
      w.curr += c.curr;
      if (sliding) w.prev += c.prev;
    } else if (sliding && c.window_start_us == w.start - window) {
      w.prev += c.curr;
    }
  }
  return w;
}

}  // namespace

RegionCount region_count_of(const SharedView& view) {
  return {view.window_start_us, view.prev, view.curr};
}

void merge_region_count(const Policy& policy, RegionCount& into, const RegionCount& seen) {
  const int64_t window = policy.window().count();
  const bool sliding = policy.algorithm() == Algorithm::kSlidingWindowCounter;
  if (seen.window_start_us == into.window_start_us) {
    into.prev = std::max(into.prev, seen.prev);
    into.curr = std::max(into.curr, seen.curr);
  } else if (seen.window_start_us > into.window_start_us) {
    const bool next = seen.window_start_us == into.window_start_us + window;
    const int64_t kept_prev = sliding && next ? into.curr : 0;
    into = {seen.window_start_us, sliding ? std::max(seen.prev, kept_prev) : 0, seen.curr};
  } else if (sliding && seen.window_start_us == into.window_start_us - window) {
    into.prev = std::max(into.prev, seen.curr);
  }
}

int64_t effective_limit(const Policy& policy, std::span<const RegionCount> others, int64_t now_us,
                        int64_t cap) {
  const Weight w = sum_at(policy, others, now_us);
  int64_t weighed = w.curr;
  if (policy.algorithm() == Algorithm::kSlidingWindowCounter && w.prev > 0) {
    const int64_t window = policy.window().count();
    const int64_t left = window - (std::max<int64_t>(0, now_us) - w.start);
    // Rounded up: with the own count's floor, never more than the joint estimate admits.
    weighed += (w.prev * left + window - 1) / window;
  }
  return std::min(cap, policy.limit() - weighed);
}

RegionSend region_send(const Policy& policy, std::span<const RegionCount> others, int64_t now_us,
                       int64_t cap, int64_t cost) {
  if (cost > policy.limit()) return {policy.limit(), false};
  const int64_t eff = effective_limit(policy, others, now_us, cap);
  return {std::clamp<int64_t>(eff, 1, policy.limit()), eff < cost};
}

Decision region_denial(const Policy& policy, std::span<const RegionCount> others, int64_t now_us,
                       int64_t cost) {
  const Weight w = sum_at(policy, others, now_us);
  Decision d;
  if (policy.algorithm() == Algorithm::kFixedWindow) {
    FixedWindowState s{w.start, std::min(w.curr, policy.limit())};
    d = decide(policy, s, now_us, cost, Op::kPeek);
  } else {
    SlidingWindowCounterState s{w.start, std::min(w.prev, policy.limit()),
                                std::min(w.curr, policy.limit())};
    d = decide(policy, s, now_us, cost, Op::kPeek);
  }
  const int64_t until_end = w.start + policy.window().count() - std::max<int64_t>(0, now_us);
  d.allowed = false;
  d.reason = DecisionReason::kOverLimit;
  d.remaining = 0;
  d.delay = Micros{0};
  if (d.retry_after.count() <= 0) d.retry_after = Micros{until_end};
  if (d.reset_after < d.retry_after) d.reset_after = d.retry_after;
  return d;
}

int64_t partition_cap(const Policy& policy, double share) {
  if (!(share > 0)) return 0;
  if (share >= 1) return policy.limit();
  return static_cast<int64_t>(std::floor(static_cast<double>(policy.limit()) * share));
}

int64_t latency_over_admission_bound(int64_t regions, double rate_per_region, Micros sync_interval,
                                     Micros round_trip, int64_t limit) {
  // One read per (key, region) in flight: a round trip of a sync_interval or more makes the
  // next read wait for the answer, so reads are up to round_trip + sync_interval apart and a
  // view up to sync_interval + 2 × round_trip old (regions.h).
  const Micros stale_rtt = round_trip < sync_interval ? round_trip : 2 * round_trip;
  return async_over_admission_bound(regions, rate_per_region, sync_interval, stale_rtt, limit);
}

}  // namespace ratelimit::algo
