// waiting_rule_test.cc — the waiting rules (include/ratelimit/waiting_rule.h), case by case,
// worked by hand: which denials are waited on, the deadline edge (a retry exactly at the
// deadline waits, one microsecond later does not), concurrency waiting past its retry_after,
// and when the next waiter is decided at once.
#include <gtest/gtest.h>

#include "ratelimit/waiting_rule.h"

namespace ratelimit::algo {
namespace {

Decision denied(int64_t retry_after_us, DecisionReason why = DecisionReason::kOverLimit) {
  Decision d;
  d.allowed = false;
  d.reason = why;
  d.limit = 10;
  d.retry_after = Micros{retry_after_us};
  return d;
}

Decision admitted(int64_t remaining) {
  Decision d;
  d.allowed = true;
  d.limit = 10;
  d.remaining = remaining;
  return d;
}

TEST(WaitingRule, OnlyAnOverLimitDenialWithARetryIsWaitable) {
  EXPECT_TRUE(waitable(denied(1)));
  EXPECT_FALSE(waitable(denied(0)));  // nothing says when it could pass
  EXPECT_FALSE(waitable(denied(500, DecisionReason::kExceedsCapacity)));
  EXPECT_FALSE(waitable(denied(500, DecisionReason::kStoreFailedClosed)));
  EXPECT_FALSE(waitable(denied(500, DecisionReason::kLeaseNotHeld)));
  EXPECT_FALSE(waitable(admitted(3)));
}

TEST(WaitingRule, ARatePolicyWaitsOnlyForARetryWithinTheDeadline) {
  // Denied at t = 1,000 with retry_after 400: it could pass at 1,400.
  EXPECT_TRUE(worth_waiting(denied(400), false, 1'000, 1'400));   // exactly at the deadline
  EXPECT_FALSE(worth_waiting(denied(400), false, 1'000, 1'399));  // one µs too late
  EXPECT_TRUE(worth_waiting(denied(400), false, 1'000, 9'000));
  // Re-decided at the head at 1,300 (retry 200 → 1,500) against a deadline of 1,450: leaves.
  EXPECT_FALSE(worth_waiting(denied(200), false, 1'300, 1'450));
  EXPECT_FALSE(worth_waiting(denied(500, DecisionReason::kExceedsCapacity), false, 0, 1'000'000));
}

TEST(WaitingRule, AConcurrencyWaiterWaitsWhateverItsRetryAfter) {
  // The earliest lease expiry is 5 s away, the deadline 1 s: a release may come any moment.
  EXPECT_TRUE(worth_waiting(denied(5'000'000), true, 0, 1'000'000));
  EXPECT_FALSE(worth_waiting(denied(0), true, 0, 1'000'000));
  EXPECT_FALSE(worth_waiting(admitted(0), true, 0, 1'000'000));
}

TEST(WaitingRule, TheNextWaiterIsDecidedAtOnceWhileRoomIsLeft) {
  // Rate: any unit left lets the next one be decided by the algorithm's own check.
  EXPECT_TRUE(next_decided_at_once(admitted(1), false, 5));
  EXPECT_FALSE(next_decided_at_once(admitted(0), false, 1));
  // Concurrency: the free units must cover the next waiter's cost.
  EXPECT_TRUE(next_decided_at_once(admitted(2), true, 2));
  EXPECT_FALSE(next_decided_at_once(admitted(1), true, 2));
  EXPECT_FALSE(next_decided_at_once(admitted(0), true, 1));
}

}  // namespace
}  // namespace ratelimit::algo
