// window_room.h — test support: start a test that counts in clock-aligned windows early enough
// in the current window that no window boundary falls inside it.
//
// Why: fixed_window and sliding_window_counter (and envoyproxy/ratelimit's per-unit counters)
// count in windows [kW, (k+1)W) of the wall clock — SystemClock in the memory store and
// ratelimitd, Redis' TIME in the Redis store; both are this machine's CLOCK_REALTIME. A test on
// the real clock that asserts exact counts ("limit 10 per minute: exactly 10 of 200") gets 20
// if a minute boundary falls mid-test, so it fails at certain times of day (E2ERegions did when
// a run started at 06:59:55). await_window_room() makes that an event instead of a chance: it
// returns at once when every listed window has at least `room` left, else sleeps to the next
// boundary that lacks it (plus a small margin). The wait is at most `room` + 50 ms per window
// that needs it (a boundary of the longer window is also one of a shorter window that divides
// it, so in practice one wait), and it happens with probability about room / window.
//
// Invariants: `room` is the test's own generous bound on how long its counting takes (say it
// beside the call); it must be below every window (a test longer than its window cannot fit).
// Stateless, thread-safe; header-only.
#pragma once

#include <algorithm>
#include <chrono>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include "ratelimit/policy.h"

namespace ratelimit::testing {

// Time left in the current wall-clock window of length `window` (aligned to the Unix epoch).
inline std::chrono::microseconds window_time_left(std::chrono::microseconds window) {
  const auto now = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  return window - now % window;
}

// Returns when each of `windows` has at least `room` left in its current wall-clock window.
inline void await_window_room(std::span<const std::chrono::microseconds> windows,
                              std::chrono::microseconds room) {
  for (const auto w : windows) {
    if (room >= w) throw std::invalid_argument("await_window_room: room must be below the window");
  }
  // Each pass either finds room in every window or sleeps past the nearest boundary that lacks
  // it; right after a boundary of one window, every window it is a multiple of has at least
  // that window left, so this ends after at most one pass per window.
  for (size_t pass = 0; pass <= windows.size(); ++pass) {
    auto lacking = std::chrono::microseconds::max();
    for (const auto w : windows) {
      const auto left = window_time_left(w);
      if (left < room) lacking = std::min(lacking, left);
    }
    if (lacking == std::chrono::microseconds::max()) return;
    // A clock-aligned wait, not a guess: the boundary is a known instant; 50 ms past it so
    // a clock read a little behind this one (Redis' TIME) is past it too.
    std::this_thread::sleep_for(lacking + std::chrono::milliseconds(50));
  }
}

inline void await_window_room(std::initializer_list<std::chrono::microseconds> windows,
                              std::chrono::microseconds room) {
  await_window_room(std::span<const std::chrono::microseconds>(windows.begin(), windows.size()), room);
}

inline void await_window_room(std::chrono::microseconds window, std::chrono::microseconds room) {
  await_window_room({window}, room);
}

// The same for those of `policies` that count in clock-aligned windows (fixed_window, its
// every-hit form, sliding_window_counter); the others (sliding log, buckets) need no room.
inline void await_window_room(std::span<const Policy> policies, std::chrono::microseconds room) {
  std::vector<std::chrono::microseconds> windows;
  for (const Policy& p : policies) {
    if (p.algorithm() == Algorithm::kFixedWindow || p.algorithm() == Algorithm::kSlidingWindowCounter) {
      windows.push_back(p.window());
    }
  }
  await_window_room(windows, room);
}

inline void await_window_room(const Policy& policy, std::chrono::microseconds room) {
  await_window_room(std::span<const Policy>(&policy, 1), room);
}

}  // namespace ratelimit::testing
