// token_bucket.cc — token bucket: `burst` tokens, refilled at `rate` per second; a request
// takes `cost` whole tokens. A new key starts full.
//
// State (16 bytes): micro-units taken out of a full bucket, and the time of the last refill.
// Admitted when tokens >= cost, i.e. taken (after refill) <= (burst - cost) * kUnit.
// retry_after is measured from the stored state, not from the refilled value, because
// floor(a) + floor(b) != floor(a + b): the refill that admits the retry is computed from
// last_us in one step, and so is the wait. Mirrored by src/redis/lua/token_bucket.lua.
#include "ratelimit/algorithms.h"
#include "units.h"

namespace ratelimit::algo {

Decision decide(const Policy& policy, TokenBucketState& s, int64_t now_us, int64_t cost, Op op) {
  const int64_t burst = policy.limit();
  const double rate = policy.rate();
  const int64_t t = std::max(now_us, s.last_us);
  const int64_t taken = refilled(policy, s.taken_u, s.last_us, t);

  Decision d;
  d.limit = burst;
  if (cost > burst) {
    d.reason = DecisionReason::kExceedsCapacity;
    d.remaining = std::max<int64_t>(0, burst - ceil_div(taken, kUnit));
    d.reset_after = Micros{s.last_us + time_to_drain_us(s.taken_u, rate) - t};
    d.reset_after = std::max(d.reset_after, Micros{0});
    return d;
  }
  if (taken + cost * kUnit <= burst * kUnit) {
    const int64_t after = taken + cost * kUnit;
    d.allowed = true;
    d.reason = DecisionReason::kWithinLimit;
    d.remaining = burst - ceil_div(after, kUnit);
    d.reset_after = Micros{time_to_drain_us(after, rate)};
    if (op == Op::kAcquire) s = {after, t};
    return d;
  }
  d.reason = DecisionReason::kOverLimit;
  if (op == Op::kAcquire && policy.count_denied()) {
    s = {std::min(taken + cost * kUnit, 2 * burst * kUnit), t};  // a debt of at most one burst
  }
  // Wait until the stored debt has drained down to (burst - cost) units, counted from last_us.
  const int64_t need = s.taken_u - (burst - cost) * kUnit;
  d.retry_after = Micros{s.last_us + time_to_drain_us(need, rate) - t};
  const int64_t taken_now = s.last_us == t ? s.taken_u : taken;  // after any recording above
  d.remaining = std::max<int64_t>(0, burst - ceil_div(taken_now, kUnit));
  d.reset_after = Micros{s.last_us + time_to_drain_us(s.taken_u, rate) - t};
  return d;
}

// Debt: taken above a full burst (tokens below zero); repaid as the bucket refills. A refund
// never fills the bucket above its burst (taken >= 0).
void record(const Policy& policy, TokenBucketState& s, int64_t now_us, int64_t cost) {
  const int64_t t = std::max(now_us, s.last_us);
  const int64_t taken = refilled(policy, s.taken_u, s.last_us, t);
  s = {recorded(taken, cost * kUnit, max_recorded(policy) * kUnit), t};
}

}  // namespace ratelimit::algo
