// clock.cc — the system and monotonic clocks (see include/ratelimit/clock.h).
//
// SystemClock reads CLOCK_REALTIME through the TSC: clock_gettime costs ~25 ns on this kind of
// VM (kvm-clock, tsc=unstable keeps the vDSO off the TSC) and rdtsc ~10 ns. Each thread keeps an
// anchor (tsc, realtime ns) read exactly and extrapolates from it at a rate calibrated once
// against CLOCK_REALTIME over kCalibrationNs (two halves that must agree); it re-anchors (one
// exact read) whenever its anchor is older than kReanchorNs, so a step of the system clock is
// seen at most kReanchorNs late.
// Invariants: until the rate is calibrated, and without an invariant TSC, now() is the exact
// read; a re-anchor that finds more than kMaxDriftNs between the extrapolated and the exact time
// (a wrong rate, a migrated VM, a clock step) discards the rate and calibrates again, reading
// exactly meanwhile. Bound: see SystemClock in clock.h.
#include "ratelimit/clock.h"

#include <time.h>

#include <mutex>

#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

namespace ratelimit {
namespace {

__extension__ using U128 = unsigned __int128;  // products of cycles and a 32.32 rate

constexpr int64_t kCalibrationNs = 10'000'000;  // 10 ms, in two halves that must agree
constexpr int64_t kReanchorNs = 1'000'000;      // 1 ms: the longest extrapolation
constexpr int64_t kMaxDriftNs = 20'000;         // mismatch at a re-anchor that drops the rate
constexpr int64_t kMaxPairSpreadCycles = 4'000;  // a (tsc, ns) pair read across a preemption

int64_t realtime_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

#if defined(__x86_64__)
bool invariant_tsc() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0x80000007, &a, &b, &c, &d) == 0) return false;
  return (d & (1U << 8)) != 0;
}

struct Pair {
  uint64_t tsc;
  int64_t ns;
};

// A (tsc, ns) pair whose reads were not split by a preemption (else {0, ns}).
Pair read_pair() {
  const uint64_t before = __rdtsc();
  const int64_t ns = realtime_ns();
  const uint64_t after = __rdtsc();
  if (after - before > kMaxPairSpreadCycles) return {0, ns};
  return {before + (after - before) / 2, ns};
}

// The process-wide rate: ns per cycle as a 32.32 fixed-point multiplier; 0 = not calibrated.
std::atomic<uint64_t> g_mult{0};
std::mutex g_calibration_mu;
// Guarded by g_calibration_mu: the first and middle pairs of the calibration under way.
Pair g_start{0, 0};
Pair g_mid{0, 0};

// ns per cycle between two pairs, 32.32 fixed point.
uint64_t rate(const Pair& from, const Pair& to) {
  return static_cast<uint64_t>((static_cast<U128>(to.ns - from.ns) << 32) / (to.tsc - from.tsc));
}

// Called on the exact path while uncalibrated: once kCalibrationNs passed, publishes the rate if
// both halves of the window agree within 1/1000 (a clock step inside the window breaks that
// agreement: the calibration starts again instead of extrapolating at a wrong rate).
void calibrate(const Pair& p) {
  std::lock_guard<std::mutex> lock(g_calibration_mu);
  if (g_mult.load(std::memory_order_relaxed) != 0 || p.tsc == 0) return;
  if (g_start.tsc == 0 || p.tsc <= g_start.tsc || p.ns <= g_start.ns) {
    g_start = p;
    g_mid = {0, 0};
    return;
  }
  const int64_t dns = p.ns - g_start.ns;
  if (g_mid.tsc == 0) {
    if (dns >= kCalibrationNs / 2) g_mid = p;
    return;
  }
  if (dns < kCalibrationNs || p.tsc <= g_mid.tsc || p.ns <= g_mid.ns) return;
  const uint64_t first = rate(g_start, g_mid);
  const uint64_t second = rate(g_mid, p);
  const uint64_t diff = first > second ? first - second : second - first;
  if (diff > first / 1000) {
    g_start = p;
    g_mid = {0, 0};
    return;
  }
  g_mult.store(rate(g_start, p), std::memory_order_release);
  g_start = {0, 0};
  g_mid = {0, 0};
}

void drop_rate() {
  std::lock_guard<std::mutex> lock(g_calibration_mu);
  g_mult.store(0, std::memory_order_release);
  g_start = {0, 0};
  g_mid = {0, 0};
}

struct Anchor {
  uint64_t tsc = 0;
  int64_t ns = 0;
  uint64_t mult = 0;          // the rate this anchor extrapolates with
  uint64_t max_cycles = 0;    // kReanchorNs in cycles at that rate
};
thread_local Anchor t_anchor;

// tsc_realtime_ns when the thread's anchor is missing or older than kReanchorNs: one exact
// read, checked against the extrapolation, and a new anchor. Out of line, so the fast path below
// saves no registers. Without an invariant TSC the anchor is never set (mult stays 0), so every
// read comes here and is exact.
[[gnu::noinline]] int64_t reanchor(Anchor& a) {
  static const bool usable = invariant_tsc();
  if (!usable) return realtime_ns();
  const Pair p = read_pair();
  if (a.mult != 0 && p.tsc != 0) {
    const int64_t predicted =
        a.ns + static_cast<int64_t>((static_cast<U128>(p.tsc - a.tsc) * a.mult) >> 32);
    const int64_t drift = predicted - p.ns;
    if (drift > kMaxDriftNs || drift < -kMaxDriftNs) drop_rate();
  }
  uint64_t mult = g_mult.load(std::memory_order_acquire);
  if (mult == 0) {
    calibrate(p);
    mult = g_mult.load(std::memory_order_acquire);
  }
  if (p.tsc == 0 || mult == 0) {
    a.mult = 0;
    return p.ns;
  }
  a = {p.tsc, p.ns, mult,
       static_cast<uint64_t>((static_cast<U128>(kReanchorNs) << 32) / mult)};
  return p.ns;
}

int64_t tsc_realtime_ns() {
  Anchor& a = t_anchor;
  const uint64_t delta = __rdtsc() - a.tsc;
  if (a.mult != 0 && delta <= a.max_cycles) [[likely]] {
    // delta * mult is about 1 ms in ns << 32 (delta <= max_cycles): ~2^52, fits 64 bits.
    return a.ns + static_cast<int64_t>((delta * a.mult) >> 32);
  }
  return reanchor(a);
}
#else
int64_t tsc_realtime_ns() { return realtime_ns(); }
#endif

}  // namespace

Micros SystemClock::now() const { return Micros{tsc_realtime_ns() / 1000}; }

Micros SystemClock::exact_now() {
  return std::chrono::duration_cast<Micros>(
      std::chrono::system_clock::now().time_since_epoch());
}

Micros MonotonicClock::now() const {
  return std::chrono::duration_cast<Micros>(std::chrono::steady_clock::now().time_since_epoch());
}

const MonotonicClock& MonotonicClock::instance() {
  static const MonotonicClock* const clock = new MonotonicClock();  // never destroyed
  return *clock;
}

const SystemClock& SystemClock::instance() {
  static const SystemClock* const clock = new SystemClock();  // never destroyed: usable at exit
  return *clock;
}

}  // namespace ratelimit
