// denial_cache_test.cc — DenialCache in front of a MemoryStore driven by a ManualClock: what it
// remembers, what it answers, for how long, what it never caches, how resets and admissions
// make it forget, the memory bound and the counters. CountingStore (test_stores.h) sits between
// the cache and the store so every test can assert whether the store was asked.
#include "ratelimit/denial_cache.h"

#include <gtest/gtest.h>

#include <malloc.h>

#include <string>
#include <vector>

#include "ratelimit/memory_store.h"
#include "test_stores.h"

namespace ratelimit {
namespace {

using testing::CountingStore;
using testing::DeferredStore;

constexpr Micros kSecond{1'000'000};

struct Rig {
  explicit Rig(DenialCacheOptions o = {}) {
    MemoryStoreOptions mo;
    mo.clock = &clock;
    memory = std::make_shared<MemoryStore>(mo);
    counting = std::make_shared<CountingStore>(memory);
    o.clock = &clock;
    cache = DenialCache::wrap(counting, o).value();
  }
  ManualClock clock{Micros{1'000'000'000}};
  std::shared_ptr<MemoryStore> memory;
  std::shared_ptr<CountingStore> counting;
  std::shared_ptr<DenialCache> cache;
};

Policy window(int64_t limit, Micros w = 10 * kSecond) {
  return Policy::fixed_window(limit, w).value().with_name("w").value();
}

TEST(DenialCache, RepeatOfADenialIsAnsweredLocallyWithTheStoresAnswer) {
  Rig r;
  const Policy p = window(3);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(r.cache->acquire(p, "k")->allowed);
  auto first = r.cache->acquire(p, "k");
  ASSERT_FALSE(first->allowed);
  EXPECT_EQ(r.counting->acquires, 4);
  EXPECT_EQ(r.cache->counters().inserts, 1u);

  r.clock.advance(Micros{234'567});  // within max_ttl (1 s by default)
  auto again = r.cache->acquire(p, "k");
  EXPECT_EQ(r.counting->acquires, 4) << "the repeat reached the store";
  EXPECT_EQ(r.cache->counters().hits, 1u);
  // What the store itself says now (peek changes nothing).
  auto store_says = r.memory->peek(p, "k");
  EXPECT_EQ(*again, *store_says);
  EXPECT_EQ(again->retry_after, first->retry_after - Micros{234'567});
  EXPECT_EQ(again->remaining, 0);
  EXPECT_EQ(again->reason, DecisionReason::kOverLimit);
}

TEST(DenialCache, PeekIsAnsweredFromTheCacheAndItsDenialsAreRemembered) {
  Rig r;
  const Policy p = window(1);
  ASSERT_TRUE(r.cache->acquire(p, "k")->allowed);
  ASSERT_FALSE(r.cache->peek(p, "k")->allowed);  // remembered from a peek
  EXPECT_EQ(r.counting->peeks, 1);
  auto a = r.cache->acquire(p, "k");  // answered from it
  EXPECT_FALSE(a->allowed);
  EXPECT_EQ(r.counting->acquires, 1);
  auto pk = r.cache->peek(p, "k");
  EXPECT_FALSE(pk->allowed);
  EXPECT_EQ(r.counting->peeks, 1);
  EXPECT_EQ(r.cache->counters().hits, 2u);
}

TEST(DenialCache, AsyncFormsAnswerInlineOnAHit) {
  Rig r;
  const Policy p = window(1);
  ASSERT_TRUE(r.cache->acquire(p, "k")->allowed);
  ASSERT_FALSE(r.cache->acquire(p, "k")->allowed);
  bool called = false;
  r.cache->acquire_async(p, "k", 1, [&](Result<Decision> d) {
    called = true;
    EXPECT_FALSE(d->allowed);
  });
  EXPECT_TRUE(called) << "a hit completes before the call returns";
  EXPECT_EQ(r.counting->acquires, 2);
}

TEST(DenialCache, EntryEndsAtMaxTtlWhenRetryAfterIsLonger) {
  Rig r;
  const Policy p = window(2, 10 * kSecond);
  r.clock.set(Micros{1'000'000'000});  // a window boundary (10 s divides 1000 s)
  ASSERT_TRUE(r.cache->acquire(p, "k")->allowed);
  ASSERT_TRUE(r.cache->acquire(p, "k")->allowed);
  r.clock.advance(Micros{3'000'000});
  auto denied = r.cache->acquire(p, "k");
  ASSERT_FALSE(denied->allowed);
  ASSERT_EQ(denied->retry_after, Micros{7'000'000});
  ASSERT_EQ(DenialCacheOptions{}.max_ttl, Micros{1'000'000});
  // max_ttl is 1 s by default: within it, hits; the entry's end is min(retry, 1 s).
  r.clock.advance(Micros{999'999});
  EXPECT_FALSE(r.cache->acquire(p, "k")->allowed);
  EXPECT_EQ(r.counting->acquires, 3);
  r.clock.advance(Micros{1});  // 1 s after the denial: asks the store again (still denied)
  auto asked = r.cache->acquire(p, "k");
  EXPECT_FALSE(asked->allowed);
  EXPECT_EQ(asked->retry_after, Micros{6'000'000});
  EXPECT_EQ(r.counting->acquires, 4);
}

TEST(DenialCache, WithALongMaxTtlTheEntryLastsUntilRetryAfterAndNotOneMicrosecondMore) {
  DenialCacheOptions o;
  o.max_ttl = Micros{3600} * 1'000'000;
  Rig r(o);
  const Policy p = Policy::token_bucket(2.0, 1).value().with_name("tb").value();  // 1 per 0.5 s
  ASSERT_TRUE(r.cache->acquire(p, "k")->allowed);
  auto denied = r.cache->acquire(p, "k");
  ASSERT_FALSE(denied->allowed);
  ASSERT_EQ(denied->retry_after, Micros{500'000});
  r.clock.advance(Micros{499'999});
  auto hit = r.cache->acquire(p, "k");
  EXPECT_FALSE(hit->allowed);
  EXPECT_EQ(hit->retry_after, Micros{1});
  EXPECT_EQ(r.counting->acquires, 2);
  r.clock.advance(Micros{1});
  EXPECT_TRUE(r.cache->acquire(p, "k")->allowed) << "waiting retry_after must admit";
  EXPECT_EQ(r.counting->acquires, 3);
}

TEST(DenialCache, ADenialAtOneCostSaysNothingAboutAnother) {
  Rig r;
  const Policy p = window(10);
  ASSERT_TRUE(r.cache->acquire(p, "k", 7)->allowed);
  ASSERT_FALSE(r.cache->acquire(p, "k", 5)->allowed);  // 7 + 5 > 10: remembered for cost 5
  EXPECT_TRUE(r.cache->acquire(p, "k", 1)->allowed) << "cost 1 still fits and must reach the store";
  EXPECT_EQ(r.counting->acquires, 3);
  // Cost 5 again is a hit: still denied, with the store's retry_after (the window's end), and
  // the remaining of the denial (3; the store now says 2: this cache's own cost-1 admission).
  auto five = r.cache->acquire(p, "k", 5);
  EXPECT_EQ(r.counting->acquires, 3) << "cost 5 again is a hit";
  auto store_says = r.memory->peek(p, "k", 5).value();
  EXPECT_FALSE(five->allowed);
  EXPECT_EQ(five->retry_after, store_says.retry_after);
  EXPECT_EQ(five->reset_after, store_says.reset_after);
  EXPECT_EQ(five->remaining, 3);
  EXPECT_EQ(store_says.remaining, 2);
}

TEST(DenialCache, ResetThroughTheCacheForgetsEveryCostAtOnce) {
  Rig r;
  const Policy p = window(4);
  ASSERT_TRUE(r.cache->acquire(p, "k", 4)->allowed);
  ASSERT_FALSE(r.cache->acquire(p, "k", 1)->allowed);
  ASSERT_FALSE(r.cache->acquire(p, "k", 3)->allowed);
  EXPECT_EQ(r.cache->counters().entries, 1u);
  ASSERT_TRUE(r.cache->reset(p, "k").is_ok());
  EXPECT_EQ(r.cache->counters().entries, 0u);
  EXPECT_TRUE(r.cache->acquire(p, "k", 1)->allowed);
  EXPECT_TRUE(r.cache->acquire(p, "k", 3)->allowed);
}

TEST(DenialCache, ResetThroughAnotherInstanceIsSeenWithinMaxTtl) {
  DenialCacheOptions o;
  o.max_ttl = Micros{250'000};
  Rig r(o);
  const Policy p = window(1, 60 * kSecond);
  ASSERT_TRUE(r.cache->acquire(p, "k")->allowed);
  ASSERT_FALSE(r.cache->acquire(p, "k")->allowed);
  ASSERT_TRUE(r.memory->reset(p, "k").is_ok());  // "another instance": not through the cache
  r.clock.advance(Micros{249'999});
  EXPECT_FALSE(r.cache->acquire(p, "k")->allowed) << "unseen for at most max_ttl";
  r.clock.advance(Micros{1});
  EXPECT_TRUE(r.cache->acquire(p, "k")->allowed) << "max_ttl after the denial, the store decides";
}

TEST(DenialCache, ADenialInFlightAcrossAResetIsNotRemembered) {
  ManualClock clock{Micros{1'000'000'000}};
  MemoryStoreOptions mo;
  mo.clock = &clock;
  auto memory = std::make_shared<MemoryStore>(mo);
  auto deferred = std::make_shared<DeferredStore>(memory);
  DenialCacheOptions o;
  o.clock = &clock;
  auto cache = DenialCache::wrap(deferred, o).value();
  const Policy p = window(1);
  int answers = 0;
  cache->acquire_async(p, "k", 1, [&](Result<Decision> d) { answers += d->allowed ? 1 : 0; });
  deferred->release();
  bool denied = false;
  cache->acquire_async(p, "k", 1, [&](Result<Decision> d) { denied = !d->allowed; });
  ASSERT_EQ(deferred->held(), 1u);  // decided (denied) by the store, answer not delivered yet
  ASSERT_TRUE(cache->reset(p, "k").is_ok());
  deferred->release();  // the pre-reset denial arrives after the reset
  EXPECT_TRUE(denied);
  EXPECT_EQ(cache->counters().entries, 0u) << "a denial decided before the reset was kept";
  bool admitted = false;
  cache->acquire_async(p, "k", 1, [&](Result<Decision> d) { admitted = d->allowed; });
  deferred->release();
  EXPECT_TRUE(admitted);
}

TEST(DenialCache, CountDeniedPoliciesBypassTheCache) {
  Rig r;
  const Policy p = window(1).with_count_denied();
  for (int i = 0; i < 5; ++i) (void)r.cache->acquire(p, "k");
  EXPECT_EQ(r.counting->acquires, 5);
  EXPECT_EQ(r.cache->counters().hits, 0u);
  EXPECT_EQ(r.cache->counters().bypassed, 5u);
  EXPECT_EQ(r.cache->counters().entries, 0u);
}

TEST(DenialCache, EveryHitPoliciesAndCostZeroBypassTheCache) {
  Rig r;
  const Policy p =
      Policy::fixed_window_every_hit(1, Micros{10'000'000}).value().with_name("eh").value();
  for (int i = 0; i < 5; ++i) (void)r.cache->acquire(p, "k");
  EXPECT_EQ(r.counting->acquires, 5);
  EXPECT_EQ(r.cache->counters().bypassed, 5u);
  const Policy w = window(1);
  ASSERT_TRUE(r.cache->acquire(w, "k")->allowed);
  ASSERT_FALSE(r.cache->acquire(w, "k")->allowed);
  (void)r.cache->acquire(w, "k", 0);  // cost 0 is a check the store answers
  EXPECT_EQ(r.counting->acquires, 8);
  EXPECT_EQ(r.cache->counters().hits, 0u);
}

TEST(DenialCache, ExceedsCapacityIsNotCached) {
  Rig r;
  const Policy p = window(3);
  for (int i = 0; i < 3; ++i) {
    auto d = r.cache->acquire(p, "k", 4);
    EXPECT_EQ(d->reason, DecisionReason::kExceedsCapacity);
  }
  EXPECT_EQ(r.counting->acquires, 3);
  EXPECT_EQ(r.cache->counters().entries, 0u);
}

TEST(DenialCache, ARedefinedPolicyUnderTheSameNameNeverMeetsTheOldDenials) {
  Rig r;
  const Policy small = window(1);
  ASSERT_TRUE(r.cache->acquire(small, "k")->allowed);
  ASSERT_FALSE(r.cache->acquire(small, "k")->allowed);
  const Policy bigger = window(5);  // same name "w", a reload raised the limit
  EXPECT_TRUE(r.cache->acquire(bigger, "k")->allowed);
  EXPECT_EQ(r.counting->acquires, 3);
}

TEST(DenialCache, InvalidInputReachesTheStoreAndItsErrorComesBack) {
  Rig r;
  const Policy p = window(1);
  EXPECT_EQ(r.cache->acquire(p, "", 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.cache->acquire(p, "k", 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.cache->acquire(p, std::string(kMaxKeyLength + 1, 'x')).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(r.cache->counters().entries, 0u);
}

TEST(DenialCache, OptionsOutOfRangeAreRefusedByName) {
  auto memory = std::make_shared<MemoryStore>();
  EXPECT_EQ(DenialCache::wrap(nullptr).status().code(), StatusCode::kInvalidArgument);
  DenialCacheOptions o;
  o.max_entries = 0;
  auto a = DenialCache::wrap(memory, o);
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("max_entries"), std::string::npos);
  o = {};
  o.max_ttl = Micros{0};
  auto b = DenialCache::wrap(memory, o);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("max_ttl"), std::string::npos);
  o = {};
  o.shards = 5000;
  EXPECT_FALSE(DenialCache::wrap(memory, o).ok());
}

TEST(DenialCache, AcquireAllIsAnsweredLocallyOnlyWhenEveryLimitIsRemembered) {
  Rig r;
  const std::vector<Policy> both = {window(1).with_name("a").value(),
                                    window(5).with_name("b").value()};
  ASSERT_TRUE(r.cache->acquire_all(both, "k").value()[0].allowed);
  auto denied = r.cache->acquire_all(both, "k").value();  // "a" denies, "b" would admit
  ASSERT_FALSE(denied[0].allowed);
  ASSERT_TRUE(denied[1].allowed);
  EXPECT_EQ(r.counting->acquire_alls, 2);
  (void)r.cache->acquire_all(both, "k");  // "b" is not remembered: the store decides
  EXPECT_EQ(r.counting->acquire_alls, 3);
  // "a"'s denial from acquire_all answers a single acquire of "a".
  EXPECT_FALSE(r.cache->acquire(both[0], "k")->allowed);
  EXPECT_EQ(r.counting->acquires, 0);
  const std::vector<Policy> only_a = {both[0]};
  auto cached = r.cache->acquire_all(only_a, "k").value();
  EXPECT_FALSE(cached[0].allowed);
  EXPECT_EQ(r.counting->acquire_alls, 3);
  EXPECT_EQ(cached[0], r.memory->peek(both[0], "k").value());
}

TEST(DenialCache, ClockSteppingBackAsksTheStore) {
  Rig r;
  const Policy p = window(1);
  ASSERT_TRUE(r.cache->acquire(p, "k")->allowed);
  ASSERT_FALSE(r.cache->acquire(p, "k")->allowed);
  r.clock.advance(Micros{-1});
  (void)r.cache->acquire(p, "k");
  EXPECT_EQ(r.counting->acquires, 3) << "a denial made 'in the future' must not answer";
}

TEST(DenialCache, EntriesAreBoundedAndTheOldestMakeRoom) {
  DenialCacheOptions o;
  o.max_entries = 64;
  o.shards = 4;
  Rig r(o);
  const Policy p = window(1, 60 * kSecond);
  for (int i = 0; i < 1000; ++i) {
    const std::string key = "k" + std::to_string(i);
    ASSERT_TRUE(r.cache->acquire(p, key)->allowed);
    ASSERT_FALSE(r.cache->acquire(p, key)->allowed);
    ASSERT_LE(r.cache->counters().entries, 64u);
  }
  const auto c = r.cache->counters();
  EXPECT_EQ(c.inserts, 1000u);
  EXPECT_EQ(c.entries + c.evictions, 1000u);
  EXPECT_GE(c.entries, 48u) << "each of the 4 shards holds up to 16";
  // The newest key is still remembered; the first one was evicted and asks the store.
  const int before = r.counting->acquires;
  EXPECT_FALSE(r.cache->acquire(p, "k999")->allowed);
  EXPECT_EQ(r.counting->acquires, before);
  EXPECT_FALSE(r.cache->acquire(p, "k0")->allowed);
  EXPECT_EQ(r.counting->acquires, before + 1);
}

TEST(DenialCache, ExpiredEntriesAreDroppedWithoutCountingEvictions) {
  DenialCacheOptions o;
  o.max_entries = 8;
  o.shards = 1;
  o.max_ttl = Micros{1000};
  Rig r(o);
  const Policy p = window(1, 60 * kSecond);
  for (int i = 0; i < 100; ++i) {
    const std::string key = "k" + std::to_string(i);
    ASSERT_TRUE(r.cache->acquire(p, key)->allowed);
    ASSERT_FALSE(r.cache->acquire(p, key)->allowed);
    r.clock.advance(Micros{2000});  // every entry is dead before the next insert
  }
  const auto c = r.cache->counters();
  EXPECT_EQ(c.evictions, 0u);
  EXPECT_LE(c.entries, 2u);
}

// Memory per entry, for the figure in denial_cache.h: allocator bytes in use over 100,000
// remembered denials of 10-byte keys.
TEST(DenialCache, BytesPerEntryStayWithinTheDocumentedFigure) {
  DenialCacheOptions o;
  o.max_entries = 1'000'000;  // room to spare in every shard: nothing is evicted
  Rig r(o);
  const Policy p = window(1, 60 * kSecond);
  std::vector<std::string> keys;
  for (int i = 0; i < 100'000; ++i) keys.push_back("key" + std::to_string(1'000'000 + i));
  for (const auto& k : keys) ASSERT_TRUE(r.memory->acquire(p, k)->allowed);
  const size_t before = mallinfo2().uordblks + mallinfo2().hblkhd;
  for (const auto& k : keys) ASSERT_FALSE(r.cache->acquire(p, k)->allowed);
  const size_t after = mallinfo2().uordblks + mallinfo2().hblkhd;
  ASSERT_EQ(r.cache->counters().entries, 100'000u);
  if (after <= before) GTEST_SKIP() << "this allocator reports no mallinfo2 (a sanitizer build)";
  const double per_entry = static_cast<double>(after - before) / 100'000.0;
  RecordProperty("bytes_per_entry", std::to_string(per_entry));
  std::printf("denial cache: %.0f allocator bytes per entry (10-byte keys)\n", per_entry);
  EXPECT_LT(per_entry, 400.0);
}

}  // namespace
}  // namespace ratelimit
