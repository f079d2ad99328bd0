// leaky_bucket.cc — leaky bucket as a meter (GCRA, the virtual queue): a level that leaks at
// `rate` units per second; a request adds `cost`. Admitted when floor(level) + cost <= burst.
//
// State (16 bytes): level in micro-units, time of the last leak. An admitted request departs
// at now + level/rate (level after adding its cost); in shape mode the caller is told to hold
// it for delay = (level - cost) / rate, the time until it reaches the head of the queue.
// Like the token bucket, waits are measured from the stored state in one step so that
// retry_after is exact to the microsecond. Mirrored by src/redis/lua/leaky_bucket.lua.
#include "ratelimit/algorithms.h"
#include "units.h"

namespace ratelimit::algo {

Decision decide(const Policy& policy, LeakyBucketState& s, int64_t now_us, int64_t cost, Op op) {
  const int64_t burst = policy.limit();
  const double rate = policy.rate();
  const int64_t t = std::max(now_us, s.last_us);
  const int64_t level = refilled(policy, s.level_u, s.last_us, t);
  // floor(level / kUnit) + cost <= burst  <=>  level <= (burst - cost + 1) * kUnit - 1.
  const int64_t max_level = (burst - cost + 1) * kUnit - 1;

  Decision d;
  d.limit = burst;
  if (cost > burst) {
    d.reason = DecisionReason::kExceedsCapacity;
    d.remaining = std::max<int64_t>(0, burst - level / kUnit);
    d.reset_after = Micros{std::max<int64_t>(0, s.last_us + time_to_drain_us(s.level_u, rate) - t)};
    return d;
  }
  if (level <= max_level) {
    const int64_t after = level + cost * kUnit;
    d.allowed = true;
    d.reason = DecisionReason::kWithinLimit;
    d.remaining = std::max<int64_t>(0, burst - after / kUnit);
    d.reset_after = Micros{time_to_drain_us(after, rate)};
    if (policy.leaky_mode() == LeakyMode::kShape) d.delay = Micros{time_to_drain_us(level, rate)};
    if (op == Op::kAcquire) s = {after, t};
    return d;
  }
  d.reason = DecisionReason::kOverLimit;
  if (op == Op::kAcquire && policy.count_denied()) {
    s = {std::min(level + cost * kUnit, 2 * burst * kUnit), t};  // at most one burst of debt
  }
  const int64_t level_now = s.last_us == t ? s.level_u : level;  // after any recording above
  d.retry_after = Micros{s.last_us + time_to_drain_us(s.level_u - max_level, rate) - t};
  d.remaining = std::max<int64_t>(0, burst - level_now / kUnit);
  d.reset_after = Micros{s.last_us + time_to_drain_us(s.level_u, rate) - t};
  return d;
}

// Debt: the level above the burst; repaid as the queue leaks. A refund never takes the level
// below empty.
void record(const Policy& policy, LeakyBucketState& s, int64_t now_us, int64_t cost) {
  const int64_t t = std::max(now_us, s.last_us);
  const int64_t level = refilled(policy, s.level_u, s.last_us, t);
  s = {recorded(level, cost * kUnit, max_recorded(policy) * kUnit), t};
}

}  // namespace ratelimit::algo
