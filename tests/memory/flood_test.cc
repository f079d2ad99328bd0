// flood_test.cc — a flood of invented keys at their limit must not lock out new keys (issue 33
// finding 1). The review's case: memory store max_keys 1000, shards 4, five policies (fixed
// window, sliding log, sliding counter, token and leaky bucket; limit 10 per hour or burst 10);
// 3,000 invented keys of cost 10 on the fixed-window policy, each at its limit after one
// request. Before the fix every residue cell was shared after the flood: a fresh sliding-log key
// was refused its first request, a fresh token-bucket key got 4 of 10, and fresh keys of the
// flooded policy were refused outright. Required: another policy's fresh keys are never
// refused; at 3 x max_keys at most 10 % of the flooded policy's fresh keys are; a key at its
// limit before the flood still gains nothing; past the table's size (100 x), the rates of the
// operator's choice (MemoryStoreOptions::when_saturated) are measured and printed, and each
// mode's promise asserted.
// Deterministic: a ManualClock that moves only when the test moves it. Fresh keys are asked by
// peek (it creates nothing, so measuring does not evict more flood keys).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "ratelimit/memory_store.h"
#include "test_policies.h"

namespace ratelimit {
namespace {

using testing_memory::manual;

const Micros kHour{3'600'000'000LL};
constexpr int64_t kLimit = 10;

std::vector<Policy> five_policies() {
  const double per_hour = 10.0 / 3600.0;
  return {Policy::fixed_window(kLimit, kHour).value().with_name("fixed").value(),
          Policy::sliding_window_log(kLimit, kHour).value().with_name("log").value(),
          Policy::sliding_window_counter(kLimit, kHour).value().with_name("counter").value(),
          Policy::token_bucket(per_hour, kLimit).value().with_name("token").value(),
          Policy::leaky_bucket(per_hour, kLimit, LeakyMode::kPolice).value().with_name("leaky").value()};
}

struct Flooded {
  ManualClock clock{Micros{1'000'000}};
  std::unique_ptr<MemoryStore> store;
  std::vector<Policy> policies = five_policies();

  // A store of the review's shape with `victim` at its limit on the fixed-window policy, then
  // `times` x max_keys invented keys of cost 10 on it.
  Flooded(int times, SaturationChoice choice) {
    MemoryStoreOptions o = manual(clock, 1000, 4);
    o.when_saturated = choice;
    store = std::make_unique<MemoryStore>(o);
    EXPECT_TRUE(store->acquire(policies[0], "victim", kLimit)->allowed);
    for (int i = 0; i < times * 1000; ++i) {
      EXPECT_TRUE(store->acquire(policies[0], "invented-" + std::to_string(i), kLimit).ok());
    }
  }
  // Of `n` fresh keys of policy `p`, how many are refused their first unit.
  int refused_fresh(const Policy& p, int n) {
    int refused = 0;
    for (int i = 0; i < n; ++i) refused += store->peek(p, "fresh-" + std::to_string(i))->allowed ? 0 : 1;
    return refused;
  }
  // Units a key takes one at a time (at most 2 x limit asked).
  int64_t drain(const Policy& p, const std::string& key) {
    int64_t n = 0;
    for (int64_t k = 0; k < 2 * kLimit; ++k) n += store->acquire(p, key)->allowed ? 1 : 0;
    return n;
  }
};

TEST(KeyFlood, ThreeTimesMaxKeysRefusesNoOtherPolicysKeysAndFewOfItsOwn) {
  Flooded f(3, SaturationChoice::kRefuse);
  ASSERT_FALSE(f.store->holds(f.policies[0], "victim")) << "the flood did not evict the victim";
  for (size_t k = 1; k < f.policies.size(); ++k) {
    EXPECT_EQ(f.refused_fresh(f.policies[k], 1000), 0) << f.policies[k].name();
    EXPECT_EQ(f.drain(f.policies[k], "another"), kLimit) << f.policies[k].name();
  }
  const int refused = f.refused_fresh(f.policies[0], 1000);
  std::printf("3x max_keys, refuse: %d of 1000 fresh keys of the flooded policy refused\n", refused);
  EXPECT_LE(refused, 100) << "more than 10 % of fresh keys refused after a 3x flood";
  EXPECT_EQ(f.drain(f.policies[0], "victim"), 0) << "the victim, at its limit, gained units";
}

// After a 100 x flood: no other policy's fresh key refused; the flooded policy's refusals of
// 1000 fresh keys, printed with the counters.
int hundred_times_report(Flooded& f, const char* mode) {
  for (size_t k = 1; k < f.policies.size(); ++k) {
    EXPECT_EQ(f.refused_fresh(f.policies[k], 1000), 0) << f.policies[k].name();
  }
  const int refused = f.refused_fresh(f.policies[0], 1000);
  const MemoryStoreEvictions e = f.store->eviction_counts();
  std::printf("100x max_keys, %s: %d of 1000 fresh keys of the flooded policy refused (restrictive "
              "residues folded into a saturation mark %llu, dropped %llu, of %llu evictions)\n",
              mode, refused, static_cast<unsigned long long>(e.residue_saturated),
              static_cast<unsigned long long>(e.residue_dropped), static_cast<unsigned long long>(e.total()));
  return refused;
}

TEST(KeyFlood, HundredTimesMaxKeysRefuseModeStillGivesTheVictimNothing) {
  Flooded f(100, SaturationChoice::kRefuse);
  hundred_times_report(f, "refuse");
  const MemoryStoreEvictions e = f.store->eviction_counts();
  EXPECT_GT(e.residue_saturated, 0U) << "a 100x flood saturates the table";
  EXPECT_EQ(e.residue_dropped, 0U) << "refuse mode forgets no restrictive residue";
  EXPECT_EQ(f.drain(f.policies[0], "victim"), 0) << "the victim, at its limit, gained units";
}

TEST(KeyFlood, HundredTimesMaxKeysAdmitModeAdmitsFreshKeysAndCountsWhatItForgot) {
  Flooded f(100, SaturationChoice::kAdmit);
  const int refused = hundred_times_report(f, "admit");
  const MemoryStoreEvictions e = f.store->eviction_counts();
  EXPECT_LE(refused, 10) << "admit mode refuses a fresh key only on a fingerprint collision";
  EXPECT_EQ(e.residue_saturated, 0U);
  EXPECT_GT(e.residue_dropped, 0U) << "the price of admitting: forgotten residues, counted";
}

}  // namespace
}  // namespace ratelimit
