// algorithms_test.cc — named edge cases of the five decision functions, what each admits under
// the boundary attack and under sustained traffic, count-denied mode under a long attack, and
// the shared helpers (dispatch, fresh_state, idle_at_us, decide_all, most_restrictive).
//
// The hand-worked vectors (tests/vectors) and the randomized properties (property_test.cc)
// cover exactness; these tests pin down behaviour a reader asks about by name.
#include <gtest/gtest.h>

#include <deque>
#include <vector>

#include "core_test_util.h"
#include "ratelimit/algorithms.h"

namespace ratelimit {
namespace {

using algo::AlgorithmState;
using algo::Op;
using testing::must;
using testing::window_policy;

constexpr int64_t kSecond = 1'000'000;

Decision acquire(const Policy& p, AlgorithmState& s, int64_t t, int64_t cost = 1) {
  return algo::decide(p, s, t, cost, Op::kAcquire);
}

// L = 10 per 10 ms, as each algorithm spells it (buckets: rate 1000/s, burst 10).
std::vector<Policy> ten_per_10ms() {
  return {window_policy(Algorithm::kFixedWindow, 10, 10'000),
          window_policy(Algorithm::kSlidingWindowLog, 10, 10'000),
          window_policy(Algorithm::kSlidingWindowCounter, 10, 10'000),
          must(Policy::token_bucket(1000, 10)),
          must(Policy::leaky_bucket(1000, 10, LeakyMode::kPolice))};
}

// ---------------------------------------------------------------------------------------------
// The boundary attack: L requests just before a fixed-window edge and L just after.

TEST(BoundaryAttack, OnlyTheFixedWindowAdmitsTwiceTheLimitAcrossAnEdge) {
  // One request per microsecond from 100us before a window edge to 100us after it (a span
  // of 200us, 2% of the 10ms window), on a fresh key.
  //   fixed window: 10 before the edge + 10 after = 2L;
  //   sliding log: 10 (nothing leaves the log within 200us);
  //   sliding counter: 10, then at 1us past the edge the previous window's weight
  //     floor(10 * 9999/10000) = 9 leaves room for one more: L + 1;
  //   token bucket: 10 (refill is 1 token per ms);
  //   leaky bucket: 10, then one more as soon as 1000 u have leaked (floor(level) < b): b + 1.
  const int64_t edge = 100 * 10'000;  // a multiple of the window
  const std::vector<int64_t> expected = {20, 10, 11, 10, 11};
  auto policies = ten_per_10ms();
  for (size_t i = 0; i < policies.size(); ++i) {
    const Policy& p = policies[i];
    AlgorithmState s = algo::fresh_state(p);
    int64_t admitted = 0;
    for (int64_t t = edge - 100; t < edge + 100; ++t) admitted += acquire(p, s, t).allowed;
    EXPECT_EQ(admitted, expected[i]) << p.name();
  }
}

// Over a long run of greedy traffic (a request every 37us for 2s), the most admitted in any
// interval of one window length W (10ms): the sliding log never exceeds L, the fixed window
// reaches 2L, the buckets stay within b + r*W (token) and b + 1 + r*W (leaky, see above).
TEST(BoundaryAttack, MostAdmittedInAnyWindowLengthUnderGreedyTraffic) {
  const int64_t W = 10'000;
  const std::vector<int64_t> bound = {20, 10, 20, 20, 21};
  auto policies = ten_per_10ms();
  for (size_t i = 0; i < policies.size(); ++i) {
    const Policy& p = policies[i];
    AlgorithmState s = algo::fresh_state(p);
    std::deque<int64_t> recent;  // admission times within the last W
    int64_t most = 0;
    for (int64_t t = 0; t < 2 * kSecond; t += 37) {
      if (!acquire(p, s, t).allowed) continue;
      recent.push_back(t);
      while (recent.front() <= t - W) recent.pop_front();
      most = std::max<int64_t>(most, static_cast<int64_t>(recent.size()));
    }
    EXPECT_LE(most, bound[i]) << p.name();
    if (p.algorithm() == Algorithm::kSlidingWindowLog) {
      EXPECT_EQ(most, 10);
    }
  }
}

TEST(BoundaryAttack, LongRunRateIsTheConfiguredRate) {
  // 10 s of one request per 100us (10x the limit): each algorithm admits ~10 per 10 ms.
  auto policies = ten_per_10ms();
  for (const Policy& p : policies) {
    AlgorithmState s = algo::fresh_state(p);
    int64_t admitted = 0;
    for (int64_t t = 0; t < 10 * kSecond; t += 100) admitted += acquire(p, s, t).allowed;
    // 1000 windows of 10, plus at most one burst (and the leaky bucket's extra unit).
    EXPECT_GE(admitted, 10'000 - 10) << p.name();
    EXPECT_LE(admitted, 10'000 + 11) << p.name();
  }
}

// ---------------------------------------------------------------------------------------------
// Count-denied mode (login throttling).

TEST(CountDenied, SustainedAttackIsLockedOutAndStateStaysBounded) {
  // An attacker tries every 50us for 1 s (20x the limit). With every attempt counted:
  //   fixed window: the first L of every window still pass (100 windows x 10);
  //   sliding log: the log always holds the newest L attempts: only the first 10 pass;
  //   sliding counter: the current window fills with attempts: only the first 10 pass;
  //   buckets: the debt never drains: only the first burst passes (leaky: b + 1).
  const std::vector<int64_t> expected = {1000, 10, 10, 10, 11};
  auto policies = ten_per_10ms();
  for (size_t i = 0; i < policies.size(); ++i) {
    const Policy p = policies[i].with_count_denied();
    AlgorithmState s = algo::fresh_state(p);
    int64_t admitted = 0;
    int64_t t = 0;
    for (; t < kSecond; t += 50) {
      admitted += acquire(p, s, t).allowed;
      // Bounded state: at most L units recorded (buckets: a debt of at most one burst).
      if (auto* log = std::get_if<algo::SlidingWindowLogState>(&s)) {
        ASSERT_LE(log->units, 10);
        ASSERT_LE(log->entries.size(), 10u);
        ASSERT_LE(log->entries.capacity(), 2 * log->entries.size() + 2);
      } else if (auto* tb = std::get_if<algo::TokenBucketState>(&s)) {
        ASSERT_LE(tb->taken_u, 20 * algo::kUnit);
      } else if (auto* lb = std::get_if<algo::LeakyBucketState>(&s)) {
        ASSERT_LE(lb->level_u, 20 * algo::kUnit);
      } else if (auto* fw = std::get_if<algo::FixedWindowState>(&s)) {
        ASSERT_LE(fw->count, 10);
      } else if (auto* sc = std::get_if<algo::SlidingWindowCounterState>(&s)) {
        ASSERT_LE(sc->curr, 10);
        ASSERT_LE(sc->prev, 10);
      }
    }
    EXPECT_EQ(admitted, expected[i]) << p.name();
    // Once the attack stops, the key recovers within two windows (buckets: two drain times).
    const int64_t recovered_by = t + 2 * p.window().count();
    EXPECT_LE(algo::idle_at_us(p, s), recovered_by) << p.name();
    EXPECT_TRUE(acquire(p, s, recovered_by).allowed) << p.name();
  }
}

TEST(CountDenied, WithoutItTheSameAttackGetsTheLimitEveryWindow) {
  auto policies = ten_per_10ms();
  for (const Policy& p : policies) {
    AlgorithmState s = algo::fresh_state(p);
    int64_t admitted = 0;
    for (int64_t t = 0; t < kSecond; t += 50) admitted += acquire(p, s, t).allowed;
    EXPECT_GE(admitted, 1000 - 10) << p.name();
  }
}

TEST(CountDenied, PeekAndExceedsCapacityRecordNothing) {
  for (const Policy& base : ten_per_10ms()) {
    const Policy p = base.with_count_denied();
    AlgorithmState s = algo::fresh_state(p);
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(acquire(p, s, 0).allowed);
    const AlgorithmState full = s;
    for (int i = 0; i < 100; ++i) {
      EXPECT_FALSE(algo::decide(p, s, 0, 1, Op::kPeek).allowed);
      EXPECT_EQ(algo::decide(p, s, 0, 11, Op::kAcquire).reason,
                DecisionReason::kExceedsCapacity);
    }
    EXPECT_TRUE(testing::same_state(p, full, s, 0)) << p.name();
  }
}

// ---------------------------------------------------------------------------------------------
// Per-algorithm edge cases.

TEST(FixedWindow, WindowsAlignToMultiplesOfTheWindowNotToTheFirstRequest) {
  Policy p = window_policy(Algorithm::kFixedWindow, 1, kSecond);
  AlgorithmState s = algo::fresh_state(p);
  EXPECT_EQ(acquire(p, s, 1'700'000'000'250'000).reset_after.count(), 750'000);
  Decision d = acquire(p, s, 1'700'000'000'999'999);
  EXPECT_EQ(d.retry_after.count(), 1);
  EXPECT_TRUE(acquire(p, s, 1'700'000'001'000'000).allowed);
}

TEST(FixedWindow, SkippingManyWindowsForgetsTheCount) {
  Policy p = window_policy(Algorithm::kFixedWindow, 2, 1000);
  AlgorithmState s = algo::fresh_state(p);
  ASSERT_TRUE(acquire(p, s, 500, 2).allowed);
  EXPECT_TRUE(acquire(p, s, 500 + 1000 * 12345, 2).allowed);
}

TEST(SlidingWindowLog, MemoryStaysBoundedOverALongRun) {
  // The log is a ring whose capacity follows its size: expired entries give their room back.
  Policy p = window_policy(Algorithm::kSlidingWindowLog, 100, 10'000);
  AlgorithmState s = algo::fresh_state(p);
  for (int64_t t = 0; t < 10 * kSecond; t += 7) {
    acquire(p, s, t);
    const auto& log = std::get<algo::SlidingWindowLogState>(s);
    ASSERT_LE(log.entries.size(), 100u);
    ASSERT_LE(log.entries.capacity(), 2 * log.entries.size() + 2);
  }
}

TEST(SlidingWindowLog, CapacityShrinksAfterABurst) {
  // Issue 12: a burst of 500 and then a trickle kept the burst's capacity for good (a vector
  // used as a queue never shrank), ~1.3 KB per key at a few live entries.
  Policy p = window_policy(Algorithm::kSlidingWindowLog, 500, 5 * kSecond);
  AlgorithmState s = algo::fresh_state(p);
  for (int i = 0; i < 500; ++i) ASSERT_TRUE(acquire(p, s, 1000 + i).allowed);
  const auto& log = std::get<algo::SlidingWindowLogState>(s);
  EXPECT_GE(log.entries.capacity(), 500u);
  // One request per second from then on: at most 5 live entries.
  for (int64_t t = 6 * kSecond; t < 30 * kSecond; t += kSecond) {
    ASSERT_TRUE(acquire(p, s, t).allowed);
    ASSERT_LE(log.entries.size(), 5u);
  }
  EXPECT_LE(log.entries.capacity(), 2 * log.entries.size() + 2);
  EXPECT_LE(log.entries.heap_bytes(), 8u + 16u * 12u);
  // Emptied: no block at all.
  acquire(p, s, 60 * kSecond);
  AlgorithmState copy = s;
  EXPECT_EQ(std::get<algo::SlidingWindowLogState>(copy).entries.size(), 1u);
  EXPECT_EQ(std::get<algo::SlidingWindowLogState>(copy).entries.capacity(), 1u);
}

TEST(SlidingWindowLog, QueueKeepsOrderAcrossWrapAndResize) {
  algo::SlidingLogQueue q;
  int64_t next_in = 0;
  int64_t next_out = 0;
  // Pushes and pops in uneven runs so the ring wraps, grows and shrinks many times.
  for (int round = 0; round < 200; ++round) {
    const int pushes = (round * 7) % 13 + 1;
    const int pops = (round * 5) % 11;
    for (int i = 0; i < pushes; ++i, ++next_in) q.push_back({next_in, next_in});
    for (int i = 0; i < pops && !q.empty(); ++i) {
      ASSERT_EQ(q[0].at_us, next_out);
      q.pop_front();
      ++next_out;
    }
    q.shrink_to_bound();
    ASSERT_EQ(q.size(), static_cast<size_t>(next_in - next_out));
    ASSERT_LE(q.capacity(), 2 * q.size() + 2);
    for (size_t i = 0; i < q.size(); ++i) ASSERT_EQ(q[i].at_us, next_out + static_cast<int64_t>(i));
    if (!q.empty()) {
      ASSERT_EQ(q.back().at_us, next_in - 1);
    }
  }
  algo::SlidingLogQueue moved = std::move(q);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.heap_bytes(), 0u);
  EXPECT_EQ(moved.size(), static_cast<size_t>(next_in - next_out));
}

TEST(SlidingWindowLog, LargestAllowedLimitFillsAndRefusesExactly) {
  Policy p = window_policy(Algorithm::kSlidingWindowLog, kMaxSlidingLogLimit, 60 * kSecond);
  AlgorithmState s = algo::fresh_state(p);
  for (int64_t i = 0; i < kMaxSlidingLogLimit; ++i) ASSERT_TRUE(acquire(p, s, i).allowed);
  Decision d = acquire(p, s, kMaxSlidingLogLimit);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.retry_after.count(), 60 * kSecond - kMaxSlidingLogLimit);  // the t=0 entry
  EXPECT_TRUE(acquire(p, s, 60 * kSecond).allowed);
}

TEST(SlidingWindowLog, SameTimestampEntriesLeaveTogether) {
  Policy p = window_policy(Algorithm::kSlidingWindowLog, 3, kSecond);
  AlgorithmState s = algo::fresh_state(p);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(acquire(p, s, 10).allowed);
  Decision d = acquire(p, s, 20, 3);  // needs all three gone: they leave at 10 + W
  EXPECT_EQ(d.retry_after.count(), kSecond - 10);
}

TEST(SlidingWindowCounter, PreviousWindowWeighsLinearlyRoundedDown) {
  Policy p = window_policy(Algorithm::kSlidingWindowCounter, 100, kSecond);
  AlgorithmState s = algo::fresh_state(p);
  ASSERT_TRUE(acquire(p, s, 0, 100).allowed);
  // At 1.25s: est = floor(100 * 0.75) = 75 -> 25 fit, the 26th does not.
  EXPECT_TRUE(acquire(p, s, 1'250'000, 25).allowed);
  Decision d = acquire(p, s, 1'250'000, 1);
  EXPECT_FALSE(d.allowed);
  // floor(100 * (W - e) / W) <= 74  <=>  e >= W - floor((75W - 1) / 100) = 250001.
  EXPECT_EQ(d.retry_after.count(), 1);
}

TEST(SlidingWindowCounter, ATwoWindowGapForgetsBothWindows) {
  Policy p = window_policy(Algorithm::kSlidingWindowCounter, 5, kSecond);
  AlgorithmState s = algo::fresh_state(p);
  ASSERT_TRUE(acquire(p, s, 999'999, 5).allowed);
  EXPECT_FALSE(acquire(p, s, 1'000'000).allowed);
  EXPECT_TRUE(acquire(p, s, 2'000'000, 5).allowed);  // prev is the empty window [1s, 2s)
}

TEST(TokenBucket, NewKeyStartsFull) {
  Policy p = must(Policy::token_bucket(1, 5));
  AlgorithmState s = algo::fresh_state(p);
  EXPECT_TRUE(acquire(p, s, 1'700'000'000'000'000, 5).allowed);
  EXPECT_FALSE(acquire(p, s, 1'700'000'000'000'000).allowed);
}

TEST(TokenBucket, RefillIsCappedAtBurst) {
  Policy p = must(Policy::token_bucket(1000, 3));
  AlgorithmState s = algo::fresh_state(p);
  ASSERT_TRUE(acquire(p, s, 0, 3).allowed);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(acquire(p, s, 1'000'000'000).allowed);
  EXPECT_FALSE(acquire(p, s, 1'000'000'000).allowed);
}

TEST(TokenBucket, PartialTokensAreNotSpendable) {
  // 0.999999 of a token is not a token: remaining counts whole tokens.
  Policy p = must(Policy::token_bucket(1, 1));
  AlgorithmState s = algo::fresh_state(p);
  ASSERT_TRUE(acquire(p, s, 0).allowed);
  Decision d = algo::decide(p, s, 999'999, 1, Op::kPeek);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
  EXPECT_EQ(d.retry_after.count(), 1);
}

TEST(TokenBucket, ExtremeRatesStayExact) {
  // The fastest (1e9/s, a token per ns) and slowest (1e-6/s, a token per 11.6 days) rates.
  Policy fast = must(Policy::token_bucket(kMaxRate, 1'000'000'000));
  AlgorithmState s = algo::fresh_state(fast);
  ASSERT_TRUE(acquire(fast, s, 0, 1'000'000'000).allowed);
  Decision d = acquire(fast, s, 0, 1000);
  EXPECT_EQ(d.retry_after.count(), 1);  // 1000 tokens per us
  EXPECT_TRUE(acquire(fast, s, 1, 1000).allowed);

  Policy slow = must(Policy::token_bucket(kMinRate, 1));
  AlgorithmState t = algo::fresh_state(slow);
  ASSERT_TRUE(acquire(slow, t, 0).allowed);
  Decision w = acquire(slow, t, 0);
  EXPECT_EQ(w.retry_after.count(), 1'000'000'000'000);  // 1e6 s
  EXPECT_FALSE(acquire(slow, t, w.retry_after.count() - 1).allowed);
  EXPECT_TRUE(acquire(slow, t, w.retry_after.count()).allowed);
}

TEST(TokenBucket, HugeTimeJumpDoesNotOverflow) {
  Policy p = must(Policy::token_bucket(1e9, 1'000'000'000));
  AlgorithmState s = algo::fresh_state(p);
  ASSERT_TRUE(acquire(p, s, 0, 1'000'000'000).allowed);
  // Elapsed * rate would be 4e24 u; the refill caps elapsed before multiplying.
  Decision d = acquire(p, s, 4'000'000'000'000'000, 1'000'000'000);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
}

TEST(LeakyBucket, ShapeModeSpacesAdmittedRequestsAtTheRate) {
  Policy p = must(Policy::leaky_bucket(4, 4, LeakyMode::kShape));  // one per 250ms
  AlgorithmState s = algo::fresh_state(p);
  for (int64_t i = 0; i < 4; ++i) {
    Decision d = acquire(p, s, 0);
    ASSERT_TRUE(d.allowed);
    EXPECT_EQ(d.delay.count(), i * 250'000);  // served at 0, 250ms, 500ms, 750ms
  }
}

TEST(LeakyBucket, PoliceModeNeverDelays) {
  Policy p = must(Policy::leaky_bucket(4, 4, LeakyMode::kPolice));
  AlgorithmState s = algo::fresh_state(p);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(acquire(p, s, 0).delay.count(), 0);
}

TEST(LeakyBucket, QueueHoldingExactlyBurstAdmitsAfterOneMicroUnitLeaks) {
  // DESIGN.md: admitted when floor(level) + cost <= b, i.e. level < b for cost 1. A queue at
  // exactly b units admits again once any of it has leaked (here 1 u after 1us at 1/s).
  Policy p = must(Policy::leaky_bucket(1, 2));
  AlgorithmState s = algo::fresh_state(p);
  ASSERT_TRUE(acquire(p, s, 0, 2).allowed);
  EXPECT_EQ(acquire(p, s, 0).retry_after.count(), 1);
  EXPECT_TRUE(acquire(p, s, 1).allowed);
  EXPECT_EQ(acquire(p, s, 1).retry_after.count(), kSecond);
}

// ---------------------------------------------------------------------------------------------
// Shared helpers.

TEST(Dispatch, AStateOfAnotherAlgorithmIsReplacedByAFreshOne) {
  Policy fixed = window_policy(Algorithm::kFixedWindow, 1, kSecond);
  Policy bucket = must(Policy::token_bucket(1, 1));
  AlgorithmState s = algo::fresh_state(fixed);
  ASSERT_TRUE(acquire(fixed, s, 0).allowed);
  ASSERT_FALSE(acquire(fixed, s, 0).allowed);
  EXPECT_TRUE(acquire(bucket, s, 0).allowed);  // the policy was redefined: a fresh bucket
  EXPECT_TRUE(std::holds_alternative<algo::TokenBucketState>(s));
}

TEST(FreshState, MatchesTheAlgorithmAndIsIdle) {
  for (const Policy& p : ten_per_10ms()) {
    AlgorithmState s = algo::fresh_state(p);
    EXPECT_EQ(s.index(), static_cast<size_t>(p.algorithm()));
    EXPECT_LE(algo::idle_at_us(p, s), 0);
  }
}

TEST(IdleAt, IsWhenTheLastUnitLeavesOrRefills) {
  const int64_t t = 1'000'005'000;  // 5ms into a 10ms window
  const std::vector<int64_t> expected = {
      1'000'010'000,  // fixed: end of the window
      1'000'015'000,  // log: the entry at t leaves at t + W
      1'000'020'000,  // counter: both windows gone (conservative; est is 0 earlier)
      t + 1'000,      // token: 1 token at 1000/s
      t + 1'000,      // leaky: 1 unit at 1000/s
  };
  auto policies = ten_per_10ms();
  for (size_t i = 0; i < policies.size(); ++i) {
    AlgorithmState s = algo::fresh_state(policies[i]);
    ASSERT_TRUE(acquire(policies[i], s, t).allowed);
    EXPECT_EQ(algo::idle_at_us(policies[i], s), expected[i]) << policies[i].name();
  }
}

struct TwoLimits {
  Policy per_second = window_policy(Algorithm::kFixedWindow, 2, kSecond).with_name("sec").value();
  Policy per_minute =
      window_policy(Algorithm::kSlidingWindowLog, 3, 60 * kSecond).with_name("min").value();
  AlgorithmState a = algo::fresh_state(per_second);
  AlgorithmState b = algo::fresh_state(per_minute);
  std::vector<algo::Limit> limits() { return {{&per_second, &a}, {&per_minute, &b}}; }
};

TEST(DecideAll, AllAdmitThenEveryLimitConsumes) {
  TwoLimits x;
  std::vector<Decision> out;
  EXPECT_TRUE(algo::decide_all(x.limits(), 0, 1, Op::kAcquire, out));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].remaining, 1);
  EXPECT_EQ(out[1].remaining, 2);
  EXPECT_TRUE(algo::decide_all(x.limits(), 0, 1, Op::kAcquire, out));
  EXPECT_EQ(out[0].remaining, 0);
  EXPECT_EQ(out[1].remaining, 1);
}

TEST(DecideAll, OneDenialMeansNothingConsumes) {
  TwoLimits x;
  std::vector<Decision> out;
  ASSERT_TRUE(algo::decide_all(x.limits(), 0, 2, Op::kAcquire, out));  // sec full, min 1 left
  const AlgorithmState a = x.a, b = x.b;
  EXPECT_FALSE(algo::decide_all(x.limits(), 10, 1, Op::kAcquire, out));
  EXPECT_FALSE(out[0].allowed);
  EXPECT_EQ(out[0].reason, DecisionReason::kOverLimit);
  EXPECT_TRUE(out[1].allowed);  // what it would have left: 0
  EXPECT_EQ(out[1].remaining, 0);
  EXPECT_TRUE(testing::same_state(x.per_second, a, x.a, 10));
  EXPECT_TRUE(testing::same_state(x.per_minute, b, x.b, 10));
  // The per-minute unit was not spent: next second it is still there.
  EXPECT_TRUE(algo::decide_all(x.limits(), kSecond, 1, Op::kAcquire, out));
  EXPECT_FALSE(algo::decide_all(x.limits(), kSecond, 1, Op::kAcquire, out));
  EXPECT_EQ(out[1].reason, DecisionReason::kOverLimit);
}

TEST(DecideAll, ExceedsCapacityOnOneLimitConsumesNothing) {
  TwoLimits x;
  std::vector<Decision> out;
  EXPECT_FALSE(algo::decide_all(x.limits(), 0, 3, Op::kAcquire, out));  // 3 > sec's 2
  EXPECT_EQ(out[0].reason, DecisionReason::kExceedsCapacity);
  EXPECT_TRUE(out[1].allowed);
  EXPECT_TRUE(algo::decide_all(x.limits(), 0, 2, Op::kAcquire, out));
  EXPECT_EQ(out[1].remaining, 1);
}

TEST(DecideAll, PeekChangesNothingAndCountDeniedDoesNotRecord) {
  TwoLimits x;
  x.per_minute = x.per_minute.with_count_denied();  // would log a denied attempt on its own
  std::vector<Decision> out;
  EXPECT_TRUE(algo::decide_all(x.limits(), 0, 2, Op::kPeek, out));
  EXPECT_EQ(std::get<algo::FixedWindowState>(x.a).count, 0);
  EXPECT_TRUE(std::get<algo::SlidingWindowLogState>(x.b).entries.empty());
  EXPECT_TRUE(algo::decide_all(x.limits(), 0, 2, Op::kAcquire, out));
  // Next second: per_second admits, per_minute (2 of 3 used) denies cost 2: nothing changes.
  EXPECT_FALSE(algo::decide_all(x.limits(), kSecond, 2, Op::kAcquire, out));
  EXPECT_EQ(out[1].reason, DecisionReason::kOverLimit);
  EXPECT_EQ(std::get<algo::FixedWindowState>(x.a).window_start_us, 0);
  EXPECT_EQ(std::get<algo::SlidingWindowLogState>(x.b).units, 2);
  EXPECT_EQ(std::get<algo::SlidingWindowLogState>(x.b).entries.size(), 1u);
}

Decision decision(bool allowed, DecisionReason reason, int64_t remaining, int64_t retry) {
  Decision d;
  d.allowed = allowed;
  d.reason = reason;
  d.remaining = remaining;
  d.retry_after = Micros{retry};
  return d;
}

TEST(MostRestrictive, PicksTheDenialWithTheLongestWaitElseTheFewestRemaining) {
  const auto ok = DecisionReason::kWithinLimit;
  const auto over = DecisionReason::kOverLimit;
  const auto never = DecisionReason::kExceedsCapacity;
  std::vector<Decision> all_ok = {decision(true, ok, 5, 0), decision(true, ok, 2, 0),
                                  decision(true, ok, 2, 0)};
  EXPECT_EQ(algo::most_restrictive(all_ok), 1u);  // fewest remaining; ties: the first
  std::vector<Decision> one_denied = {decision(true, ok, 0, 0), decision(false, over, 3, 10)};
  EXPECT_EQ(algo::most_restrictive(one_denied), 1u);
  std::vector<Decision> two_denied = {decision(false, over, 0, 10), decision(false, over, 0, 99),
                                      decision(false, over, 0, 5)};
  EXPECT_EQ(algo::most_restrictive(two_denied), 1u);
  std::vector<Decision> impossible = {decision(false, over, 0, 1'000'000),
                                      decision(false, never, 4, 0)};
  EXPECT_EQ(algo::most_restrictive(impossible), 1u);
  std::vector<Decision> single = {decision(true, ok, 1, 0)};
  EXPECT_EQ(algo::most_restrictive(single), 0u);
}

}  // namespace
}  // namespace ratelimit
