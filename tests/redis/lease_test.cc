// lease_test.cc — concurrency policies on a real redis-server: the shared lease suite
// (tests/support/lease_suite.h: the RAII Lease, expiry and ownership on a manual clock,
// weights, 200 acquirers on limit 10 counted from outside), the shared vectors through EVALSHA
// and unbatched calls too (the default path, FCALL batched, is in redis_store_test), a release
// after expiry in real time, and the keys' layout and TTLs (a ZSET of lease id -> expiry and a hash of held units, both gone with the
// last lease).
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "lease_suite.h"
#include "ratelimit/concurrency_limiter.h"
#include "ratelimit/redis_store.h"
#include "redis_server.h"
#include "script_codec.h"
#include "store_test_util.h"
#include "vectors.h"

namespace ratelimit::testing {
namespace {

using std::chrono::milliseconds;

// The shared lease suite (tests/support/lease_suite.h) on the test Redis, each store under a
// key prefix of its own; with a manual clock the scripts take its time, as the vectors do.
struct RedisLeaseStore {
  static std::shared_ptr<Store> make(const Clock* clock) {
    auto url = shared_test_redis_url();
    if (!url.ok()) {
      ADD_FAILURE() << url.status().to_string();
      return nullptr;
    }
    auto o = options_for(*url);
    o.test_clock = clock;
    o.key_prefix = unique_prefix("lease-suite");
    return must_connect(o);
  }
  static void expect_clean(const Store& store) {
    EXPECT_EQ(dynamic_cast<const RedisStore&>(store).counters().errors, 0u);
  }
  static constexpr std::chrono::microseconds kHold{3000};
  static constexpr std::chrono::microseconds kBackoff{1000};
  static constexpr std::chrono::seconds kDeadline{120};
};

INSTANTIATE_TYPED_TEST_SUITE_P(Redis, LeaseSuite, RedisLeaseStore);

class RedisLeaseTest : public RedisTest {
 protected:
  Reply run(const std::vector<std::string>& args) {
    auto r = client_->command(args);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? *r : Reply{};
  }
};

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
      auto store = must_connect(o);
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
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  auto limiter = ConcurrencyLimiter::create(
                     Policy::concurrency(1, Micros{1'000'000}).value().with_name("db").value(), store)
                     .value();
  auto a = limiter.acquire("k").value();
  const auto acquired_by = std::chrono::steady_clock::now();  // Redis timed a's lease before this
  ASSERT_TRUE(a.held());
  // lease_ttl 1 s (not 300 ms): the next call must come before it ends, even on a slow machine.
  EXPECT_FALSE(limiter.acquire("k")->held()) << "freed before lease_ttl";
  std::this_thread::sleep_until(acquired_by + milliseconds(1100));
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
  auto store = must_connect(o);
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

// The release feed (RedisStore::watch_releases): a release that frees a lease, made through
// another store on the same Redis, by FCALL or by EVALSHA, reaches the watcher with its policy,
// its (unescaped) key and its id; a release that frees nothing publishes nothing, and releases
// under another key_prefix are not passed on. Redis delivers one subscriber's messages in the
// order the calls ran, so the last release is the marker after which nothing else may come.
TEST_F(RedisLeaseTest, WatchReleasesHearsReleasesThroughAnotherStore) {
  auto o = options_for(url_);
  o.key_prefix = unique_prefix("lease-feed");
  auto watcher = must_connect(o);
  auto by_fcall = must_connect(o);
  auto o_eval = o;
  o_eval.use_functions = false;
  auto by_evalsha = must_connect(o_eval);
  auto o_other = o;
  o_other.key_prefix = unique_prefix("lease-feed-other");
  auto other = must_connect(o_other);
  ASSERT_TRUE(watcher && by_fcall && by_evalsha && other);
  struct Heard {
    std::string policy, key;
    LeaseId lease;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::vector<Heard> heard;
  int subscribed = 0;
  auto feed = watcher->watch_releases(
      [&](std::string_view policy, std::string_view key, const LeaseId& lease) {
        std::lock_guard lock(mu);
        heard.push_back({std::string(policy), std::string(key), lease});
        cv.notify_all();
      },
      [&] {
        std::lock_guard lock(mu);
        ++subscribed;
        cv.notify_all();
      });
  const auto wait_for = [&](auto pred) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, std::chrono::seconds(10), pred);
  };
  ASSERT_TRUE(wait_for([&] { return subscribed == 1; }));
  EXPECT_TRUE(feed->subscribed());
  const Policy p = Policy::concurrency(2, Micros{30'000'000}).value().with_name("db").value();
  const std::string key = "odd}{key%";
  auto a = by_fcall->acquire(p, key, 1).value();
  auto b = by_evalsha->acquire(p, key, 1).value();
  auto c = other->acquire(p, key, 1).value();
  ASSERT_TRUE(a.allowed && b.allowed && c.allowed);
  EXPECT_TRUE(by_fcall->release(p, key, a.lease)->allowed);
  EXPECT_FALSE(by_fcall->release(p, key, a.lease)->allowed) << "released twice";
  EXPECT_TRUE(other->release(p, key, c.lease)->allowed);
  EXPECT_TRUE(by_evalsha->release(p, key, b.lease)->allowed);
  ASSERT_TRUE(wait_for([&] { return heard.size() >= 2; }));
  std::lock_guard lock(mu);
  ASSERT_EQ(heard.size(), 2u) << "the second release of a and c's release (another prefix) pass nothing on";
  EXPECT_EQ(heard[0].policy, "db");
  EXPECT_EQ(heard[0].key, key);
  EXPECT_EQ(heard[0].lease, a.lease);
  EXPECT_EQ(heard[1].key, key);
  EXPECT_EQ(heard[1].lease, b.lease) << "EVALSHA publishes as FCALL does";
  EXPECT_EQ(subscribed, 1);
}

}  // namespace
}  // namespace ratelimit::testing
