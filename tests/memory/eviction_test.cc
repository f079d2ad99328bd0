// eviction_test.cc — which entry MemoryStore evicts when a bound is reached, and why it matters:
// a client that can invent keys must not be able to flood a key it is being denied out of the
// store (issue 12: a key denied on 10 per 60 s was admitted 10 more times after ~3 x max_keys
// invented keys, because plain LRU forgot it). Also the eviction counters by kind.
// Deterministic: every store reads a ManualClock that stays still unless a test moves it.
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdio>
#include <ostream>
#include <string>

#include "ratelimit/memory_store.h"
#include "test_policies.h"

namespace ratelimit {
namespace {

using testing_memory::all_algorithms;
using testing_memory::manual;
using testing_memory::NamedPolicy;

const Micros kSecond{1'000'000};


struct FloodCase {
  NamedPolicy policy;
  size_t shards;
};

void PrintTo(const FloodCase& c, std::ostream* os) {
  *os << c.policy.label << " over " << c.shards << " shard(s)";
}

class KeyFlood : public ::testing::TestWithParam<FloodCase> {};

// The attack at 1/100 scale: a key is used up and denied, then 3 x max_keys invented
// keys arrive with one request each; the denied key must still be denied afterwards.
TEST_P(KeyFlood, DeniedKeySurvivesAFloodOfThreeTimesMaxKeysInventedKeys) {
  ManualClock clock(kSecond);
  MemoryStore store(manual(clock, 1000, GetParam().shards));
  const Policy p = GetParam().policy.policy.with_name("login").value();
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(store.acquire(p, "victim")->allowed) << i;
  ASSERT_FALSE(store.acquire(p, "victim")->allowed);
  for (int i = 0; i < 3000; ++i) {
    ASSERT_TRUE(store.acquire(p, "invented-" + std::to_string(i))->allowed) << i;
  }
  EXPECT_LE(store.key_count(), store.capacity());
  EXPECT_GE(store.evictions(), 3000U - store.capacity());
  EXPECT_FALSE(store.acquire(p, "victim")->allowed) << "the flood freed a denied key";
  EXPECT_EQ(store.peek(p, "victim")->remaining, 0);
}

std::vector<FloodCase> flood_cases() {
  std::vector<FloodCase> out;
  for (const NamedPolicy& np : all_algorithms(10)) {
    for (size_t shards : {size_t{1}, size_t{64}}) out.push_back({np, shards});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(EveryAlgorithm, KeyFlood, ::testing::ValuesIn(flood_cases()),
                         [](const auto& param_info) {
                           return param_info.param.policy.label + "_shards" +
                                  std::to_string(param_info.param.shards);
                         });


// ---- the order within and across standings ----

Policy fixed(int64_t limit, Micros window = Micros{60'000'000}, std::string name = "fw") {
  return Policy::fixed_window(limit, window).value().with_name(std::move(name)).value();
}

std::string key(int i) { return "k" + std::to_string(i); }

TEST(EvictionOrder, NearLimitKeySurvivesARoomyFloodAndCountsByKind) {
  ManualClock clock(kSecond);
  MemoryStoreOptions o = manual(clock, 100, 1);
  o.sweep_every = 0;
  MemoryStore store(o);
  const Policy p = fixed(10);
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(store.acquire(p, "busy").ok());  // 4 left: near its limit
  for (int i = 0; i < 300; ++i) EXPECT_TRUE(store.acquire(p, key(i)).ok());
  EXPECT_EQ(store.peek(p, "busy")->remaining, 3);  // still held: 4 left, minus this one
  const MemoryStoreEvictions e = store.eviction_counts();
  EXPECT_EQ(e.roomy, 300U + 1 - 100);
  EXPECT_EQ(e.near_limit, 0U);
  EXPECT_EQ(e.denied, 0U);
  EXPECT_EQ(e.for_bytes, 0U);
  EXPECT_EQ(store.evictions(), e.total());
}

TEST(EvictionOrder, OneRequestKeysOfALimitOfOneDoNotFreeADeniedKey) {
  // With limit 1 every flood key is at its limit after its one request; being denied is what
  // still sets the victim apart.
  ManualClock clock(kSecond);
  MemoryStore store(manual(clock, 100, 1));
  const Policy p = fixed(1);
  ASSERT_TRUE(store.acquire(p, "victim")->allowed);
  ASSERT_FALSE(store.acquire(p, "victim")->allowed);
  int refused = 0;
  for (int i = 0; i < 300; ++i) refused += store.acquire(p, key(i))->allowed ? 0 : 1;
  // Flood keys the residue refused are denied entries too, so when the last 100 are mostly
  // those, a denied entry is evicted, and the least recently used one is the victim. Whether it
  // was is looked at before the victim is asked again: that acquire rebuilds an evicted victim
  // from its residue and holds it once more (asked after it, this check failed ~1 run in 8).
  const bool victim_held = store.holds(p, "victim");
  EXPECT_TRUE(victim_held || store.eviction_counts().denied > 0)
      << "the victim left the table without being counted as a denied eviction";
  EXPECT_FALSE(store.acquire(p, "victim")->allowed) << "held or rebuilt from its residue: denied";
  // 200 one-request keys evicted before their window ended outnumber the 64 residue cells; the
  // rest are marks (issue 33), and a full bucket of marks folds into one that refuses the
  // policy's new keys hashing there (the residue never forgets a use: refused, in part).
  std::printf("flood keys refused: %d of 300, residue saturated %llu\n", refused,
              static_cast<unsigned long long>(store.eviction_counts().residue_saturated));
}

TEST(EvictionOrder, WhenEveryEntryIsDeniedTheBoundStillHoldsAndTheEvictionIsCounted) {
  ManualClock clock(kSecond);
  MemoryStoreOptions o = manual(clock, 10, 1);
  o.sweep_every = 0;
  MemoryStore store(o);
  const Policy p = fixed(1);
  for (int i = 0; i < 10; ++i) {
    EXPECT_TRUE(store.acquire(p, key(i)).ok());
    ASSERT_FALSE(store.acquire(p, key(i))->allowed);
  }
  EXPECT_TRUE(store.acquire(p, "new").ok());
  EXPECT_EQ(store.key_count(), 10U);
  EXPECT_EQ(store.eviction_counts().denied, 1U);
  EXPECT_EQ(store.peek(p, "k0")->remaining, 0);  // the least recently denied went
}

TEST(EvictionOrder, ACostAboveCapacityDoesNotMakeAKeyDenied) {
  // Otherwise two cheap requests (one admitted, one impossible) would protect any key.
  ManualClock clock(kSecond);
  MemoryStore store(manual(clock, 10, 1));
  const Policy p = fixed(10);
  EXPECT_TRUE(store.acquire(p, "a").ok());
  EXPECT_EQ(store.acquire(p, "a", 11)->reason, DecisionReason::kExceedsCapacity);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(store.acquire(p, key(i)).ok());
  EXPECT_FALSE(store.holds(p, "a"));  // evicted (its residue still counts its one unit)
  EXPECT_EQ(store.eviction_counts().roomy, 1U);
}

TEST(EvictionOrder, WithinAStandingTheEntryThatIdlesSoonestGoesFirst) {
  ManualClock clock(kSecond);
  MemoryStoreOptions o = manual(clock, 4, 1);
  o.sweep_every = 0;
  MemoryStore store(o);
  const Policy hour = fixed(10, Micros{3'600'000'000}, "hour");
  const Policy second = fixed(10, kSecond, "second");
  EXPECT_TRUE(store.acquire(hour, "a").ok());    // least recently used, but idle only in an hour
  EXPECT_TRUE(store.acquire(second, "b").ok());  // idle at the next second
  EXPECT_TRUE(store.acquire(hour, "c").ok());
  EXPECT_TRUE(store.acquire(hour, "d").ok());
  EXPECT_TRUE(store.acquire(hour, "e").ok());
  EXPECT_TRUE(store.holds(hour, "a"));
  EXPECT_FALSE(store.holds(second, "b"));
  EXPECT_EQ(store.evictions(), 1U);
}

TEST(EvictionOrder, ADenyingLimitOfAcquireAllIsProtectedLikeAPlainDenial) {
  ManualClock clock(kSecond);
  MemoryStore store(manual(clock, 100, 1));
  const Policy both[] = {fixed(2, Micros{60'000'000}, "per_minute"),
                         fixed(100, Micros{3'600'000'000}, "per_hour")};
  ASSERT_TRUE(store.acquire_all(both, "victim").ok());
  ASSERT_TRUE(store.acquire_all(both, "victim").ok());
  const auto denied = store.acquire_all(both, "victim");
  ASSERT_FALSE((*denied)[0].allowed);
  for (int i = 0; i < 300; ++i) EXPECT_TRUE(store.acquire(both[0], key(i)).ok());
  EXPECT_FALSE((*store.acquire_all(both, "victim"))[0].allowed);
}

// ---- the byte bound ----

Policy log_policy(int64_t limit) {
  return Policy::sliding_window_log(limit, Micros{5'000'000}).value().with_name("log").value();
}

TEST(ByteBound, LogsThatOutgrowTheShareEvictOthersAndAreCountedForBytes) {
  ManualClock clock(kSecond);
  MemoryStoreOptions o = manual(clock, 1000, 1);
  o.max_bytes = 64 * 1024;
  o.sweep_every = 0;
  MemoryStore store(o);
  ASSERT_EQ(store.byte_capacity(), 64U * 1024);
  const Policy p = log_policy(500);
  // 100 keys with 10 requests each: ~100 * (80 + 200) bytes, well within the share.
  for (int i = 0; i < 100; ++i) {
    for (int r = 0; r < 10; ++r) EXPECT_TRUE(store.acquire(p, key(i)).ok());
  }
  EXPECT_EQ(store.key_count(), 100U);
  EXPECT_EQ(store.evictions(), 0U);
  // One key takes 400 requests (6.4 KB of log at least) 10 times over: the bound holds.
  for (int i = 0; i < 10; ++i) {
    for (int r = 0; r < 400; ++r) EXPECT_TRUE(store.acquire(p, "big" + std::to_string(i)).ok());
    ASSERT_LE(store.bytes(), store.byte_capacity()) << i;
  }
  const MemoryStoreEvictions e = store.eviction_counts();
  EXPECT_GT(e.for_bytes, 0U);
  EXPECT_EQ(e.for_bytes, e.total());  // never the key bound
  EXPECT_EQ(e.denied, 0U);
  // The big keys near their limit outrank the roomy small ones: the newest is held.
  EXPECT_EQ(store.peek(p, "big9")->remaining, 99);
}

TEST(ByteBound, OneEntryLargerThanTheShareIsHeldAloneAndStaysExact) {
  ManualClock clock(kSecond);
  MemoryStoreOptions o = manual(clock, 1000, 1);
  o.max_bytes = 4 * 1024;  // smaller than one log at its limit (500 * 16 bytes)
  MemoryStore store(o);
  const Policy p = log_policy(500);
  EXPECT_TRUE(store.acquire(p, "other").ok());
  int admitted = 0;
  for (int r = 0; r < 600; ++r) admitted += store.acquire(p, "big")->allowed ? 1 : 0;
  EXPECT_EQ(admitted, 500);  // never forgotten, so never more than the limit
  EXPECT_EQ(store.key_count(), 1U);
  EXPECT_GT(store.bytes(), store.byte_capacity());
}

TEST(ByteBound, BytesCountWhatTheAllocatorHolds) {
  // bytes() against the allocator's own count, for O(1) keys, long keys and logs of several
  // sizes (the figure max_bytes bounds must be real memory, within a few percent).
  ManualClock clock(kSecond);
  for (int live : {0, 1, 5, 50}) {
    malloc_trim(0);
    const struct mallinfo2 m0 = mallinfo2();
    {
      MemoryStore store(manual(clock, 1'000'000, 64));
      const Policy tb = Policy::token_bucket(0.001, 10).value().with_name("tb").value();
      const Policy lg = log_policy(500);
      for (int i = 0; i < 20'000; ++i) {
        if (live == 0) {
          EXPECT_TRUE(store.acquire(tb, "user:0123456789abcdef:" + std::to_string(i)).ok());
        } else {
          for (int r = 0; r < live; ++r) EXPECT_TRUE(store.acquire(lg, key(i)).ok());
        }
      }
      const struct mallinfo2 m1 = mallinfo2();
      const auto held = static_cast<double>((m1.uordblks + m1.hblkhd) - (m0.uordblks + m0.hblkhd));
      const auto counted = static_cast<double>(store.bytes());
      std::printf("live=%d: counted %.1f B/key, allocator %.1f B/key\n", live, counted / 20'000,
                  held / 20'000);
      // The documented bound: an entry, a long key's block, a queue of at most 2n + 2.
      EXPECT_LE(counted / 20'000, 80.0 + 48.0 + 16.0 + 16.0 * (2 * live + 2)) << live;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
      (void)held;  // a sanitizer's allocator: mallinfo2 does not see it
#else
      EXPECT_NEAR(counted / held, 1.0, 0.15) << live;
#endif
    }
  }
}

}  // namespace
}  // namespace ratelimit
