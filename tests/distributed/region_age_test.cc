// region_age_test.cc — RegionStore's staleness checks run on its age clock
// (RegionStoreOptions::age_clock): with a ManualClock, a region read (set reachable) and then
// not read for exactly 3 × sync_interval is still reachable and uncapped; one microsecond later
// it is reported unreachable and the share cap applies — no sleep, no dependence on the
// machine's speed. The peer's store is never read (no exchange thread).
#include <gtest/gtest.h>

#include "ratelimit/memory_store.h"
#include "ratelimit/redis_store.h"
#include "ratelimit/region_store.h"
#include "redis_server.h"

namespace ratelimit {
namespace {

using namespace std::chrono_literals;

TEST(RegionStore, AManualAgeClockDrivesReachabilityAndTheShareCap) {
  auto url = testing::shared_test_redis_url();
  ASSERT_TRUE(url.ok());
  RedisStoreOptions ro;
  ro.url = *url;
  ro.lazy_connect = true;
  auto peer = RedisStore::connect(ro).value();
  ManualClock decisions{Micros{5'000'000}};
  ManualClock ages{Micros{1'000'000'000}};
  MemoryStoreOptions mo;
  mo.clock = &decisions;
  RegionStoreOptions o;
  o.region = "eu";
  o.sync_interval = 100ms;
  o.partition_share = true;
  o.share = 0.5;
  o.clock = &decisions;
  o.age_clock = &ages;
  o.run_exchange = false;
  auto store = RegionStore::wrap(std::make_shared<MemoryStore>(mo), {{"us", peer}}, o).value();
  store->set_reachable("us", true);
  ConsistencyOptions g;
  g.across_regions = true;
  const Policy p = Policy::fixed_window(10, 1s)->with_name("aged")->with_consistency(g).value();

  ASSERT_TRUE(store->acquire(p, "k").ok());
  EXPECT_EQ(store->counters().capped, 0u);
  ages.advance(300ms);  // exactly 3 × sync_interval: not yet stale
  EXPECT_EQ(store->regions()[0].view_age_us, 300'000);
  EXPECT_TRUE(store->regions()[0].reachable);
  ASSERT_TRUE(store->acquire(p, "k").ok());
  EXPECT_EQ(store->counters().capped, 0u);

  ages.advance(1us);
  EXPECT_EQ(store->regions()[0].view_age_us, 300'001);
  EXPECT_FALSE(store->regions()[0].reachable);
  auto d = store->acquire(p, "k");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(store->counters().capped, 1u);
  // The cap is ⌊10 × 0.5⌋ = 5 of which 2 are counted: this third unit leaves 2 below it.
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->remaining, 2);

  store->set_reachable("us", true);  // a read again: fresh, uncapped
  ASSERT_TRUE(store->acquire(p, "k").ok());
  EXPECT_EQ(store->counters().capped, 1u);
}

}  // namespace
}  // namespace ratelimit
