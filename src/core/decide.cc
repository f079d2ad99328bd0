// decide.cc — what the algorithms share: dispatch on the policy's algorithm, fresh
// states, idle times (key expiry and Redis TTLs), the all-or-nothing check over several
// limits, and picking the most restrictive decision for a response.
#include <algorithm>
#include <tuple>
#include <type_traits>

#include "ratelimit/algorithms.h"
#include "units.h"

namespace ratelimit::algo {

AlgorithmState fresh_state(const Policy& policy) {
  switch (policy.algorithm()) {
    case Algorithm::kFixedWindow: return FixedWindowState{};
    case Algorithm::kSlidingWindowLog: return SlidingWindowLogState{};
    case Algorithm::kSlidingWindowCounter: return SlidingWindowCounterState{};
    case Algorithm::kTokenBucket: return TokenBucketState{};
    case Algorithm::kLeakyBucket: return LeakyBucketState{};
    case Algorithm::kConcurrency: return ConcurrencyState{};
  }
  return FixedWindowState{};
}

Decision conflict_decision(const Policy& policy, int64_t until_idle_us) {
  Decision d;
  d.allowed = false;
  d.reason = DecisionReason::kPolicyConflict;
  d.limit = policy.limit();
  d.remaining = 0;
  d.retry_after = d.reset_after = Micros{std::max<int64_t>(until_idle_us, 1)};
  return d;
}

Decision decide(const Policy& policy, AlgorithmState& state, int64_t now_us, int64_t cost, Op op,
                const LeaseId& lease, const adaptive::ReleaseReport& release) {
  if (state.index() != algorithm_index(policy.algorithm())) state = fresh_state(policy);
  if (op == Op::kReport) return report(policy, state, now_us, cost);
  if (auto* c = std::get_if<ConcurrencyState>(&state)) {
    return decide(policy, *c, now_us, cost, op, lease, release);
  }
  return std::visit(
      [&](auto& s) -> Decision {
        if constexpr (std::is_same_v<std::decay_t<decltype(s)>, ConcurrencyState>) {
          return {};  // handled above
        } else {
          return decide(policy, s, now_us, cost, op);
        }
      },
      state);
}

int64_t max_recorded(const Policy& policy) {
  const int64_t limit = policy.limit();
  if (policy.counts_every_hit()) return kMaxEveryHitCount;
  if (policy.is_concurrency()) return limit;
  const int64_t most = (kMaxDebtLimits + 1) * limit;
  if (policy.algorithm() != Algorithm::kSlidingWindowCounter) return most;
  // Its weighted count multiplies a window's units by up to window_us (sliding_window_counter.cc).
  return std::min(most, ((int64_t{1} << 53) - 1) / policy.window().count());
}

Decision report(const Policy& policy, AlgorithmState& state, int64_t now_us, int64_t cost) {
  std::visit(
      [&](auto& s) {
        if constexpr (!std::is_same_v<std::decay_t<decltype(s)>, ConcurrencyState>) {
          record(policy, s, now_us, cost);
        }
      },
      state);
  // A cost-0 peek answers the state as it is: what is left, and until it is all back.
  Decision d = decide(policy, state, now_us, 0, Op::kPeek);
  d.allowed = true;
  d.reason = DecisionReason::kWithinLimit;
  d.retry_after = Micros{0};
  d.delay = Micros{0};
  return d;
}

int64_t idle_at_us(const Policy& policy, const AlgorithmState& state) {
  // A state left by another definition of the policy is replaced on its next decision, so it
  // holds nothing worth keeping (and its numbers mean nothing under this policy's rate).
  if (state.index() != algorithm_index(policy.algorithm())) return 0;
  const int64_t window = policy.window().count();
  struct Visitor {
    int64_t window;
    double rate;
    int64_t operator()(const FixedWindowState& s) const {
      return s.count > 0 ? s.window_start_us + window : 0;
    }
    int64_t operator()(const SlidingWindowLogState& s) const {
      return !s.entries.empty() ? s.entries.back().at_us + window : 0;
    }
    int64_t operator()(const SlidingWindowCounterState& s) const {
      if (s.curr > 0) return s.window_start_us + 2 * window;
      if (s.prev > 0) return s.window_start_us + window;
      return 0;
    }
    int64_t operator()(const TokenBucketState& s) const {
      return s.taken_u > 0 ? s.last_us + time_to_drain_us(s.taken_u, rate) : 0;
    }
    int64_t operator()(const LeakyBucketState& s) const {
      return s.level_u > 0 ? s.last_us + time_to_drain_us(s.level_u, rate) : 0;
    }
    int64_t operator()(const ConcurrencyState& s) const {
      int64_t last = 0;  // leases are in expiry order, so the last one expires last
      if (!s.leases.empty()) last = s.leases.back().expires_us;
      // An adaptive key's learned limit outlives its leases by kRetainUs after its last sample.
      if (s.adaptive.limit_m != 0) last = std::max(last, s.adaptive.last_sample_us + adaptive::kRetainUs);
      return last;
    }
  };
  return std::visit(Visitor{window, policy.rate()}, state);
}

namespace {

// The all-or-nothing check over items read through `at(i)` -> (policy, state, cost, op).
template <typename At>
bool decide_all_items(size_t n, At at, int64_t now_us, std::vector<Decision>& out) {
  out.clear();
  bool all = true;
  for (size_t i = 0; i < n; ++i) {
    const LimitOp l = at(i);
    // A report is never refused: it takes part in the check as admitted (and what a peek of
    // the state as it is would answer stands in until it is recorded).
    out.push_back(decide(*l.policy, *l.state, now_us, l.op == Op::kReport ? 0 : l.cost, Op::kPeek));
    all = all && (out.back().allowed || l.op == Op::kReport);
  }
  if (!all) return false;
  for (size_t i = 0; i < n; ++i) {
    const LimitOp l = at(i);
    if (l.op == Op::kAcquire || l.op == Op::kReport) {
      out[i] = decide(*l.policy, *l.state, now_us, l.cost, l.op);
    }
  }
  return true;
}

}  // namespace

bool decide_all(std::span<const Limit> limits, int64_t now_us, int64_t cost, Op op,
                std::vector<Decision>& out) {
  return decide_all_items(
      limits.size(), [&](size_t i) { return LimitOp{limits[i].policy, limits[i].state, cost, op}; },
      now_us, out);
}

bool decide_all(std::span<const LimitOp> items, int64_t now_us, std::vector<Decision>& out) {
  return decide_all_items(items.size(), [&](size_t i) { return items[i]; }, now_us, out);
}

size_t most_restrictive(std::span<const Decision> decisions) {
  size_t best = 0;
  auto rank = [](const Decision& d) {
    // Higher is more restrictive: exceeds capacity > longest wait > fewest remaining
    // (~remaining = -remaining - 1: the same order, defined for every int64 where the negation
    // of INT64_MIN is not).
    return std::make_tuple(!d.allowed, d.reason == DecisionReason::kExceedsCapacity,
                           d.retry_after.count(), ~d.remaining);
  };
  for (size_t i = 1; i < decisions.size(); ++i) {
    if (rank(decisions[i]) > rank(decisions[best])) best = i;
  }
  return best;
}

}  // namespace ratelimit::algo
