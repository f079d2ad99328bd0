// lease_test.cc — concurrency policies on a real redis-server: 200 acquirers on limit 10 counted
// from outside, the shared vectors through EVALSHA and unbatched calls too (the default path,
// FCALL batched, is in redis_store_test), a release after expiry in real time, and the keys'
// layout and TTLs (a ZSET of lease id -> expiry and a hash of held units, both gone with the
// last lease).
#include <gtest/gtest.h>

#include <thread>

#include "lease_contention.h"
#include "ratelimit/concurrency_limiter.h"
#include "ratelimit/redis_store.h"
#include "redis_server.h"
#include "script_codec.h"
#include "store_test_util.h"
#include "vectors.h"

namespace ratelimit::testing {
namespace {

using std::chrono::milliseconds;

class RedisLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto url = shared_test_redis_url();
    ASSERT_TRUE(url.ok()) << url.status().to_string();
    url_ = *url;
    auto c = RedisClient::connect(url_);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    client_ = std::make_unique<RedisClient>(std::move(*c));
  }
  std::shared_ptr<RedisStore> connect(RedisStoreOptions o) {
    auto s = RedisStore::connect(std::move(o));
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return s.ok() ? *s : nullptr;
  }
  Reply run(const std::vector<std::string>& args) {
    auto r = client_->command(args);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? *r : Reply{};
  }
  std::string url_;
  std::unique_ptr<RedisClient> client_;
};

TEST_F(RedisLeaseTest, TwoHundredAcquirersOnLimitTenNeverHoldMoreThanTen) {
  auto o = options_for(url_);
  o.key_prefix = unique_prefix("lease-race");
  auto store = connect(o);
  ASSERT_NE(store, nullptr);
  auto limiter = ConcurrencyLimiter::create(
                     Policy::concurrency(10, Micros{60'000'000}).value().with_name("db").value(),
                     store)
                     .value();
  const auto r = contend_for_leases(limiter, "hot", 200, 3, std::chrono::microseconds(3000),
                                    std::chrono::microseconds(1000), std::chrono::seconds(120));
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.peak_in_flight, 10);
  EXPECT_EQ(r.admitted, 600);
  EXPECT_EQ(r.released_held, 600);
  EXPECT_EQ(r.released_lost, 0);
  EXPECT_EQ(r.errors, 0);
  EXPECT_GT(r.denied, 0);
  EXPECT_EQ(limiter.peek("hot")->remaining, 10);
  EXPECT_EQ(store->counters().errors, 0u);
}

// The shared vectors through every calling path: EVALSHA, and one call per decision.
TEST_F(RedisLeaseTest, SharedVectorsThroughEvalshaAndUnbatchedCalls) {
  auto file = vectors::load_file(std::string(RATELIMIT_VECTORS_DIR) + "/concurrency.json");
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  for (const bool functions : {false, true}) {
    for (const size_t batch : {size_t{1}, size_t{64}}) {
      ManualClock clock;
      auto o = options_for(url_);
      o.test_clock = &clock;
      o.use_functions = functions;
      o.max_batch = batch;
      o.key_prefix = unique_prefix("lease-vectors");
      auto store = connect(o);
      ASSERT_NE(store, nullptr);
      auto failures = vectors::run_vectors(*store, clock, *file);
      EXPECT_TRUE(failures.empty()) << "functions " << functions << " max_batch " << batch
                                    << "\n" << vectors::format_failures(failures);
    }
  }
}

TEST_F(RedisLeaseTest, AReleaseAfterExpiryFreesNothingInRealTime) {
  auto o = options_for(url_);
  o.key_prefix = unique_prefix("lease-expiry");
  auto store = connect(o);
  ASSERT_NE(store, nullptr);
  auto limiter = ConcurrencyLimiter::create(
                     Policy::concurrency(1, Micros{300'000}).value().with_name("db").value(), store)
                     .value();
  auto a = limiter.acquire("k").value();
  ASSERT_TRUE(a.held());
  EXPECT_FALSE(limiter.acquire("k")->held()) << "freed before lease_ttl";
  std::this_thread::sleep_for(milliseconds(400));
  auto b = limiter.acquire("k").value();
  ASSERT_TRUE(b.held()) << "a's unit was not freed by its TTL";
  EXPECT_FALSE(a.release().value()) << "a had expired";
  EXPECT_EQ(limiter.peek("k")->remaining, 0) << "a's late release freed b's unit";
  EXPECT_TRUE(b.release().value());
  EXPECT_EQ(limiter.peek("k")->remaining, 1);
}

TEST_F(RedisLeaseTest, KeysHoldTheLeasesWithOneTtlAndVanishWithTheLast) {
  auto o = options_for(url_);
  o.key_prefix = unique_prefix("lease-keys");
  auto store = connect(o);
  ASSERT_NE(store, nullptr);
  const Policy p = Policy::concurrency(5, Micros{30'000'000}).value().with_name("db").value();
  const std::string hash = redis_state_key(o.key_prefix, "k", "db");
  const std::string zset = redis_detail::leases_key(hash);
  auto a = store->acquire(p, "k", 1).value();
  auto b = store->acquire(p, "k", 3).value();
  ASSERT_TRUE(a.allowed && b.allowed);
  // The ZSET holds each lease by its id, scored by expiry; the hash the units and the weight
  // of the lease that is not 1.
  EXPECT_EQ(run({"ZCARD", zset}).integer, 2);
  EXPECT_EQ(run({"ZSCORE", zset, a.lease.to_hex()}).type, Reply::Type::kString);
  EXPECT_EQ(run({"HGET", hash, "held"}).str, "4");
  EXPECT_EQ(run({"HGET", hash, b.lease.to_hex()}).str, "3");
  EXPECT_EQ(run({"HGET", hash, a.lease.to_hex()}).type, Reply::Type::kNil);
  for (const std::string& k : {hash, zset}) {
    const int64_t ttl = run({"PTTL", k}).integer;
    EXPECT_GT(ttl, 29'000) << k;
    EXPECT_LE(ttl, 30'000) << k;
  }
  EXPECT_TRUE(store->release(p, "k", b.lease)->allowed);
  EXPECT_EQ(run({"HGET", hash, b.lease.to_hex()}).type, Reply::Type::kNil);
  EXPECT_EQ(run({"HGET", hash, "held"}).str, "1");
  EXPECT_TRUE(store->release(p, "k", a.lease)->allowed);
  EXPECT_EQ(run({"EXISTS", hash, zset}).integer, 0) << "no lease held: both keys deleted";
  // Reset deletes both keys too.
  ASSERT_TRUE(store->acquire(p, "k", 1)->allowed);
  ASSERT_TRUE(store->reset(p, "k").is_ok());
  EXPECT_EQ(run({"EXISTS", hash, zset}).integer, 0);
}

}  // namespace
}  // namespace ratelimit::testing
