// clock.h — where "now" comes from: the system clock in production, a manual clock in tests
// and in the simulator.
//
// Why an interface: every algorithm is a pure function of `now`; only a Clock reads time, once
// per request, and everything below receives the value (STYLE.md principle 2). Tests and
// ratelimit-sim drive time by hand and never sleep.
// Invariants: time is integer microseconds since the Unix epoch (Micros). Clocks may step
// backwards (NTP); the algorithms treat a backwards step as "no time passed".
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

namespace ratelimit {

using Micros = std::chrono::microseconds;

// Thread-safe: implementations must allow concurrent now() calls.
class Clock {
 public:
  virtual ~Clock() = default;
  // Current time in microseconds since the Unix epoch (MonotonicClock: since an arbitrary
  // start, for intervals only).
  virtual Micros now() const = 0;
};

// Wall-clock time (CLOCK_REALTIME), so fixed windows align to wall-clock seconds and minutes,
// as they do on a Redis server's TIME.
// now() is extrapolated from the TSC between exact reads (src/core/clock.cc): ~2.5x cheaper
// than clock_gettime on a VM whose vDSO cannot use the TSC. Worst-case error against
// CLOCK_REALTIME: kMaxError while the clock runs steadily (1 ms of extrapolation at a rate
// calibrated over 10 ms, plus read jitter); a step of the system clock (NTP, resume from
// suspend) is seen at most 1 ms late. Without an invariant TSC, before calibration (the first
// ~10 ms) and after a re-anchor found more than 20 µs of mismatch, now() is the exact read.
// Readings of different threads agree within kMaxError; within a thread a re-anchor may step
// back by less than kMaxError, which the algorithms count as no time passing.
class SystemClock final : public Clock {
 public:
  static constexpr Micros kMaxError{20};
  Micros now() const override;
  // CLOCK_REALTIME read exactly (clock_gettime), for comparisons and tests.
  static Micros exact_now();
  // A process-wide instance (never destroyed).
  static const SystemClock& instance();
};

// Time since an arbitrary start (CLOCK_MONOTONIC, std::chrono::steady_clock): for ages and
// intervals — how long a cached denial lives, how old a view of a shared count is — which an
// NTP step must not move. The one monotonic clock of the library: every store that measures
// staleness reads it through a `const Clock*` option (nullptr: this clock), so a ManualClock
// drives the same checks in tests. Never a decision's `now` where windows align to wall time.
class MonotonicClock final : public Clock {
 public:
  Micros now() const override;
  // A process-wide instance (never destroyed).
  static const MonotonicClock& instance();
};

// Time set by hand. Thread-safe; set() and advance() are visible to every later now().
class ManualClock final : public Clock {
 public:
  explicit ManualClock(Micros start = Micros{0}) : now_us_(start.count()) {}
  Micros now() const override { return Micros{now_us_.load(std::memory_order_acquire)}; }
  void set(Micros t) { now_us_.store(t.count(), std::memory_order_release); }
  void advance(Micros d) { now_us_.fetch_add(d.count(), std::memory_order_acq_rel); }

 private:
  std::atomic<int64_t> now_us_;
};

}  // namespace ratelimit
