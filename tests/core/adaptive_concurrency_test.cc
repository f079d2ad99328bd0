// adaptive_concurrency_test.cc — a concurrency policy whose limit adapts
// (Policy::adaptive_concurrency, algo::decide on ConcurrencyState): its factory's bounds, the
// learned limit as the decision's limit, a release's round trip measured from the lease's grant
// (or the latency it reports), an expired lease counted as a drop exactly once, and a fixed
// policy untouched by outcomes. Pure calls with explicit times: no clock, no sleeps.
#include <gtest/gtest.h>

#include "ratelimit/algorithms.h"

namespace ratelimit::algo {
namespace {

using adaptive::AdaptiveConfig;
using adaptive::Estimator;

Policy aimd(int64_t min, int64_t init, int64_t max, Micros ttl = Micros{1'000'000}) {
  auto p = Policy::adaptive_concurrency(AdaptiveConfig{Estimator::kAimd, min, init, max, 0}, ttl);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return *p;
}

LeaseId id(uint8_t n) {
  LeaseId l;
  l.bytes[0] = n;
  l.bytes[15] = 1;
  return l;
}

TEST(AdaptiveConcurrency, FactoryBounds) {
  EXPECT_FALSE(Policy::adaptive_concurrency({Estimator::kGradient2, 0, 1, 5, 0}, Micros{1'000'000}).ok());
  EXPECT_FALSE(Policy::adaptive_concurrency({Estimator::kGradient2, 5, 4, 10, 0}, Micros{1'000'000}).ok());
  EXPECT_FALSE(Policy::adaptive_concurrency({Estimator::kGradient2, 1, 1, 100'001, 0}, Micros{1'000'000}).ok());
  EXPECT_FALSE(Policy::adaptive_concurrency({Estimator::kGradient2, 1, 1, 5, 0}, Micros{0}).ok()) << "lease_ttl";
  const Policy p = aimd(1, 4, 8);
  EXPECT_EQ(p.limit(), 8) << "the capacity is max_limit";
  EXPECT_TRUE(p.adaptive().has_value());
  EXPECT_FALSE(p.with_limit(3).ok()) << "a learned limit takes no request's own limit";
  EXPECT_FALSE(Policy::concurrency(8, Micros{1'000'000})->adaptive().has_value());
}

TEST(AdaptiveConcurrency, StartsAtInitialLimitAndLearnsFromReleases) {
  const Policy p = aimd(1, 2, 8);
  ConcurrencyState s;
  EXPECT_EQ(concurrency_limit(p, s), 2);
  ASSERT_TRUE(decide(p, s, 0, 1, Op::kAcquire, id(1)).allowed);
  const Decision second = decide(p, s, 0, 1, Op::kAcquire, id(2));
  ASSERT_TRUE(second.allowed);
  EXPECT_EQ(second.limit, 2);
  EXPECT_FALSE(decide(p, s, 0, 1, Op::kAcquire, id(3)).allowed) << "the initial limit holds";
  // Lease 2 was granted with 2 in flight (>= half of 2): an ok release grows the limit to 3.
  const Decision r = decide(p, s, 500, 1, Op::kRelease, id(2), {false, -1});
  EXPECT_TRUE(r.allowed);
  EXPECT_EQ(r.limit, 3);
  EXPECT_EQ(r.remaining, 2);
  // A dropped release takes 10 %: 3 -> 2.7, applied as 2.
  EXPECT_EQ(decide(p, s, 600, 1, Op::kRelease, id(1), {true, -1}).limit, 2);
  EXPECT_EQ(s.adaptive.limit_m, 2700);
  // Releasing again is kLeaseNotHeld and no sample.
  EXPECT_EQ(decide(p, s, 700, 1, Op::kRelease, id(1), {true, -1}).reason, DecisionReason::kLeaseNotHeld);
  EXPECT_EQ(s.adaptive.limit_m, 2700);
}

TEST(AdaptiveConcurrency, RoundTripFromGrantOrReportedLatency) {
  auto p = Policy::adaptive_concurrency({Estimator::kVegas, 1, 10, 100, 0}, Micros{10'000'000});
  ASSERT_TRUE(p.ok());
  ConcurrencyState s;
  ASSERT_TRUE(decide(*p, s, 1'000, 1, Op::kAcquire, id(1)).allowed);
  ASSERT_TRUE(decide(*p, s, 2'000, 1, Op::kAcquire, id(2)).allowed);
  ASSERT_TRUE(decide(*p, s, 3'000, 1, Op::kRenew, id(1)).allowed);
  decide(*p, s, 21'000, 1, Op::kRelease, id(1));
  EXPECT_EQ(s.adaptive.noload_rtt_us, 20'000) << "grant (1 ms) to release (21 ms); a renew does not restart it";
  decide(*p, s, 500'000, 1, Op::kRelease, id(2), {false, 7'000});
  EXPECT_EQ(s.adaptive.noload_rtt_us, 7'000) << "the reported latency replaces the measured 498 ms";
}

TEST(AdaptiveConcurrency, AnExpiredLeaseIsOneDropOnce) {
  const Policy p = aimd(1, 10, 10, Micros{1'000});
  ConcurrencyState s;
  ASSERT_TRUE(decide(p, s, 0, 1, Op::kAcquire, id(1)).allowed);
  EXPECT_EQ(decide(p, s, 999, 1, Op::kPeek, {}).limit, 10);
  EXPECT_EQ(decide(p, s, 1'000, 1, Op::kPeek, {}).limit, 9) << "expired at its TTL: a drop, 10 -> 9";
  EXPECT_EQ(s.adaptive.limit_m, 9'000);
  EXPECT_EQ(decide(p, s, 5'000, 1, Op::kPeek, {}).limit, 9) << "counted once";
  EXPECT_EQ(decide(p, s, 6'000, 1, Op::kRelease, id(1), {true, -1}).reason, DecisionReason::kLeaseNotHeld);
  EXPECT_EQ(s.adaptive.limit_m, 9'000) << "a late release of the expired lease is no second sample";
}

TEST(AdaptiveConcurrency, LearnedLimitOutlivesItsLeasesForTheRetention) {
  const Policy p = aimd(1, 2, 8);
  ConcurrencyState s;
  ASSERT_TRUE(decide(p, s, 0, 1, Op::kAcquire, id(1)).allowed);
  decide(p, s, 100, 1, Op::kRelease, id(1));
  AlgorithmState st = s;
  EXPECT_EQ(idle_at_us(p, st), 100 + adaptive::kRetainUs);
}

TEST(AdaptiveConcurrency, FixedPoliciesIgnoreOutcomes) {
  const Policy p = *Policy::concurrency(2, Micros{1'000'000});
  ConcurrencyState s;
  ASSERT_TRUE(decide(p, s, 0, 1, Op::kAcquire, id(1)).allowed);
  const Decision r = decide(p, s, 10, 1, Op::kRelease, id(1), {true, 5});
  EXPECT_EQ(r.limit, 2);
  EXPECT_EQ(s.adaptive, adaptive::AdaptiveState{});
}

}  // namespace
}  // namespace ratelimit::algo
