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
class SystemClock final : public Clock {
 public:
  Micros now() const override;
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
