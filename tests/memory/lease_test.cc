// lease_test.cc — concurrency policies on the MemoryStore through ConcurrencyLimiter: the shared
// lease suite (tests/support/lease_suite.h: the RAII Lease, expiry and ownership on a manual
// clock, weights, 200 threads on a limit of 10) and the limiter's refusals of bad input.
#include <gtest/gtest.h>

#include "lease_suite.h"
#include "ratelimit/concurrency_limiter.h"
#include "ratelimit/memory_store.h"

namespace ratelimit {
namespace {

constexpr Micros kTtl{1'000'000};

// The shared lease suite (tests/support/lease_suite.h) on a MemoryStore.
struct MemoryLeaseStore {
  static std::shared_ptr<Store> make(const Clock* clock) {
    MemoryStoreOptions o;
    o.clock = clock;
    return std::make_shared<MemoryStore>(o);
  }
  static void expect_clean(const Store&) {}  // the memory store has no failure counters
  static constexpr std::chrono::microseconds kHold{2000};
  static constexpr std::chrono::microseconds kBackoff{500};
  static constexpr std::chrono::seconds kDeadline{60};
};

}  // namespace

namespace testing {
INSTANTIATE_TYPED_TEST_SUITE_P(Memory, LeaseSuite, MemoryLeaseStore);
}  // namespace testing

namespace {

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

}  // namespace
}  // namespace ratelimit
