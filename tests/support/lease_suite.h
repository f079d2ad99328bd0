// lease_suite.h — the lease tests every store must pass, written once and instantiated per
// store (tests/memory/lease_test.cc, tests/redis/lease_test.cc): the RAII Lease (released on
// destruction, movable, detachable, renewable, reporting whether it was still held), the
// ownership rules on a manual clock (a release after expiry frees nothing; an expired lease
// frees its unit at lease_ttl, not before), weights, and 200 threads contending for a limit of
// 10, counted from outside (lease_contention.h).
//
// Why: the memory and the Redis store must answer leases identically; one suite says so, where
// two copies had begun to differ.
// A store plugs in with a Maker type:
//   static std::shared_ptr<Store> make(const Clock* clock);  // nullptr: real time; a fresh key space
//   static void expect_clean(const Store& store);            // store-specific after-checks
//   static constexpr std::chrono::microseconds kHold, kBackoff;  // contention pacing
//   static constexpr std::chrono::seconds kDeadline;             // contention bound
// Invariants: every test bounds its waits (the contention test by kDeadline); each test gets a
// store of its own (Redis: a unique key prefix), so tests never see each other's leases.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <utility>

#include "eventually.h"
#include "lease_contention.h"
#include "ratelimit/clock.h"
#include "ratelimit/concurrency_limiter.h"

namespace ratelimit::testing {

inline constexpr Micros kSuiteLeaseTtl{1'000'000};

template <typename Maker>
class LeaseSuite : public ::testing::Test {
 protected:
  // A store on `clock` and a limiter of `limit` leases of kSuiteLeaseTtl on it, policy "db".
  void use_limit(int64_t limit) {
    store_ = Maker::make(&clock_);
    ASSERT_NE(store_, nullptr);
    auto l = ConcurrencyLimiter::create(
        Policy::concurrency(limit, kSuiteLeaseTtl).value().with_name("db").value(), store_);
    ASSERT_TRUE(l.ok()) << l.status().to_string();
    limiter_.emplace(std::move(*l));
  }
  int64_t remaining() { return limiter_->peek("k")->remaining; }

