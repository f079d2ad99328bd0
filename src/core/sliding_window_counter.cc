// sliding_window_counter.cc — sliding window counter: the previous window's count, weighted by
// how much of it still overlaps the sliding window, plus the current window's count.
//
// est = curr + floor(prev * (W - elapsed) / W), elapsed = now - current window start;
// admitted when est + cost <= L. Integer arithmetic only: prev * (W - elapsed) <= L * W <= 2^53
// (Policy guarantees), so Lua doubles hold it exactly (its division needs care, see the
// script). State 24 bytes, O(1). Mirrored by src/redis/lua/sliding_window_counter.lua.
#include "ratelimit/algorithms.h"
#include "sliding_window_roll.h"
#include "units.h"

namespace ratelimit::algo {
namespace {

// Smallest elapsed e in [0, W] at which curr + floor(prev * (W - e) / W) + cost <= L, given
// that x = L - cost - curr >= 0: floor(prev*(W-e)/W) <= x  <=>  prev*(W-e) <= (x+1)*W - 1.
int64_t first_fit_elapsed(int64_t prev, int64_t x, int64_t window) {
  if (prev == 0) return 0;
  return std::max<int64_t>(0, window - ((x + 1) * window - 1) / prev);
}

}  // namespace

Decision decide(const Policy& policy, SlidingWindowCounterState& s, int64_t now_us, int64_t cost,
                Op op) {
  const int64_t limit = policy.limit();
  const int64_t window = policy.window().count();
  const RolledWindows rolled = roll_windows(s, now_us, window);
  const int64_t t = rolled.t;
  const int64_t start = rolled.start;
  const int64_t prev = rolled.prev;
  int64_t curr = rolled.curr;  // count_denied adds the refused attempt below
  const int64_t elapsed = t - start;
  const int64_t est = curr + prev * (window - elapsed) / window;

  // Until est is 0 with no more traffic: the last window holding units must slide out.
  auto reset_after = [&](int64_t p, int64_t c) -> int64_t {
    if (c > 0) return start + window + first_fit_elapsed(c, 0, window) - t;
    if (p > 0) return std::max<int64_t>(0, start + first_fit_elapsed(p, 0, window) - t);
    return 0;
  };

  Decision d;
  d.limit = limit;
  if (cost > limit) {
    d.reason = DecisionReason::kExceedsCapacity;
    d.remaining = std::max<int64_t>(0, limit - est);
    d.reset_after = Micros{reset_after(prev, curr)};
    return d;
  }
  if (est + cost <= limit) {
    d.allowed = true;
    d.reason = DecisionReason::kWithinLimit;
    d.remaining = limit - (est + cost);
    d.reset_after = Micros{reset_after(prev, curr + cost)};
    if (op == Op::kAcquire) s = {start, prev, curr + cost};
    return d;
  }
  d.reason = DecisionReason::kOverLimit;
  if (op == Op::kAcquire && policy.count_denied()) {
    curr = std::min(limit, curr + cost);  // the attempt counts; retry is from the new state
    s = {start, prev, curr};
  }
  if (limit - cost - curr >= 0) {
    // The previous window's weight decays enough within this window.
    d.retry_after = Micros{start + first_fit_elapsed(prev, limit - cost - curr, window) - t};
  } else {
    // Only once this window becomes the previous one: prev' = curr, curr' = 0.
    d.retry_after = Micros{start + window + first_fit_elapsed(curr, limit - cost, window) - t};
  }
  d.remaining = std::max<int64_t>(0, limit - (curr + prev * (window - elapsed) / window));
  d.reset_after = Micros{reset_after(prev, curr)};
  return d;
}

// Debt: the estimate above the limit; repaid as the counts slide out of the window. A report
// or refund changes the current window's count only (the previous window is weighted, not
// counted, in what is left to give back).
void record(const Policy& policy, SlidingWindowCounterState& s, int64_t now_us, int64_t cost) {
  const RolledWindows r = roll_windows(s, now_us, policy.window().count());
  s = {r.start, r.prev, recorded(r.curr, cost, max_recorded(policy))};
}

}  // namespace ratelimit::algo
