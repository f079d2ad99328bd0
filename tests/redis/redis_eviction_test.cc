// redis_eviction_test.cc — eviction safety against real redis-servers: the store reads each
// node's maxmemory-policy at connect (INFO memory), reports a policy that may delete limiter
// keys, refuses it with require_noeviction, and counts evicted_keys growth from its INFO polls.
#include <gtest/gtest.h>

#include <thread>

#include "ratelimit/redis_store.h"
#include "redis_server.h"
#include "store_test_util.h"

namespace ratelimit::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

RedisStoreOptions eviction_options(const RedisServer& s) {
  RedisStoreOptions o;
  o.url = s.url();
  o.connections = 2;
  o.key_prefix = unique_prefix("evict");
  return o;
}

TEST(RedisEviction, NoevictionIsReportedSafe) {
  RedisServer server;
  ASSERT_TRUE(server.start(0, {"--maxmemory-policy", "noeviction"}).is_ok());
  auto store = must_connect(eviction_options(server));
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->eviction_policy(), "noeviction");
  EXPECT_EQ(store->counters().unsafe_policy_connects, 0u);
  auto o = eviction_options(server);
  o.require_noeviction = true;
  EXPECT_NE(must_connect(o), nullptr);
}

TEST(RedisEviction, AnEvictingPolicyIsReportedAndRequireNoevictionRefusesIt) {
  RedisServer server;
  ASSERT_TRUE(server.start(0, {"--maxmemory-policy", "allkeys-lru"}).is_ok());
  auto store = must_connect(eviction_options(server));
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->eviction_policy(), "allkeys-lru");
  EXPECT_GE(store->counters().unsafe_policy_connects, 1u);

  auto o = eviction_options(server);
  o.require_noeviction = true;
  auto refused = RedisStore::connect(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("allkeys-lru"), std::string::npos)
      << refused.status().to_string();
  EXPECT_NE(refused.status().message().find("noeviction"), std::string::npos);
}

TEST(RedisEviction, EvictedKeysGrowthIsCounted) {
  RedisServer server;
  ASSERT_TRUE(server.start(0, {"--maxmemory", "4mb", "--maxmemory-policy", "allkeys-random"})
                  .is_ok());
  auto o = eviction_options(server);
  o.server_info_interval = milliseconds(50);
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->counters().evicted_keys, 0u);
  // ~20 MB of values into a 4 MB server: Redis must evict.
  auto client = RedisClient::connect(server.url());
  ASSERT_TRUE(client.ok());
  const std::string value(16 * 1024, 'x');
  for (int i = 0; i < 1280; ++i) {
    auto r = client->command({"SET", "filler:" + std::to_string(i), value});
    ASSERT_TRUE(r.ok());
  }
  auto stats = client->command({"INFO", "stats"});
  ASSERT_TRUE(stats.ok());
  ASSERT_EQ(stats->str.find("evicted_keys:0\r"), std::string::npos) << "Redis did not evict";
  uint64_t seen = 0;
  for (int i = 0; i < 200 && seen == 0; ++i) {  // polls every 50 ms: bounded at 2 s
    std::this_thread::sleep_for(milliseconds(10));
    seen = store->counters().evicted_keys;
  }
  EXPECT_GT(seen, 0u);
}

}  // namespace
}  // namespace ratelimit::testing