  ManualClock clock_{Micros{5'000'000}};
  std::shared_ptr<Store> store_;
  std::optional<ConcurrencyLimiter> limiter_;
};

TYPED_TEST_SUITE_P(LeaseSuite);

TYPED_TEST_P(LeaseSuite, IsReleasedWhenDestroyed) {
  ASSERT_NO_FATAL_FAILURE(this->use_limit(2));
  auto& limiter = *this->limiter_;
  {
    auto a = limiter.acquire("k").value();
    ASSERT_TRUE(a.held());
    EXPECT_FALSE(a.id().empty());
    EXPECT_EQ(this->remaining(), 1);
    auto b = limiter.acquire("k").value();
    ASSERT_TRUE(b.held());
    auto c = limiter.acquire("k").value();
    EXPECT_FALSE(c.held());
    EXPECT_EQ(c.decision().reason, DecisionReason::kOverLimit);
    EXPECT_EQ(c.decision().retry_after, kSuiteLeaseTtl);
    EXPECT_FALSE(c.release().ok()) << "a denied lease holds nothing to release";
  }
  // ~Lease releases without waiting (its contract): with Redis the peek can be answered on
  // another connection before the releases, so wait for them (bounded).
  EXPECT_TRUE(eventually([&] { return this->remaining() == 2; })) << "remaining " << this->remaining();
  TypeParam::expect_clean(*this->store_);
}

TYPED_TEST_P(LeaseSuite, ReleaseReportsWhetherItWasStillHeldAndFreesNothingAfterExpiry) {
  ASSERT_NO_FATAL_FAILURE(this->use_limit(1));
  auto& limiter = *this->limiter_;
  auto a = limiter.acquire("k").value();
  ASSERT_TRUE(a.held());
  this->clock_.advance(kSuiteLeaseTtl - Micros{1});
  EXPECT_FALSE(limiter.acquire("k")->held()) << "freed before lease_ttl";
  this->clock_.advance(Micros{1});
  auto b = limiter.acquire("k").value();  // a expired exactly at lease_ttl: b takes the unit
  ASSERT_TRUE(b.held());
  auto released = a.release();
  ASSERT_TRUE(released.ok());
  EXPECT_FALSE(*released) << "a had expired";
  EXPECT_FALSE(a.held());
  EXPECT_EQ(this->remaining(), 0) << "a's late release freed b's unit";
  EXPECT_TRUE(b.release().value());
  EXPECT_EQ(this->remaining(), 1);
  TypeParam::expect_clean(*this->store_);
}

TYPED_TEST_P(LeaseSuite, RenewExtendsALiveLeaseAndReportsALostOne) {
  ASSERT_NO_FATAL_FAILURE(this->use_limit(1));
  auto& limiter = *this->limiter_;
  auto a = limiter.acquire("k").value();
  this->clock_.advance(kSuiteLeaseTtl - Micros{1});
  ASSERT_TRUE(a.renew().value());
  this->clock_.advance(kSuiteLeaseTtl - Micros{1});
  EXPECT_FALSE(limiter.acquire("k")->held()) << "the renewed lease still holds the unit";
  this->clock_.advance(Micros{1});
  auto renewed = a.renew();
  ASSERT_TRUE(renewed.ok());
  EXPECT_FALSE(*renewed) << "expired: nothing to extend";
  EXPECT_FALSE(a.held());
  EXPECT_EQ(this->remaining(), 1);
  TypeParam::expect_clean(*this->store_);
}

TYPED_TEST_P(LeaseSuite, MoveTransfersOwnershipAndAssignmentReleasesTheOldLease) {
  ASSERT_NO_FATAL_FAILURE(this->use_limit(2));
  auto& limiter = *this->limiter_;
  auto a = limiter.acquire("k").value();
  Lease moved = std::move(a);
  EXPECT_FALSE(a.held());  // NOLINT(bugprone-use-after-move): the contract says so
  EXPECT_TRUE(moved.held());
  auto b = limiter.acquire("k").value();
  EXPECT_EQ(this->remaining(), 0);
  moved = std::move(b);  // releases the first lease, without waiting (as ~Lease does)
  EXPECT_TRUE(eventually([&] { return this->remaining() == 1; })) << "remaining " << this->remaining();
  const LeaseId id = moved.detach();
  EXPECT_FALSE(moved.held());
  EXPECT_EQ(this->remaining(), 1) << "detached: still held in the store";
  EXPECT_TRUE(this->store_->release(limiter.policy(), "k", id)->allowed);
  EXPECT_EQ(this->remaining(), 2);
  TypeParam::expect_clean(*this->store_);
}

TYPED_TEST_P(LeaseSuite, WeightsHoldTheirCost) {
  ASSERT_NO_FATAL_FAILURE(this->use_limit(5));
  auto& limiter = *this->limiter_;
  auto a = limiter.acquire("k", 3).value();
  ASSERT_TRUE(a.held());
  EXPECT_FALSE(limiter.acquire("k", 3)->held());
  auto b = limiter.acquire("k", 2).value();
  ASSERT_TRUE(b.held());
  EXPECT_EQ(limiter.acquire("k", 6)->decision().reason, DecisionReason::kExceedsCapacity);
  a.release().value();
  EXPECT_EQ(this->remaining(), 3);
  TypeParam::expect_clean(*this->store_);
}

// 200 threads on limit 10 (real time; leases far longer than the run).
TYPED_TEST_P(LeaseSuite, TwoHundredAcquirersOnLimitTenNeverHoldMoreThanTen) {
  auto store = TypeParam::make(nullptr);
  ASSERT_NE(store, nullptr);
  auto limiter = ConcurrencyLimiter::create(
                     Policy::concurrency(10, Micros{60'000'000}).value().with_name("db").value(),
                     store)
                     .value();
  const auto r = contend_for_leases(limiter, "hot", 200, 3, TypeParam::kHold, TypeParam::kBackoff,
                                    TypeParam::kDeadline);
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.peak_in_flight, 10);
  EXPECT_EQ(r.admitted, 600);
  EXPECT_EQ(r.released_held, 600);
  EXPECT_EQ(r.released_lost, 0);
  EXPECT_EQ(r.errors, 0);
  EXPECT_GT(r.denied, 0);
  EXPECT_EQ(limiter.peek("hot")->remaining, 10);
  TypeParam::expect_clean(*store);
}

REGISTER_TYPED_TEST_SUITE_P(LeaseSuite, IsReleasedWhenDestroyed,
                            ReleaseReportsWhetherItWasStillHeldAndFreesNothingAfterExpiry,
                            RenewExtendsALiveLeaseAndReportsALostOne,
                            MoveTransfersOwnershipAndAssignmentReleasesTheOldLease,
                            WeightsHoldTheirCost,
                            TwoHundredAcquirersOnLimitTenNeverHoldMoreThanTen);

}  // namespace ratelimit::testing
