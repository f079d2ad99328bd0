// units.h — the few arithmetic helpers the algorithms share: refill/leak over elapsed time and
// its exact inverse. Internal to src/core.
//
// Why one place: "how much does a bucket gain in `elapsed` µs" and "how long until it has
// gained `need`" must be exact inverses of each other, or retry_after is off by a microsecond.
// Both are computed here and nowhere else; the Lua scripts copy these lines.
// Invariants: all inputs are below 2^53, so every double below is an exact integer or an
// exactly rounded product, computed the same way by C++ and by Lua (IEEE 754 doubles).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ratelimit/algorithms.h"

namespace ratelimit::algo {

// Micro-units gained (refill) or lost (leak) over `elapsed_us` at `rate` units per second:
// floor(elapsed_us * rate). One unit per second is one micro-unit per microsecond.
// Precondition: 0 <= elapsed_us, and elapsed_us * rate < 2^53 (callers cap elapsed first).
// The product is >= 0 and < 2^53, so truncation is floor (and avoids a libm call: without
// SSE4.1, std::floor is not inlined).
inline int64_t drained_u(int64_t elapsed_us, double rate) {
  return static_cast<int64_t>(static_cast<double>(elapsed_us) * rate);
}

// The least elapsed_us with drained_u(elapsed_us, rate) >= need_u. Preconditions: need_u >= 0,
// rate > 0 (Policy guarantees it for bucket policies).
// The first guess multiplies by 1 / rate, which does not wait for need_u: the division it
// replaced ended a chain that every bucket decision's reset_after waits on, and with it the next
// decision's lock (issue 34: 47 -> 35 ns per MemoryStore decision). The Lua mirror divides; the
// guesses may differ by an ulp, the settle loops below end both on the same least t
// (tests/core/units_test.cc).
inline int64_t time_to_drain_us(int64_t need_u, double rate) {
  if (need_u <= 0) return 0;
  const double q = static_cast<double>(need_u) * (1.0 / rate);  // > 0 and < 2^53
  auto t = static_cast<int64_t>(q);                       // floor; ceil below
  if (static_cast<double>(t) < q) ++t;
  // The guess rounds; settle on the exact boundary of drained_u itself.
  while (t > 0 && drained_u(t - 1, rate) >= need_u) --t;
  while (drained_u(t, rate) < need_u) ++t;
  return t;
}

// Elapsed time since `last_us`, never negative (a clock stepping back counts as no time).
inline int64_t elapsed_since(int64_t last_us, int64_t now_us) {
  return std::max<int64_t>(0, now_us - last_us);
}

// Start of the window of length `window_us` that contains `now_us` (now_us >= 0).
inline int64_t window_start(int64_t now_us, int64_t window_us) {
  return now_us - now_us % window_us;
}

// Ceiling of a / b for a >= 0, b > 0.
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A bucket's level (micro-units taken from a token bucket, queued in a leaky one) after
// draining at the policy's rate from last_us to t (t >= last_us), never below 0. Capping elapsed
// at kMaxDebtLimits + 1 full drain times keeps elapsed * rate < 2^53 (burst <= 10^9, so
// 9 * 10^15 micro-units) and still drains the largest level a key can hold (max_recorded).
inline int64_t refilled(const Policy& policy, int64_t level_u, int64_t last_us, int64_t t) {
  const int64_t cap = (kMaxDebtLimits + 1) * policy.window().count();
  const int64_t elapsed = std::min(elapsed_since(last_us, t), cap);
  return std::max<int64_t>(0, level_u - drained_u(elapsed, policy.rate()));
}

}  // namespace ratelimit::algo
