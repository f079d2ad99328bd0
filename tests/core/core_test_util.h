// core_test_util.h — helpers shared by the tests in tests/core: building policies that must be
// valid, comparing algorithm states, and checking the Decision invariants of decision.h.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ratelimit/algorithms.h"
#include "ratelimit/decision.h"
#include "ratelimit/policy.h"

namespace ratelimit::testing {

// The policy, or a test failure naming why it was refused.
inline Policy must(Result<Policy> r) {
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return std::move(r).value();
}

inline Result<Policy> window_policy_result(Algorithm a, int64_t limit, int64_t window_us) {
  switch (a) {
    case Algorithm::kFixedWindow: return Policy::fixed_window(limit, Micros{window_us});
    case Algorithm::kSlidingWindowLog: return Policy::sliding_window_log(limit, Micros{window_us});
    default: return Policy::sliding_window_counter(limit, Micros{window_us});
  }
}

inline Policy window_policy(Algorithm a, int64_t limit, int64_t window_us) {
  return must(window_policy_result(a, limit, window_us));
}

// Same decisions-relevant contents at time `now`: log entries that have expired by `now` (they
// await compaction, and a peek may drop them) do not count.
inline bool same_state(const Policy& policy, const algo::AlgorithmState& a,
                       const algo::AlgorithmState& b, int64_t now) {
  if (a.index() != b.index()) return false;
  if (auto* x = std::get_if<algo::FixedWindowState>(&a)) {
    auto& y = std::get<algo::FixedWindowState>(b);
    return x->window_start_us == y.window_start_us && x->count == y.count;
  }
  if (auto* x = std::get_if<algo::SlidingWindowCounterState>(&a)) {
    auto& y = std::get<algo::SlidingWindowCounterState>(b);
    return x->window_start_us == y.window_start_us && x->prev == y.prev && x->curr == y.curr;
  }
  if (auto* x = std::get_if<algo::TokenBucketState>(&a)) {
    auto& y = std::get<algo::TokenBucketState>(b);
    return x->taken_u == y.taken_u && x->last_us == y.last_us;
  }
  if (auto* x = std::get_if<algo::LeakyBucketState>(&a)) {
    auto& y = std::get<algo::LeakyBucketState>(b);
    return x->level_u == y.level_u && x->last_us == y.last_us;
  }
  auto live = [&](const algo::SlidingWindowLogState& s) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (size_t i = 0; i < s.entries.size(); ++i) {
      if (s.entries[i].at_us > now - policy.window().count()) {
        out.emplace_back(s.entries[i].at_us, s.entries[i].cost);
      }
    }
    return out;
  };
  return live(std::get<algo::SlidingWindowLogState>(a)) ==
         live(std::get<algo::SlidingWindowLogState>(b));
}

inline std::string describe(const Decision& d) {
  return std::string(decision_reason_name(d.reason)) + (d.allowed ? " allowed" : " denied") +
         " limit=" + std::to_string(d.limit) + " remaining=" + std::to_string(d.remaining) +
         " reset_after=" + std::to_string(d.reset_after.count()) +
         " retry_after=" + std::to_string(d.retry_after.count()) +
         " delay=" + std::to_string(d.delay.count());
}

// The invariants every Decision from algo::decide keeps (decision.h), for a request of `cost`.
inline void expect_decision_invariants(const Policy& p, int64_t cost, const Decision& d) {
  SCOPED_TRACE(describe(d));
  EXPECT_EQ(d.limit, p.limit());
  EXPECT_GE(d.remaining, 0);
  EXPECT_LE(d.remaining, p.limit());
  EXPECT_GE(d.reset_after.count(), 0);
  EXPECT_GE(d.delay.count(), 0);
  if (cost > p.limit()) {
    EXPECT_FALSE(d.allowed);
    EXPECT_EQ(d.reason, DecisionReason::kExceedsCapacity);
  }
  switch (d.reason) {
    case DecisionReason::kWithinLimit:
      EXPECT_TRUE(d.allowed);
      EXPECT_EQ(d.retry_after.count(), 0);
      // An admitted request holds units until at least its own departure.
      EXPECT_GT(d.reset_after.count(), 0);
      break;
    case DecisionReason::kOverLimit:
      EXPECT_FALSE(d.allowed);
      EXPECT_GT(d.retry_after.count(), 0);
      EXPECT_EQ(d.delay.count(), 0);
      break;
    case DecisionReason::kExceedsCapacity:
      EXPECT_FALSE(d.allowed);
      EXPECT_LE(p.limit(), cost - 1);
      EXPECT_EQ(d.retry_after.count(), 0);
      EXPECT_EQ(d.delay.count(), 0);
      break;
    default: ADD_FAILURE() << "algorithms never fail open or closed";
  }
  const bool shaping =
      p.algorithm() == Algorithm::kLeakyBucket && p.leaky_mode() == LeakyMode::kShape;
  if (!shaping) {
    EXPECT_EQ(d.delay.count(), 0);
  }
}

}  // namespace ratelimit::testing
