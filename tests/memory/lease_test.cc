// lease_test.cc — concurrency policies on the MemoryStore through ConcurrencyLimiter: the RAII
// Lease (released on destruction, renewable, reporting whether it was still held), the
// ownership rules on a manual clock (a release after expiry frees nothing; an expired lease
// frees its unit at lease_ttl, not before), and 200 threads contending for a limit of 10,
// counted from outside (tests/support/lease_contention.h).
#include <gtest/gtest.h>

#include "lease_contention.h"
#include "ratelimit/concurrency_limiter.h"
#include "ratelimit/memory_store.h"

namespace ratelimit {
namespace {

constexpr Micros kTtl{1'000'000};

struct Fixture {
  ManualClock clock{Micros{5'000'000}};
  std::shared_ptr<MemoryStore> store;
  ConcurrencyLimiter limiter;

  explicit Fixture(int64_t limit)
      : store(make_store(clock)),
        limiter(ConcurrencyLimiter::create(
                    Policy::concurrency(limit, kTtl).value().with_name("db").value(), store)
                    .value()) {}
  static std::shared_ptr<MemoryStore> make_store(const ManualClock& clock) {
    MemoryStoreOptions o;
    o.clock = &clock;
    return std::make_shared<MemoryStore>(o);
  }
  int64_t remaining() { return limiter.peek("k")->remaining; }
};

TEST(Lease, IsReleasedWhenDestroyed) {
  Fixture f(2);
  {
    auto a = f.limiter.acquire("k").value();
    ASSERT_TRUE(a.held());
    EXPECT_FALSE(a.id().empty());
    EXPECT_EQ(f.remaining(), 1);
    auto b = f.limiter.acquire("k").value();
    ASSERT_TRUE(b.held());
    auto c = f.limiter.acquire("k").value();
    EXPECT_FALSE(c.held());
    EXPECT_EQ(c.decision().reason, DecisionReason::kOverLimit);
    EXPECT_EQ(c.decision().retry_after, kTtl);
    EXPECT_FALSE(c.release().ok()) << "a denied lease holds nothing to release";
  }
  EXPECT_EQ(f.remaining(), 2);
}

TEST(Lease, ReleaseReportsWhetherItWasStillHeldAndFreesNothingAfterExpiry) {
  Fixture f(1);
  auto a = f.limiter.acquire("k").value();
  ASSERT_TRUE(a.held());
  f.clock.advance(kTtl - Micros{1});
  EXPECT_FALSE(f.limiter.acquire("k")->held()) << "freed before lease_ttl";
  f.clock.advance(Micros{1});
  auto b = f.limiter.acquire("k").value();  // a expired exactly at lease_ttl: b takes the unit
  ASSERT_TRUE(b.held());
  auto released = a.release();
  ASSERT_TRUE(released.ok());
  EXPECT_FALSE(*released) << "a had expired";
  EXPECT_FALSE(a.held());
  EXPECT_EQ(f.remaining(), 0) << "a's late release freed b's unit";
  EXPECT_TRUE(b.release().value());
  EXPECT_EQ(f.remaining(), 1);
}

TEST(Lease, RenewExtendsALiveLeaseAndReportsALostOne) {
  Fixture f(1);
  auto a = f.limiter.acquire("k").value();
  f.clock.advance(kTtl - Micros{1});
  ASSERT_TRUE(a.renew().value());
  f.clock.advance(kTtl - Micros{1});
  EXPECT_FALSE(f.limiter.acquire("k")->held()) << "the renewed lease still holds the unit";
  f.clock.advance(Micros{1});
  auto renewed = a.renew();
  ASSERT_TRUE(renewed.ok());
  EXPECT_FALSE(*renewed) << "expired: nothing to extend";
  EXPECT_FALSE(a.held());
  EXPECT_EQ(f.remaining(), 1);
}

TEST(Lease, MoveTransfersOwnershipAndAssignmentReleasesTheOldLease) {
  Fixture f(2);
  auto a = f.limiter.acquire("k").value();
  Lease moved = std::move(a);
  EXPECT_FALSE(a.held());  // NOLINT(bugprone-use-after-move): the contract says so
  EXPECT_TRUE(moved.held());
  auto b = f.limiter.acquire("k").value();
  EXPECT_EQ(f.remaining(), 0);
  moved = std::move(b);  // releases the first lease
  EXPECT_EQ(f.remaining(), 1);
  const LeaseId id = moved.detach();
  EXPECT_FALSE(moved.held());
  EXPECT_EQ(f.remaining(), 1) << "detached: still held in the store";
  EXPECT_TRUE(f.store->release(f.limiter.policy(), "k", id)->allowed);
  EXPECT_EQ(f.remaining(), 2);
}

TEST(Lease, WeightsHoldTheirCost) {
  Fixture f(5);
  auto a = f.limiter.acquire("k", 3).value();
  ASSERT_TRUE(a.held());
  EXPECT_FALSE(f.limiter.acquire("k", 3)->held());
  auto b = f.limiter.acquire("k", 2).value();
  ASSERT_TRUE(b.held());
  EXPECT_EQ(f.limiter.acquire("k", 6)->decision().reason, DecisionReason::kExceedsCapacity);
  a.release().value();
  EXPECT_EQ(f.remaining(), 3);
}

TEST(ConcurrencyLimiter, RefusesARatePolicyAndBadInput) {
  auto store = std::make_shared<MemoryStore>();
  EXPECT_EQ(ConcurrencyLimiter::create(Policy::fixed_window(1, kTtl).value(), store).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(ConcurrencyLimiter::create(Policy::concurrency(1, kTtl).value(), nullptr).ok());
  auto l = ConcurrencyLimiter::create(Policy::concurrency(1, kTtl).value(), store).value();
  EXPECT_EQ(l.acquire("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(l.acquire("k", 0).status().code(), StatusCode::kInvalidArgument);
  // A release naming another key's lease frees nothing.
  auto a = l.acquire("x").value();
  EXPECT_EQ(store->release(l.policy(), "y", a.id())->reason, DecisionReason::kLeaseNotHeld);
  EXPECT_EQ(l.peek("x")->remaining, 0);
}

// 200 threads on limit 10 (real time, the system clock; leases far longer than the run).
TEST(ConcurrencyLimiter, TwoHundredAcquirersOnLimitTenNeverHoldMoreThanTen) {
  auto store = std::make_shared<MemoryStore>();
  auto limiter = ConcurrencyLimiter::create(
                     Policy::concurrency(10, Micros{60'000'000}).value().with_name("db").value(),
                     store)
                     .value();
  const auto r = testing::contend_for_leases(limiter, "hot", 200, 3, std::chrono::microseconds(2000),
                                             std::chrono::microseconds(500),
                                             std::chrono::seconds(60));
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.peak_in_flight, 10);
  EXPECT_EQ(r.admitted, 600);
  EXPECT_EQ(r.released_held, 600);
  EXPECT_EQ(r.released_lost, 0);
  EXPECT_EQ(r.errors, 0);
  EXPECT_GT(r.denied, 0);
  EXPECT_EQ(limiter.peek("hot")->remaining, 10);
}

}  // namespace
}  // namespace ratelimit
