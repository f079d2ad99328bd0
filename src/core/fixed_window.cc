// fixed_window.cc — fixed window counter: at most L units in each window [kW, (k+1)W).
//
// State: the window's start and the units admitted in it. Admitted when count + cost <= L.
// Cheapest algorithm (16 bytes, O(1)); admits up to 2L across a window edge (the boundary
// attack), which the tests demonstrate. Mirrored by src/redis/lua/fixed_window.lua.
// A count above the limit (a reload lowered it) reads as no room: remaining is clamped at 0,
// as Decision promises, and the count is kept (it leaves with its window).
// The every-hit variant (Policy::fixed_window_every_hit) is envoyproxy/ratelimit's counter:
// every hit counts, admitted when count + cost <= L, cost 0 checks only.
#include "ratelimit/algorithms.h"
#include "units.h"

namespace ratelimit::algo {

Decision decide(const Policy& policy, FixedWindowState& s, int64_t now_us, int64_t cost, Op op) {
  const int64_t limit = policy.limit();
  const int64_t window = policy.window().count();
  const int64_t t = std::max<int64_t>({now_us, s.window_start_us, 0});
  const int64_t start = window_start(t, window);
  const int64_t count = start == s.window_start_us ? s.count : 0;
  const int64_t until_end = start + window - t;

  Decision d;
  d.limit = limit;
  if (policy.counts_every_hit()) {
    // envoyproxy/ratelimit: INCRBY cost, then admitted iff the count after it is <= limit.
    // Denied hits count too, all of them: one counter serves every limit of its descriptor (a
    // request's override beside the configured limit, a reload's new limit), so the count is
    // never cut at a limit. It stays below 2^53 (exact in Lua) for any traffic a window sees.
    const int64_t after = count + cost;
    d.reset_after = Micros{after > 0 ? until_end : 0};
    if (after <= limit) {
      d.allowed = true;
      d.reason = DecisionReason::kWithinLimit;
      d.remaining = limit - after;
    } else if (cost > limit) {
      d.reason = DecisionReason::kExceedsCapacity;  // counted all the same, no wait helps
    } else {
      d.reason = DecisionReason::kOverLimit;
      d.retry_after = Micros{until_end};
    }
    if (op == Op::kAcquire && cost > 0) s = {start, std::min(after, kMaxEveryHitCount)};
    return d;
  }
  if (cost > limit) {
    d.reason = DecisionReason::kExceedsCapacity;
    d.remaining = std::max<int64_t>(0, limit - count);
    d.reset_after = Micros{count > 0 ? until_end : 0};
    return d;
  }
  if (count + cost <= limit) {
    d.allowed = true;
    d.reason = DecisionReason::kWithinLimit;
    d.remaining = limit - (count + cost);
    d.reset_after = Micros{count + cost > 0 ? until_end : 0};
    if (op == Op::kAcquire) s = {start, count + cost};
    return d;
  }
  d.reason = DecisionReason::kOverLimit;
  d.retry_after = Micros{until_end};
  d.reset_after = Micros{until_end};  // count > 0 here: cost <= limit was exceeded
  int64_t kept = count;
  if (op == Op::kAcquire && policy.count_denied()) {
    kept = std::min(limit, count + cost);
    s = {start, kept};
  }
  d.remaining = std::max<int64_t>(0, limit - kept);
  return d;
}

// Debt: the window's count above the limit; repaid when the window ends (a refund lands in the
// window it arrives in).
void record(const Policy& policy, FixedWindowState& s, int64_t now_us, int64_t cost) {
  const int64_t window = policy.window().count();
  const int64_t start = window_start(std::max<int64_t>({now_us, s.window_start_us, 0}), window);
  const int64_t count = start == s.window_start_us ? s.count : 0;
  s = {start, recorded(count, cost, max_recorded(policy))};
}

}  // namespace ratelimit::algo
