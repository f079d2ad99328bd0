// envoy_counter_test.cc — RedisKeyLayout::kEnvoy (src/redis/envoy_counter.h): the key, the
// commands and the decisions of envoyproxy/ratelimit's counter, and a RedisStore sharing one
// count with a client that sends exactly what envoyproxy/ratelimit sends (INCRBY, EXPIRE) on a
// real Redis (issue 23 item 6: a rolling migration on one Redis counted twice).
#include "envoy_counter.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <thread>

#include "ratelimit/redis_store.h"
#include "redis_server.h"
#include "store_test_util.h"
#include "window_room.h"

namespace ratelimit::testing {
namespace {

using redis_detail::envoy_counter_command;
using redis_detail::envoy_counter_decision;
using redis_detail::envoy_counter_key;

const Policy kMinute = Policy::fixed_window_every_hit(10, std::chrono::seconds(60)).value();

TEST(EnvoyCounter, KeyIsTheCacheKeyAndTheWindowStartInSeconds) {
  // 1,700,000,030.5 s: 50.5 s into the minute that starts at 1,699,999,980.
  EXPECT_EQ(envoy_counter_key("rl_edge_user_alice_", kMinute, 1'700'000'030'500'000),
            "rl_edge_user_alice_1699999980");
  const Policy hour = Policy::fixed_window_every_hit(5, std::chrono::hours(1)).value();
  EXPECT_EQ(envoy_counter_key("k_", hour, 1'700'000'030'500'000), "k_1699999200");
}

TEST(EnvoyCounter, CommandsAreIncrbyThenExpireOrAGet) {
  const std::string acquire = envoy_counter_command("k_1", kMinute, 3, algo::Op::kAcquire);
  EXPECT_NE(acquire.find("INCRBY"), std::string::npos);
  EXPECT_NE(acquire.find("EXPIRE"), std::string::npos);
  EXPECT_NE(acquire.find("$3\r\nk_1\r\n$1\r\n3\r\n$2\r\n60\r\n"), std::string::npos) << acquire;
  EXPECT_EQ(envoy_counter_command("k_1", kMinute, 1, algo::Op::kPeek), "*2\r\n$3\r\nGET\r\n$3\r\nk_1\r\n");
  EXPECT_EQ(envoy_counter_command("k_1", kMinute, 0, algo::Op::kAcquire),
            "*2\r\n$3\r\nGET\r\n$3\r\nk_1\r\n");  // a check writes nothing
}

TEST(EnvoyCounter, DecisionsAreTheFixedWindowsOnTheCount) {
  redisReply r{};
  r.type = REDIS_REPLY_INTEGER;
  r.integer = 10;  // after this hit of 1: admitted, nothing left
  auto d = envoy_counter_decision(&r, kMinute, 1, algo::Op::kAcquire, 1'700'000'030'000'000);
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->remaining, 0);
  EXPECT_EQ(d->reset_after, std::chrono::seconds(10));
  r.integer = 11;
  d = envoy_counter_decision(&r, kMinute, 1, algo::Op::kAcquire, 1'700'000'030'000'000);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(d->retry_after, std::chrono::seconds(10));
  redisReply nil{};
  nil.type = REDIS_REPLY_NIL;
  d = envoy_counter_decision(&nil, kMinute, 1, algo::Op::kPeek, 1'700'000'030'000'000);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->remaining, 9);
  redisReply err{};
  err.type = REDIS_REPLY_ERROR;
  char text[] = "WRONGTYPE";
  err.str = text;
  err.len = 9;
  EXPECT_EQ(envoy_counter_decision(&err, kMinute, 1, algo::Op::kAcquire, 0).status().code(),
            StatusCode::kUnavailable);
}

// The store and an envoyproxy/ratelimit instance on one Redis: one count.
TEST(EnvoyCounter, TheStoreSharesItsCountWithEnvoysCommands) {
  auto url = shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().to_string();
  RedisStoreOptions o = options_for(*url);
  o.key_layout = RedisKeyLayout::kEnvoy;
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  auto client = RedisClient::connect(*url);
  ASSERT_TRUE(client.ok());
  const std::string base = unique_prefix("envoy") + "edge_user_alice_";
  const Policy p = Policy::fixed_window_every_hit(10, std::chrono::seconds(3600))
                       .value().with_name("rls:every_hit:HOUR").value();
  // envoyproxy/ratelimit's hits: INCRBY then EXPIRE on its key for this hour.
  // Stay within one hour's window: start with at least 10 s of it left (else in the next).
  await_window_room(p, std::chrono::seconds(10));
  const int64_t now_s = SystemClock::instance().now().count() / 1'000'000;
  const std::string key = base + std::to_string(now_s / 3600 * 3600);
  for (int i = 0; i < 4; ++i) {
    ASSERT_EQ(client->command({"INCRBY", key, "1"})->integer, i + 1);
    ASSERT_EQ(client->command({"EXPIRE", key, "3600"})->integer, 1);
  }
  // Ours continue the count: 6 more admitted, then over.
  for (int i = 0; i < 6; ++i) {
    auto d = store->acquire(p, base);
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE(d->allowed) << i;
    EXPECT_EQ(d->remaining, 5 - i);
  }
  EXPECT_FALSE(store->acquire(p, base)->allowed);
  EXPECT_EQ(client->command({"GET", key})->str, "11");  // denied hits count, as there
  EXPECT_EQ(client->command({"TYPE", key})->str, "string");
  const int64_t ttl = client->command({"TTL", key})->integer;
  EXPECT_GT(ttl, 3500);
  EXPECT_LE(ttl, 3600);
  EXPECT_EQ(store->peek(p, base)->remaining, 0);
  ASSERT_TRUE(store->reset(p, base).is_ok());  // the current window's counter
  EXPECT_EQ(client->command({"EXISTS", key})->integer, 0);
}

}  // namespace
}  // namespace ratelimit::testing
