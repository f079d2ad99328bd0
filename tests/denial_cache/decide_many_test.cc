// decide_many_test.cc — DenialCache::decide_many_async in front of a MemoryStore (ManualClock):
// independent ops answered from the cache one by one (only the others reach the store, in one
// call), an all-or-nothing group answered here only when every op has a remembered denial, a
// group with a count-denied policy passed through, and the answers equal the store's.
#include <gtest/gtest.h>

#include "ratelimit/denial_cache.h"
#include "ratelimit/memory_store.h"
#include "test_stores.h"

namespace ratelimit {
namespace {

using testing::CountingStore;

struct Rig {
  Rig() {
    MemoryStoreOptions mo;
    mo.clock = &clock;
    memory = std::make_shared<MemoryStore>(mo);
    counting = std::make_shared<CountingStore>(memory);
    DenialCacheOptions o;
    o.clock = &clock;
    cache = DenialCache::wrap(counting, o).value();
  }
  ManualClock clock{Micros{1'000'000'000}};
  std::shared_ptr<MemoryStore> memory;
  std::shared_ptr<CountingStore> counting;
  std::shared_ptr<DenialCache> cache;
};

Policy window(int64_t limit, std::string name) {
  return Policy::fixed_window(limit, Micros{10'000'000}).value().with_name(std::move(name)).value();
}

TEST(DenialCacheDecideMany, IndependentOpsWithARememberedDenialSkipTheStore) {
  Rig r;
  const Policy one = window(1, "one"), many = window(100, "many");
  const std::vector<StoreOp> ops = {{&one, "k"}, {&many, "k"}};
  auto first = r.cache->decide_many(ops, Atomicity::kIndependent);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE((*first)[0].allowed);
  auto second = r.cache->decide_many(ops, Atomicity::kIndependent);  // "one" denied: remembered
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE((*second)[0].allowed);
  EXPECT_EQ(r.counting->decide_manys, 2);
  r.clock.advance(Micros{1000});
  auto third = r.cache->decide_many(ops, Atomicity::kIndependent);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(r.counting->decide_manys, 3);  // "many" still had to be asked ...
  EXPECT_GE(r.cache->counters().hits, 1U);  // ... but "one" came from the cache
  EXPECT_FALSE((*third)[0].allowed);
  EXPECT_EQ((*third)[0], *r.memory->peek(one, "k"));  // the store's own answer
  EXPECT_EQ((*third)[1].remaining, 97);
  // Every op remembered: nothing reaches the store.
  const std::vector<StoreOp> only_one = {{&one, "k"}};
  ASSERT_TRUE(r.cache->decide_many(only_one, Atomicity::kIndependent).ok());
  EXPECT_EQ(r.counting->decide_manys, 3);
}

TEST(DenialCacheDecideMany, AGroupIsAnsweredLocallyOnlyWhenEveryOpIsARememberedDenial) {
  Rig r;
  const Policy a = window(1, "a"), b = window(1, "b");
  const std::vector<StoreOp> group = {{&a, "x"}, {&b, "y"}};
  ASSERT_TRUE(r.cache->decide_many(group, Atomicity::kAllOrNothing).ok());  // both take 1
  auto denied = r.cache->decide_many(group, Atomicity::kAllOrNothing);
  ASSERT_TRUE(denied.ok());
  EXPECT_FALSE((*denied)[0].allowed);
  EXPECT_FALSE((*denied)[1].allowed);
  EXPECT_EQ(r.counting->decide_manys, 2);
  auto again = r.cache->decide_many(group, Atomicity::kAllOrNothing);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(r.counting->decide_manys, 2);  // both denials remembered: answered here
  EXPECT_EQ((*again)[0], *r.memory->peek(a, "x"));
  // A fresh key in the group: the store decides.
  const std::vector<StoreOp> mixed = {{&a, "x"}, {&b, "fresh"}};
  auto m = r.cache->decide_many(mixed, Atomicity::kAllOrNothing);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(r.counting->decide_manys, 3);
  EXPECT_FALSE((*m)[0].allowed);
  EXPECT_TRUE((*m)[1].allowed);  // its own peek; nothing consumed
  EXPECT_EQ(r.memory->peek(b, "fresh")->remaining, 0);  // 1 - this peek: still untouched
}

TEST(DenialCacheDecideMany, CountDeniedGroupsPassThrough) {
  Rig r;
  const Policy a = window(1, "a").with_count_denied(), b = window(1, "b");
  const std::vector<StoreOp> group = {{&a, "x"}, {&b, "x"}};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(r.cache->decide_many(group, Atomicity::kAllOrNothing).ok());
  EXPECT_EQ(r.counting->decide_manys, 3);
  EXPECT_EQ(r.cache->counters().bypassed, 3U);
}

}  // namespace
}  // namespace ratelimit
