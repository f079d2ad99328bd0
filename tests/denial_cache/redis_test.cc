// redis_test.cc — DenialCache in front of a real RedisStore (the shared test Redis): a hot
// denied key stops costing Redis round trips, 200 acquires at 50 in flight still admit exactly
// 10, a reset through the cache is honoured at once, a reset through another store (another
// instance) within max_ttl, and the failure policy's answers are never remembered.
#include <gtest/gtest.h>

#include "ratelimit/denial_cache.h"
#include "ratelimit/redis_store.h"
#include "redis_server.h"
#include "store_test_util.h"
#include "window_room.h"

namespace ratelimit {
namespace {

using testing::fire;
using testing::must_connect;
using testing::options_for;

std::shared_ptr<RedisStore> shared_redis() {
  auto url = testing::shared_test_redis_url();
  EXPECT_TRUE(url.ok()) << url.status().to_string();
  if (!url.ok()) return nullptr;
  auto o = options_for(*url);
  o.key_prefix = testing::unique_prefix("denial");
  return must_connect(o);
}

TEST(DenialCacheRedis, TenOfTwoHundredAtFiftyInFlightAndRepeatsCostNoRoundTrip) {
  auto redis = shared_redis();
  ASSERT_NE(redis, nullptr);
  DenialCacheOptions o;
  o.max_ttl = Micros{60'000'000};  // longer than the test: every repeat must be a hit
  auto cache = DenialCache::wrap(redis, o).value();
  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog,
                      Algorithm::kSlidingWindowCounter, Algorithm::kTokenBucket,
                      Algorithm::kLeakyBucket}) {
    Policy p = a == Algorithm::kFixedWindow ? Policy::fixed_window(10, Micros{600'000'000}).value()
             : a == Algorithm::kSlidingWindowLog
                 ? Policy::sliding_window_log(10, Micros{600'000'000}).value()
             : a == Algorithm::kSlidingWindowCounter
                 ? Policy::sliding_window_counter(10, Micros{600'000'000}).value()
             : a == Algorithm::kTokenBucket ? Policy::token_bucket(1e-6, 10).value()
                                            : Policy::leaky_bucket(1e-6, 10).value();
    p = p.with_name(std::string("p_") + algorithm_name(a)).value();
    // The 10 min windows are aligned to Redis' clock: a boundary between the two rounds would
    // admit 10 more. The rounds take well under a second; they start with 30 s of it left.
    testing::await_window_room(p, std::chrono::seconds(30));
    const std::string key = "hot";
    auto first = fire(200, 50, [&](auto done) { cache->acquire_async(p, key, 1, done); });
    ASSERT_TRUE(first.finished);
    EXPECT_EQ(first.allowed, 10) << algorithm_name(a);
    EXPECT_EQ(first.denied, 190);
    EXPECT_EQ(first.failed + first.errors, 0);
    const uint64_t commands = redis->counters().commands;
    const uint64_t hits = cache->counters().hits;
    auto second = fire(200, 50, [&](auto done) { cache->acquire_async(p, key, 1, done); });
    ASSERT_TRUE(second.finished);
    EXPECT_EQ(second.denied, 200);
    EXPECT_EQ(redis->counters().commands, commands) << "a remembered denial went to Redis";
    EXPECT_EQ(cache->counters().hits, hits + 200);
    // And the cached answer is Redis' own (cost 1: every field).
    auto cached = cache->acquire(p, key);
    auto direct = redis->peek(p, key);
    ASSERT_TRUE(cached.ok() && direct.ok());
    EXPECT_FALSE(cached->allowed);
    EXPECT_EQ(cached->remaining, 0);
    EXPECT_EQ(cached->reason, direct->reason);
    // retry_after: Redis' clock moved on between the two answers; the cached one is never
    // longer than Redis' own by more than the time between them (and never 0).
    EXPECT_GT(cached->retry_after.count(), 0);
    EXPECT_LE(cached->retry_after, direct->retry_after + Micros{2'000'000});
    ASSERT_TRUE(cache->reset(p, key).is_ok());
  }
}

TEST(DenialCacheRedis, ResetThroughTheCacheIsHonouredAtOnce) {
  auto redis = shared_redis();
  ASSERT_NE(redis, nullptr);
  auto cache = DenialCache::wrap(redis).value();
  const Policy p = Policy::fixed_window(1, Micros{600'000'000}).value().with_name("r").value();
  testing::await_window_room(p, std::chrono::seconds(5));  // one Redis window for all (above)
  ASSERT_TRUE(cache->acquire(p, "k")->allowed);
  ASSERT_FALSE(cache->acquire(p, "k")->allowed);
  ASSERT_FALSE(cache->acquire(p, "k")->allowed);
  EXPECT_EQ(cache->counters().hits, 1u);
  ASSERT_TRUE(cache->reset(p, "k").is_ok());
  EXPECT_TRUE(cache->acquire(p, "k")->allowed);
}

TEST(DenialCacheRedis, ResetThroughAnotherInstanceIsSeenAfterMaxTtl) {
  auto redis = shared_redis();
  ASSERT_NE(redis, nullptr);
  // "Another instance": a second store on the same Redis and key prefix.
  auto other = must_connect(redis->options());
  ASSERT_NE(other, nullptr);
  ManualClock clock;  // the cache's own clock: only its differences matter
  DenialCacheOptions o;
  o.clock = &clock;
  o.max_ttl = Micros{500'000};
  auto cache = DenialCache::wrap(redis, o).value();
  const Policy p = Policy::fixed_window(1, Micros{600'000'000}).value().with_name("o").value();
  testing::await_window_room(p, std::chrono::seconds(5));  // one Redis window for all (above)
  ASSERT_TRUE(cache->acquire(p, "k")->allowed);
  ASSERT_FALSE(cache->acquire(p, "k")->allowed);
  ASSERT_TRUE(other->reset(p, "k").is_ok());
  clock.advance(Micros{499'999});
  EXPECT_FALSE(cache->acquire(p, "k")->allowed) << "within max_ttl the reset is not seen";
  clock.advance(Micros{1});
  EXPECT_TRUE(cache->acquire(p, "k")->allowed) << "after max_ttl Redis decides again";
}

TEST(DenialCacheRedis, FailurePolicyAnswersAreNeverRemembered) {
  auto port = testing::free_loopback_port();
  ASSERT_TRUE(port.ok());
  RedisStoreOptions o;
  o.url = "redis://127.0.0.1:" + std::to_string(*port) + "/0";  // nothing listens there
  o.lazy_connect = true;
  o.on_failure = FailurePolicy::kClosed;
  o.connections = 1;
  auto redis = must_connect(o);
  ASSERT_NE(redis, nullptr);
  auto cache = DenialCache::wrap(redis).value();
  const Policy p = Policy::fixed_window(1, Micros{60'000'000}).value();
  for (int i = 0; i < 5; ++i) {
    auto d = cache->acquire(p, "k");
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->reason, DecisionReason::kStoreFailedClosed);
  }
  const auto c = cache->counters();
  EXPECT_EQ(c.misses, 5u);
  EXPECT_EQ(c.hits, 0u);
  EXPECT_EQ(c.inserts, 0u);
}

}  // namespace
}  // namespace ratelimit
