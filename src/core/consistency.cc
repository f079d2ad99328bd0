// consistency.cc — lease and async math: reserve, give back and add hits on a shared window
// count, local decisions on a view, slice sizing, and the error bounds (contracts and the
// argument for each bound in include/ratelimit/consistency.h).
// Mirrored line for line by src/redis/lua/distributed.lua (reserve, add_hits); the shared
// vectors tests/vectors/distributed.json hold the two together.
// Invariants: every function reads the window the way decide() does (t = max(now, state's
// window, 0); a state of the window before becomes the previous count of a sliding counter,
// anything older is empty), so a rolled state decides exactly as the stored one would; a count
// is never negative and never above the limit.
#include "ratelimit/consistency.h"

#include <algorithm>
#include <cmath>
#include <variant>

#include "units.h"

namespace ratelimit::algo {
namespace {

struct Rolled {
  int64_t t;      // now, never before the state's window
  int64_t start;  // window containing t
  int64_t prev;   // sliding counter only
  int64_t curr;
};

Rolled roll(const Policy& policy, const FixedWindowState& s, int64_t now_us) {
  const int64_t t = std::max<int64_t>({now_us, s.window_start_us, 0});
  const int64_t start = window_start(t, policy.window().count());
  return {t, start, 0, start == s.window_start_us ? s.count : 0};
}

Rolled roll(const Policy& policy, const SlidingWindowCounterState& s, int64_t now_us) {
  const int64_t window = policy.window().count();
  const int64_t t = std::max<int64_t>({now_us, s.window_start_us, 0});
  const int64_t start = window_start(t, window);
  if (start == s.window_start_us) return {t, start, s.prev, s.curr};
  if (start == s.window_start_us + window) return {t, start, s.curr, 0};
  return {t, start, 0, 0};
}

// Units of the algorithm's count that weigh at t: the fixed window's count, or the sliding
// counter's estimate curr + floor(prev * (W - elapsed) / W).
int64_t weighed(const Policy& policy, const Rolled& r) {
  if (policy.algorithm() == Algorithm::kFixedWindow) return r.curr;
  const int64_t window = policy.window().count();
  return r.curr + r.prev * (window - (r.t - r.start)) / window;
}

// Subtracts `units` of window `window_us` (curr if it is the current one, prev if it is the
// one before and the algorithm still weighs it).
void take_back(const Policy& policy, Rolled& r, int64_t window_us, int64_t units) {
  if (units <= 0) return;
  if (window_us == r.start) {
    r.curr = std::max<int64_t>(0, r.curr - units);
  } else if (policy.algorithm() == Algorithm::kSlidingWindowCounter &&
             window_us == r.start - policy.window().count()) {
    r.prev = std::max<int64_t>(0, r.prev - units);
  }
}

// Adds `units` of window `window_us` (curr, or prev as take_back), kept at most the limit;
// returns the units the limit left out.
int64_t add(const Policy& policy, Rolled& r, int64_t window_us, int64_t units) {
  if (units <= 0) return 0;
  const int64_t limit = policy.limit();
  int64_t* count = nullptr;
  if (window_us == r.start) {
    count = &r.curr;
  } else if (policy.algorithm() == Algorithm::kSlidingWindowCounter &&
             window_us == r.start - policy.window().count()) {
    count = &r.prev;
  }
  if (count == nullptr) return 0;
  const int64_t dropped = std::max<int64_t>(0, *count + units - limit);
  *count = std::min(limit, *count + units);
  return dropped;
}

Rolled do_reserve(const Policy& policy, Rolled r, int64_t give_back_window_us, int64_t give_back,
                  int64_t want, int64_t& granted) {
  take_back(policy, r, give_back_window_us, give_back);
  granted = std::min(want, std::max<int64_t>(0, policy.limit() - weighed(policy, r)));
  r.curr += granted;
  return r;
}

SharedView view_of(const Rolled& r, int64_t granted, int64_t dropped = 0) {
  return {r.t, r.start, r.prev, r.curr, granted, dropped};
}

}  // namespace

int64_t resolved_lease_max(const Policy& policy) {
  const int64_t configured = policy.consistency().lease_max;
  return configured > 0 ? configured : std::max<int64_t>(1, policy.limit() / 20);
}

SharedView reserve(const Policy& policy, FixedWindowState& s, int64_t now_us,
                   int64_t give_back_window_us, int64_t give_back, int64_t want) {
  int64_t granted = 0;
  const Rolled r = do_reserve(policy, roll(policy, s, now_us), give_back_window_us, give_back,
                              want, granted);
  s = {r.start, r.curr};
  return view_of(r, granted);
}

SharedView reserve(const Policy& policy, SlidingWindowCounterState& s, int64_t now_us,
                   int64_t give_back_window_us, int64_t give_back, int64_t want) {
  int64_t granted = 0;
  const Rolled r = do_reserve(policy, roll(policy, s, now_us), give_back_window_us, give_back,
                              want, granted);
  s = {r.start, r.prev, r.curr};
  return view_of(r, granted);
}

SharedView add_hits(const Policy& policy, FixedWindowState& s, int64_t now_us, int64_t window_us,
                    int64_t hits) {
  Rolled r = roll(policy, s, now_us);
  const int64_t dropped = add(policy, r, window_us, hits);
  s = {r.start, r.curr};
  return view_of(r, 0, dropped);
}

SharedView add_hits(const Policy& policy, SlidingWindowCounterState& s, int64_t now_us,
                    int64_t window_us, int64_t hits) {
  Rolled r = roll(policy, s, now_us);
  const int64_t dropped = add(policy, r, window_us, hits);
  s = {r.start, r.prev, r.curr};
  return view_of(r, 0, dropped);
}

SharedView reserve(const Policy& policy, AlgorithmState& state, int64_t now_us,
                   int64_t give_back_window_us, int64_t give_back, int64_t want) {
  if (policy.algorithm() == Algorithm::kFixedWindow) {
    if (!std::holds_alternative<FixedWindowState>(state)) state = FixedWindowState{};
    return reserve(policy, std::get<FixedWindowState>(state), now_us, give_back_window_us,
                   give_back, want);
  }
  if (!std::holds_alternative<SlidingWindowCounterState>(state)) {
    state = SlidingWindowCounterState{};
  }
  return reserve(policy, std::get<SlidingWindowCounterState>(state), now_us, give_back_window_us,
                 give_back, want);
}

SharedView add_hits(const Policy& policy, AlgorithmState& state, int64_t now_us,
                    int64_t window_us, int64_t hits) {
  if (policy.algorithm() == Algorithm::kFixedWindow) {
    if (!std::holds_alternative<FixedWindowState>(state)) state = FixedWindowState{};
    return add_hits(policy, std::get<FixedWindowState>(state), now_us, window_us, hits);
  }
  if (!std::holds_alternative<SlidingWindowCounterState>(state)) {
    state = SlidingWindowCounterState{};
  }
  return add_hits(policy, std::get<SlidingWindowCounterState>(state), now_us, window_us, hits);
}

Decision decide_local(const Policy& policy, const SharedView& view,
                      std::span<const LocalUnits> local, int64_t now_us, int64_t cost) {
  if (policy.algorithm() == Algorithm::kFixedWindow) {
    FixedWindowState s{view.window_start_us, view.curr};
    Rolled r = roll(policy, s, now_us);
    for (const LocalUnits& u : local) {
      if (u.units > 0) add(policy, r, u.window_us, u.units);
      else take_back(policy, r, u.window_us, -u.units);
    }
    s = {r.start, r.curr};
    return decide(policy, s, now_us, cost, Op::kPeek);
  }
  SlidingWindowCounterState s{view.window_start_us, view.prev, view.curr};
  Rolled r = roll(policy, s, now_us);
  for (const LocalUnits& u : local) {
    if (u.units > 0) add(policy, r, u.window_us, u.units);
    else take_back(policy, r, u.window_us, -u.units);
  }
  s = {r.start, r.prev, r.curr};
  return decide(policy, s, now_us, cost, Op::kPeek);
}

int64_t slice_size(const Policy& policy, double demand_per_s, int64_t life_us, int64_t cost) {
  const int64_t most = std::min(resolved_lease_max(policy), policy.limit());
  if (cost >= most) return cost;
  double expected = 0;
  if (demand_per_s > 0 && life_us > 0) {
    expected = std::ceil(demand_per_s * static_cast<double>(life_us) / 1e6);
  }
  if (!(expected < static_cast<double>(most))) return most;  // NaN and huge demand alike
  return std::max<int64_t>(cost, static_cast<int64_t>(expected));
}

int64_t slice_life_us(const Policy& policy, int64_t now_us) {
  const int64_t t = std::max<int64_t>(0, now_us);
  const int64_t window_end = window_start(t, policy.window().count()) + policy.window().count();
  return std::min(policy.consistency().lease_ttl.count(), window_end - t);
}

int64_t slice_until_us(const Policy& policy, int64_t window_start_us, int64_t now_us) {
  return std::min(window_start_us + policy.window().count(),
                  now_us + policy.consistency().lease_ttl.count());
}

double slice_demand(double previous, int64_t granted, int64_t left, int64_t granted_at_us,
                    int64_t now_us) {
  if (granted <= 0 || now_us <= granted_at_us) return previous;
  return static_cast<double>(granted - left) * 1e6 / static_cast<double>(now_us - granted_at_us);
}

int64_t lease_recheck_us(const Policy& policy, const Decision& d) {
  const int64_t wait = d.retry_after.count() > 0 ? d.retry_after.count() : policy.window().count();
  return std::min(policy.consistency().sync_interval.count(), wait);
}

int64_t next_push_us(const Policy& policy, int64_t planned_us, int64_t now_us) {
  const int64_t period = std::max<int64_t>(1, policy.consistency().sync_interval.count() / 2);
  return now_us - planned_us < period ? planned_us + period : now_us + period;
}

int64_t async_over_admission_bound(int64_t instances, double rate_per_instance,
                                   Micros sync_interval, Micros round_trip, int64_t limit) {
  if (instances <= 1) return 0;
  const double others = static_cast<double>(instances - 1);
  const double seconds = static_cast<double>((sync_interval + round_trip).count()) / 1e6;
  const double by_rate = others * std::ceil(std::max(0.0, rate_per_instance) * seconds);
  const double by_limit = others * static_cast<double>(limit);
  return static_cast<int64_t>(std::min(by_rate, by_limit));
}

int64_t lease_under_admission_bound(int64_t instances, const Policy& policy) {
  if (instances <= 1) return 0;
  return std::min(policy.limit(), (instances - 1) * resolved_lease_max(policy));
}

}  // namespace ratelimit::algo
