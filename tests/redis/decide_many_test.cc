// decide_many_test.cc — RedisStore::decide_many_async against a real redis-server: identical to
// the pure functions on random multi-key calls (the decide_many.lua script for all or nothing,
// pipelined single scripts for independent ops), all or nothing across keys, exactness under
// concurrency, input errors, and the failure policy for every op when Redis is unreachable.
#include <gtest/gtest.h>

#include <atomic>

#include "decide_many_mirror.h"
#include "ratelimit/redis_store.h"
#include "redis_server.h"
#include "store_test_util.h"

namespace ratelimit::testing {
namespace {

Policy fixed(int64_t limit, std::string name) {
  return Policy::fixed_window(limit, Micros{60'000'000}).value().with_name(std::move(name)).value();
}

using RedisDecideMany = RedisTest;

TEST_F(RedisDecideMany, IdenticalToThePureFunctions) {
  ManualClock clock;
  auto o = options_for(url_);
  o.test_clock = &clock;
  o.key_prefix = unique_prefix("decide-many");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  const auto policies = vectors::decide_many_policies();
  auto failures = vectors::check_decide_many(*store, clock, policies, 1500, 11, "r:");
  EXPECT_TRUE(failures.empty()) << failures.size() << " mismatches, first: " << failures.front();
  EXPECT_EQ(store->counters().errors, 0U);
}

TEST_F(RedisDecideMany, AllOrNothingAcrossKeysConsumesNothingOnADenial) {
  auto o = options_for(url_);
  o.key_prefix = unique_prefix("decide-many-aon");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  const Policy user = fixed(5, "user"), tenant = fixed(2, "tenant");
  std::vector<StoreOp> ops = {{&user, "alice", 1}, {&tenant, "acme", 1}};
  for (int i = 0; i < 2; ++i) {
    auto d = store->decide_many(ops, Atomicity::kAllOrNothing);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    EXPECT_TRUE((*d)[0].allowed && (*d)[1].allowed);
  }
  auto denied = store->decide_many(ops, Atomicity::kAllOrNothing);
  ASSERT_TRUE(denied.ok());
  EXPECT_TRUE((*denied)[0].allowed);
  EXPECT_FALSE((*denied)[1].allowed);
  EXPECT_EQ(store->peek(user, "alice")->remaining, 2);
  auto twice = store->decide_many(std::vector<StoreOp>{{&user, "k"}, {&user, "k"}}, Atomicity::kAllOrNothing);
  EXPECT_EQ(twice.status().code(), StatusCode::kInvalidArgument);
}

// 200 all-or-nothing calls over two keys with 10 per minute on one and 50 on the other, 50 in
// flight on 4 connections: exactly 10 admitted, and the other key holds exactly 10 units.
TEST_F(RedisDecideMany, ExactUnderConcurrency) {
  auto o = options_for(url_);
  o.key_prefix = unique_prefix("decide-many-race");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  const Policy ten = fixed(10, "ten"), fifty = fixed(50, "fifty");
  const std::vector<StoreOp> ops = {{&fifty, "wide"}, {&ten, "narrow"}};
  auto r = fire(200, 50, [&](std::function<void(Result<Decision>)> done) {
    store->decide_many_async(ops, Atomicity::kAllOrNothing,
                             [done = std::move(done)](Result<std::span<const Decision>> d) {
                               if (!d) return done(d.status());
                               Decision both = (*d)[1];
                               both.allowed = (*d)[0].allowed && (*d)[1].allowed;
                               done(both);
                             });
  });
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.allowed, 10);
  EXPECT_EQ(r.denied, 190);
  EXPECT_EQ(r.failed + r.errors, 0);
  EXPECT_EQ(store->peek(fifty, "wide")->remaining, 39);  // 50 - 10 taken - this peek
}

TEST_F(RedisDecideMany, UnreachableRedisAnswersEveryOpByTheFailurePolicy) {
  auto o = options_for("redis://127.0.0.1:1/0");
  o.lazy_connect = true;
  o.on_failure = FailurePolicy::kClosed;
  auto store = RedisStore::connect(o);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  const Policy a = fixed(5, "a"), b = fixed(5, "b");
  for (Atomicity at : {Atomicity::kIndependent, Atomicity::kAllOrNothing}) {
    auto d = (*store)->decide_many(std::vector<StoreOp>{{&a, "x"}, {&b, "y"}, {&a, "z"}}, at);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    ASSERT_EQ(d->size(), 3U);
    for (const Decision& x : *d) {
      EXPECT_FALSE(x.allowed);
      EXPECT_EQ(x.reason, DecisionReason::kStoreFailedClosed);
      EXPECT_EQ(x.limit, 5);
    }
  }
}

}  // namespace
}  // namespace ratelimit::testing
