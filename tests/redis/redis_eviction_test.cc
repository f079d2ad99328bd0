// redis_eviction_test.cc — eviction safety against real redis-servers: the store reads each
// node's maxmemory-policy at connect (INFO memory), reports a policy that may delete limiter
// keys, refuses it with require_noeviction, and counts evicted_keys growth from its INFO polls.
// Also: the least-privilege ACL user of docs/redis.md ("Running Redis for a limiter") is enough
// for every algorithm, peek, acquire_all and reset — the line is read from docs/redis.md itself.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include <thread>

#include "ratelimit/redis_store.h"
#include "redis_server.h"
#include "store_test_util.h"
#include "window_room.h"

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

TEST(RedisAcl, ReadmeUserIsEnough) {
  std::ifstream readme(std::string(RATELIMIT_SOURCE_DIR) + "/docs/redis.md");
  ASSERT_TRUE(readme.good());
  std::string line, acl;
  while (std::getline(readme, line)) {
    if (line.find("ACL SETUSER ratelimit on") != std::string::npos) acl = line;
  }
  ASSERT_FALSE(acl.empty()) << "docs/redis.md lost its ACL line";
  std::istringstream words(acl);
  std::vector<std::string> args;
  for (std::string w; words >> w;) args.push_back(w == ">long-random-password" ? ">acl-pw" : w);
  ASSERT_GE(args.size(), 4u);
  ASSERT_EQ(args[0], "ACL");

  RedisServer server;
  ASSERT_TRUE(server.start().is_ok());
  auto admin = RedisClient::connect(server.url());
  ASSERT_TRUE(admin.ok());
  auto r = admin->command(args);
  ASSERT_TRUE(r.ok());
  ASSERT_FALSE(r->is_error()) << r->str;

  RedisStoreOptions o;
  o.url = "redis://ratelimit:acl-pw@127.0.0.1:" + std::to_string(server.port());
  o.connections = 1;
  o.key_prefix = "rl:acltest:";
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  std::vector<Policy> policies = {
      Policy::fixed_window(3, seconds(60))->with_name("fw").value(),
      Policy::sliding_window_log(3, seconds(60))->with_name("swl").value(),
      Policy::sliding_window_counter(3, seconds(60))->with_name("swc").value(),
      Policy::token_bucket(1, 3)->with_name("tb").value(),
      Policy::leaky_bucket(1, 3)->with_name("lb").value()};
  // fw and swc count in 60 s windows on Redis' clock (aligned to the minute): a boundary among
  // the five calls would admit a fifth. They take milliseconds; 5 s of the minute is left.
  await_window_room(policies, seconds(5));
  for (const auto& p : policies) {
    int allowed = 0;
    for (int i = 0; i < 5; ++i) {
      auto d = store->acquire(p, "user");
      ASSERT_TRUE(d.ok()) << p.name();
      EXPECT_NE(d->reason, DecisionReason::kStoreFailedOpen) << p.name() << ": ACL refused";
      allowed += d->allowed ? 1 : 0;
    }
    // State persisted between calls (the exact counts are the vectors' business).
    EXPECT_GE(allowed, 3) << p.name();
    EXPECT_LT(allowed, 5) << p.name();
    auto peek = store->peek(p, "user");
    ASSERT_TRUE(peek.ok());
    EXPECT_NE(peek->reason, DecisionReason::kStoreFailedOpen);
    EXPECT_TRUE(store->reset(p, "user").is_ok()) << p.name();
  }
  auto all = store->acquire_all(policies, "other");
  ASSERT_TRUE(all.ok());
  for (const auto& d : *all) EXPECT_NE(d.reason, DecisionReason::kStoreFailedOpen);
  EXPECT_EQ(store->counters().errors, 0u);
}

}  // namespace
}  // namespace ratelimit::testing
