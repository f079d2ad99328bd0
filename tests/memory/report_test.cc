// report_test.cc — usage reported after the fact (StoreOp::Kind::kReport, algo::report) on the
// MemoryStore: concurrent reports record exactly their sum; reports to several policies at once
// record in each, and a group with a refused acquire records nothing; bad reports are refused
// and change nothing; a refund on a key the store does not hold adds no entry; a key in debt
// evicted under a flood comes back in debt (its residue keeps units above the limit).
// The per-algorithm semantics (debt, refund, repayment time) are the shared vectors' (report_*
// cases in tests/vectors), run by vectors_test.cc against this store and the pure functions.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "ratelimit/algorithms.h"
#include "ratelimit/memory_store.h"

namespace ratelimit {
namespace {

using namespace std::chrono_literals;

Policy named(Result<Policy> p, const char* name) { return p.value().with_name(name).value(); }

// What the key holds, read back without changing it in the end: a refund of `probe` leaves
// limit - (held - probe) remaining exactly when held >= probe, then the probe is reported back.
int64_t held(MemoryStore& store, const Policy& p, const std::string& key, int64_t probe) {
  auto r = store.report(p, key, -probe);
  EXPECT_TRUE(r.ok());
  const int64_t h = probe + (p.limit() - r->remaining);
  EXPECT_TRUE(store.report(p, key, probe).ok());
  return h;
}

TEST(Report, ConcurrentReportsRecordExactlyTheirSum) {
  ManualClock clock(Micros{1'000'000'000});
  MemoryStore store(MemoryStoreOptions{.clock = &clock});
  for (Policy p : {named(Policy::fixed_window(10'000, 1h), "fw"), named(Policy::sliding_window_log(10'000, 1h), "log"),
                   named(Policy::sliding_window_counter(10'000, 1h), "swc"),
                   named(Policy::token_bucket(1, 10'000), "tb"), named(Policy::leaky_bucket(1, 10'000), "lb")}) {
    SCOPED_TRACE(p.name());
    std::vector<std::thread> threads;
    std::atomic<int> errors{0};
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 200; ++i) {
          auto d = store.report(p, "k", 1 + (t + i) % 5);  // 8 x 200 reports, 3 units on average
          if (!d.ok() || !d->allowed) ++errors;
        }
      });
    }
    for (auto& th : threads) th.join();
    EXPECT_EQ(errors.load(), 0);
    int64_t sum = 0;
    for (int t = 0; t < 8; ++t) {
      for (int i = 0; i < 200; ++i) sum += 1 + (t + i) % 5;
    }
    ASSERT_EQ(sum, 4800);
    EXPECT_EQ(held(store, p, "k", 4000), sum);
    EXPECT_EQ(store.peek(p, "k", 1)->remaining, 10'000 - sum - 1);
  }
}

TEST(Report, SeveralPoliciesAtOnceRecordInEachOrNothingWithARefusal) {
  ManualClock clock(Micros{1'000'000'000});
  MemoryStore store(MemoryStoreOptions{.clock = &clock});
  const Policy minute = named(Policy::fixed_window(100, 1min), "per_minute");
  const Policy day = named(Policy::fixed_window(1000, 24h), "per_day");
  std::vector<StoreOp> both = {{&minute, "t", 150, StoreOp::Kind::kReport}, {&day, "t", 150, StoreOp::Kind::kReport}};
  auto r = store.decide_many(both, Atomicity::kAllOrNothing);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE((*r)[0].allowed);
  EXPECT_EQ((*r)[0].remaining, 0);    // 150 of 100: in debt
  EXPECT_EQ((*r)[1].remaining, 850);
  // A group whose acquire is refused (the minute is in debt) records its report nowhere.
  std::vector<StoreOp> mixed = {{&minute, "t", 1, StoreOp::Kind::kAcquire}, {&day, "t", 7, StoreOp::Kind::kReport}};
  r = store.decide_many(mixed, Atomicity::kAllOrNothing);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE((*r)[0].allowed);
  EXPECT_EQ(store.peek(day, "t", 1)->remaining, 849);
}

TEST(Report, BadReportsAreRefusedAndChangeNothing) {
  ManualClock clock(Micros{1'000'000'000});
  MemoryStore store(MemoryStoreOptions{.clock = &clock});
  const Policy p = named(Policy::fixed_window(10, 1min), "p");
  const Policy leases = named(Policy::concurrency(5, 30s), "c");
  ASSERT_TRUE(store.acquire(p, "k", 4).ok());
  for (int64_t cost : {kMaxCost + 1, -kMaxCost - 1}) {
    auto r = store.report(p, "k", cost);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("cost of a report"), std::string::npos) << r.status().message();
  }
  auto c = store.report(leases, "k", 1);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("concurrency policy"), std::string::npos);
  EXPECT_FALSE(store.report(p, "", 1).ok());
  EXPECT_EQ(store.peek(p, "k", 1)->remaining, 5);
  // The largest refund and report are valid.
  EXPECT_TRUE(store.report(p, "k", -kMaxCost).ok());
  EXPECT_EQ(store.peek(p, "k", 1)->remaining, 9);
}

TEST(Report, ARefundOnAKeyNotHeldAddsNoEntry) {
  ManualClock clock(Micros{1'000'000'000});
  MemoryStore store(MemoryStoreOptions{.clock = &clock});
  const Policy p = named(Policy::token_bucket(1, 10), "p");
  auto d = store.report(p, "nobody", -5);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->remaining, 10);  // a full bucket is never filled above its burst
  EXPECT_EQ(store.key_count(), 0u);
  ASSERT_TRUE(store.report(p, "somebody", 5).ok());
  EXPECT_EQ(store.key_count(), 1u);
}

// A key in debt, evicted by a flood of new keys, must not come back with a fresh limit: its
// residue keeps the units above the limit (state_from_residue caps at max_recorded, not at the
// limit), so it stays refused until the debt is repaid.
TEST(Report, AKeyInDebtEvictedComesBackInDebt) {
  ManualClock clock(Micros{3'600'000'000});  // on a window boundary
  MemoryStore store(MemoryStoreOptions{.max_keys = 64, .shards = 1, .clock = &clock});
  const Policy p = named(Policy::sliding_window_counter(10, 1min), "p");
  const Policy one = named(Policy::fixed_window(1, 1h), "one");
  ASSERT_TRUE(store.report(p, "debtor", 35).ok());  // 25 units of debt
  // A flood of keys at their limit (as restrictive as the debtor) evicts it, oldest first.
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(store.acquire(one, "flood-" + std::to_string(i)).ok());
  const MemoryStoreEvictions e = store.eviction_counts();
  ASSERT_GT(e.total(), 900u) << e.roomy << " " << e.near_limit << " " << e.denied;
  // One window on, the current window's 35 weigh 35 * (1 - elapsed / W): refused while that
  // is above 9, exactly as before eviction — a limit-capped residue (10) would admit at once.
  clock.advance(60s);
  EXPECT_FALSE(store.acquire(p, "debtor", 1)->allowed);
  clock.advance(30s);  // 35 * 0.5 = 17.5 -> 17: still refused
  EXPECT_FALSE(store.acquire(p, "debtor", 1)->allowed);
}

// A sliding log in debt holds more entries than its limit (each report at its own µs is one);
// a snapshot of it must load back (the reader once bounded a log at kMaxSlidingLogLimit
// entries and refused the whole file, so a restart would have lost every key's count).
TEST(Report, ALogInDebtSurvivesASnapshot) {
  ManualClock clock(Micros{1'000'000'000});
  MemoryStoreOptions o{.clock = &clock};
  MemoryStore store(o);
  const Policy p = named(Policy::sliding_window_log(kMaxSlidingLogLimit, 1h), "log");
  for (int64_t i = 0; i < kMaxSlidingLogLimit + 50'000; ++i) {
    clock.advance(1us);
    ASSERT_TRUE(store.report(p, "k", 1).ok());
  }
  const std::string path = "/tmp/rl-report-snapshot-" + std::to_string(::getpid());
  ASSERT_TRUE(store.save(path).ok());
  MemoryStore again(o);
  auto loaded = again.load(path);
  ::unlink(path.c_str());
  ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
  EXPECT_EQ(loaded->keys, 1u);
  // 150,000 held: a refund of 100,000 leaves 50,000 — the whole debt came back.
  EXPECT_EQ(again.report(p, "k", -100'000)->remaining, kMaxSlidingLogLimit - 50'000);
}

}  // namespace
}  // namespace ratelimit
