// sliding_window_roll.h — the sliding window counter's stored state rolled forward to a moment:
// which window is current then and what the previous and current windows hold. Internal to
// src/core.
//
// Why one place: decide() (sliding_window_counter.cc) and residue_of() (residue.cc) must see
// the same rolled state, or an evicted key's residue would disagree with the decision it
// stands in for. The Lua script (src/redis/lua/sliding_window_counter.lua) mirrors these lines.
// Invariants: t >= max(now, stored window start, 0) exactly; start = window_start(t) is a
// multiple of the window; a stored window one window back becomes `prev`, an older one counts
// nothing; counts are taken as stored (no clamping).
#pragma once

#include <algorithm>
#include <cstdint>

#include "ratelimit/algorithms.h"
#include "units.h"

namespace ratelimit::algo {

struct RolledWindows {
  int64_t t;      // the moment, never before the stored window's start nor 0
  int64_t start;  // start of the window containing t
  int64_t prev;   // units in the window before it
  int64_t curr;   // units in it
};

inline RolledWindows roll_windows(const SlidingWindowCounterState& s, int64_t now_us,
                                  int64_t window) {
  RolledWindows r{std::max<int64_t>({now_us, s.window_start_us, 0}), 0, 0, 0};
  r.start = window_start(r.t, window);
  if (r.start == s.window_start_us) {
    r.prev = s.prev;
    r.curr = s.curr;
  } else if (r.start == s.window_start_us + window) {
    r.prev = s.curr;
  }
  return r;
}

}  // namespace ratelimit::algo
