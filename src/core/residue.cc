// residue.cc — what a store remembers of a key it had to evict before the key was idle, and
// the state it rebuilds from that memory (algorithms.h: Residue, residue_of,
// state_from_residue). A concurrency key's residue is the units its live leases hold until the
// last expires; it comes back as one lease nobody owns.
//
// Why: the memory store holds a bounded number of keys. Forgetting a key that was not idle
// hands its client a fresh limit (issue 23: a key at its limit, evicted by a flood of invented
// keys, was admitted a whole limit again). A 16-byte residue — idle time and units in use —
// keeps enough to refuse what the key had already used.
// Invariants (held by tests/core/residue_test.cc for every algorithm): the rebuilt state never
// admits at any later time a request the forgotten state would refuse; it is monotone in both
// fields of the residue (so residues may be merged by maximum); a residue whose idle time has
// passed rebuilds a fresh state. The rebuilt state uses the algorithm's own state type, so the
// decision math stays in the per-algorithm files.
#include <algorithm>
#include <limits>

#include "ratelimit/algorithms.h"
#include "sliding_window_roll.h"
#include "units.h"

namespace ratelimit::algo {
namespace {

// Micro-units a bucket that drains at `rate` and is empty (or full) at idle_at still holds
// (or misses) at now, rounded up by one micro-unit (drained_u floors each step, so the
// difference of two floors may exceed the floor of the difference by one), capped at `cap`.
int64_t level_before_idle(int64_t idle_at, int64_t now, double rate, int64_t cap) {
  const int64_t left = idle_at - now;
  if (left >= time_to_drain_us(cap, rate)) return cap;
  return std::min(cap, drained_u(left, rate) + 1);
}

// A bucket's largest possible level (taken for the token bucket): max_recorded units, which
// reports may reach (count-denied mode reaches two bursts, admissions one, a leaky bucket's
// below burst + 1: all below it).
int64_t bucket_cap(const Policy& policy) { return max_recorded(policy) * kUnit; }

}  // namespace

Residue residue_of(const Policy& policy, const AlgorithmState& state, int64_t now_us) {
  const int64_t idle = idle_at_us(policy, state);
  if (idle <= now_us) return {};
  const int64_t window = policy.window().count();
  struct Visitor {
    int64_t window;
    double rate;
    int64_t now;
    int64_t idle;
    Residue operator()(const FixedWindowState& s) const { return {idle, s.count, 0}; }
    Residue operator()(const SlidingWindowLogState& s) const {
      int64_t live = s.units;  // the entries past their window are at the front
      for (size_t i = 0; i < s.entries.size() && s.entries[i].at_us <= now - window; ++i) {
        live -= s.entries[i].cost;
      }
      return {idle, live, 0};
    }
    Residue operator()(const SlidingWindowCounterState& s) const {
      // Roll the state to now as decide() would.
      const auto [t, start, prev, curr] = roll_windows(s, now, window);
      if (curr > 0) {  // idle at start + 2W: the estimate's units, the weight frozen at now
        // floor, as decide() rounds the estimate; the weight only falls after now.
        const int64_t weighted = prev * (window - (t - start)) / window;
        return {start + 2 * window, curr + weighted, 0};
      }
      return {start + window, prev, 0};  // only the previous window counts: rebuilt exactly
    }
    // idle = last + time_to_drain(level): the stored pair is (level, idle) exactly.
    Residue operator()(const TokenBucketState& s) const { return bucket(s.taken_u, s.last_us); }
    Residue operator()(const LeakyBucketState& s) const { return bucket(s.level_u, s.last_us); }
    Residue operator()(const ConcurrencyState& s) const {
      int64_t held = 0;
      for (const LeaseEntry& e : s.leases) {
        if (e.expires_us > now) held += e.weight;
      }
      return {idle, held, 0};
    }
    Residue bucket(int64_t level_u, int64_t last_us) const {
      const int64_t elapsed = std::min(elapsed_since(last_us, now), idle - last_us);
      const int64_t now_level = std::max<int64_t>(0, level_u - drained_u(elapsed, rate));
      return {idle, ceil_div(now_level, kUnit), level_u};
    }
  };
  return std::visit(Visitor{window, policy.rate(), now_us, idle}, state);
}

AlgorithmState state_from_residue(const Policy& policy, const Residue& r, int64_t now_us) {
  if (r.idle_at_us <= now_us) return fresh_state(policy);
  const int64_t window = policy.window().count();
  // Not cut at the limit: reports leave debt (up to max_recorded), and a count every hit adds
  // to serves several limits (Policy::fixed_window_every_hit), so a larger one must see it all.
  const int64_t used = std::clamp<int64_t>(r.used, 0, max_recorded(policy));
  const int64_t now = std::max<int64_t>(now_us, 0);
  switch (policy.algorithm()) {
    case Algorithm::kFixedWindow:
      // Live: the forgotten count belongs to the current window (a merged residue may outlive
      // it; then the next window is restricted too, which only errs toward refusing).
      return FixedWindowState{window_start(now, window), used};
    case Algorithm::kSlidingWindowLog: {
      SlidingWindowLogState s;
      if (used > 0) {
        s.entries.push_back({std::min(r.idle_at_us - window, now), used});
        s.units = used;
      }
      return s;
    }
    case Algorithm::kSlidingWindowCounter: {
      // residue_of gives idle = start + 2W with the estimate in curr, or start + W with the
      // previous count; both are "`used` in the window two before idle". Rounded up to a window
      // boundary and never in the future.
      const int64_t aligned = ceil_div(r.idle_at_us, window) * window - 2 * window;
      return SlidingWindowCounterState{std::min(aligned, window_start(now, window)), 0, used};
    }
    case Algorithm::kTokenBucket:
    case Algorithm::kLeakyBucket: {
      const double rate = policy.rate();
      const int64_t cap = bucket_cap(policy);
      int64_t level;
      int64_t last;
      if (r.level_u > 0 && r.level_u <= cap) {  // the key's own residue: its exact state
        level = r.level_u;
        last = r.idle_at_us - time_to_drain_us(level, rate);
      } else {
        level = level_before_idle(r.idle_at_us, now, rate, cap);
        last = now;
      }
      if (policy.algorithm() == Algorithm::kTokenBucket) return TokenBucketState{level, last};
      return LeakyBucketState{level, last};
    }
    case Algorithm::kConcurrency: {
      // The forgotten leases as one that nobody owns (the empty id is never issued, and a
      // release or renew naming it is refused), holding their units until the last would have
      // expired: their holders' releases then free nothing, which only errs toward refusing.
      ConcurrencyState s;
      if (used > 0) s.leases.push_back({LeaseId{}, r.idle_at_us, used});
      return s;
    }
  }
  return fresh_state(policy);
}

}  // namespace ratelimit::algo
