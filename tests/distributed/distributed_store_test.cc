// distributed_store_test.cc — DistributedStore (include/ratelimit/distributed_store.h) in
// process, on a real redis-server: two instances (each its own RedisStore connection pool and
// decorator, as two processes would have) hammered from several threads: lease never admits
// past the limit and gives back what it did not use; async stays within its bound and every hit
// lands; exact and all-or-nothing calls pass through unchanged; bad input answers an error.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <future>
#include <thread>
#include <vector>

#include "ratelimit/distributed_store.h"
#include "ratelimit/redis_store.h"
#include "redis_server.h"
#include "window_room.h"

namespace ratelimit {
namespace {

using namespace std::chrono_literals;

struct Instance {
  std::shared_ptr<RedisStore> redis;
  std::shared_ptr<DistributedStore> store;
};

Instance instance(const std::string& url, const std::string& prefix) {
  RedisStoreOptions o;
  o.url = url;
  o.key_prefix = prefix;
  o.connections = 2;
  o.command_timeout = 2000ms;
  auto redis = RedisStore::connect(o);
  EXPECT_TRUE(redis.ok()) << redis.status().to_string();
  auto store = DistributedStore::wrap(*redis, *redis, {});
  EXPECT_TRUE(store.ok()) << store.status().to_string();
  return {*redis, *store};
}

// The policies count in 1 h fixed windows aligned to Redis' clock: each test (seconds) starts
// with at least 60 s of the hour left, so no hour boundary resets a count mid-test.
void start_within_one_hour() { testing::await_window_room(std::chrono::hours(1), std::chrono::seconds(60)); }

Policy policy(Consistency mode, int64_t limit) {
  ConsistencyOptions o;
  o.mode = mode;
  o.lease_max = std::min<int64_t>(10, limit);
  o.lease_ttl = 200ms;
  o.sync_interval = 20ms;
  auto p = Policy::fixed_window(limit, std::chrono::hours(1))->with_name("p").value();
  return p.with_consistency(o).value();
}

std::string prefix(const char* what) {
  return std::string("dist-test:") + what + ":" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + ":";
}

// `threads` threads per instance, `each` acquires per thread; the number admitted.
int hammer(const std::vector<Instance*>& instances, const Policy& p, int threads, int each) {
  std::atomic<int> admitted{0};
  std::vector<std::thread> ts;
  for (Instance* in : instances) {
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, in] {
        for (int i = 0; i < each; ++i) {
          auto d = in->store->acquire(p, "hot");
          ASSERT_TRUE(d.ok()) << d.status().to_string();
          admitted += d->allowed ? 1 : 0;
        }
      });
    }
  }
  for (auto& t : ts) t.join();
  return admitted.load();
}

int64_t redis_count(const std::string& url, const std::string& pre, const std::string& key = "hot") {
  auto c = testing::RedisClient::connect(url);
  if (!c.ok()) return -1;
  auto r = c->command({"HGETALL", redis_state_key(pre, key, "p")});
  int64_t total = 0;
  for (size_t i = 1; r.ok() && i < r->elements.size(); i += 2) total += std::stoll(r->elements[i].str);
  return total;
}

// ratelimitd_lease_units_held is current: what a slice holds after each decision, not as of the
// background round before it (issue 33: it lagged ~0.5 s).
TEST(DistributedStore, UnitsHeldAreCurrentAfterEachDecision) {
  auto url = testing::shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().to_string();
  start_within_one_hour();
  Instance a = instance(*url, prefix("held"));
  const Policy p = policy(Consistency::kLease, 100);  // slices of at most 10
  // Every admitted unit is taken from a slice, so what the slices hold now is what was granted,
  // less what was given back and what was used.
  for (uint64_t used = 1; used <= 20; ++used) {
    auto d = a.store->acquire(p, "k");
    ASSERT_TRUE(d.ok() && d->allowed);
    const DistributedCounters c = a.store->counters();
    EXPECT_EQ(c.lease_units_held, c.lease_units_granted - c.lease_units_returned - used) << "after acquire " << used;
  }
}

TEST(DistributedStore, LeaseNeverOverAdmitsAndGivesBackOnDestruction) {
  auto url = testing::shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().to_string();
  start_within_one_hour();
  const std::string pre = prefix("lease");
  Instance a = instance(*url, pre), b = instance(*url, pre);
  const Policy p = policy(Consistency::kLease, 200);
  const int admitted = hammer({&a, &b}, p, 4, 60);  // 480 requests for 200 units
  EXPECT_LE(admitted, 200);
  EXPECT_GE(admitted, 200 - 2 * 10);
  EXPECT_LT(a.store->counters().lease_reserves + b.store->counters().lease_reserves,
            static_cast<uint64_t>(admitted));
  // Destroying the decorators gives their slices back: Redis counts exactly what was admitted.
  a.store.reset();
  b.store.reset();
  EXPECT_EQ(redis_count(*url, pre), admitted);
}

TEST(DistributedStore, AsyncPushesEveryHitAndStaysNearTheLimit) {
  auto url = testing::shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().to_string();
  start_within_one_hour();
  const std::string pre = prefix("async");
  Instance a = instance(*url, pre), b = instance(*url, pre);
  const Policy p = policy(Consistency::kAsync, 200);
  const auto start = std::chrono::steady_clock::now();
  const int admitted = hammer({&a, &b}, p, 2, 300);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(admitted, 200);
  // The bound with the rate each instance actually saw (all its requests over the run, an upper
  // bound on its admission rate averaged over the run) and a 20 ms round-trip allowance. Bursts
  // can exceed the average, so the check allows the limit as the hard cap too.
  const double rate = 2 * 300 / seconds;
  const int64_t bound = algo::async_over_admission_bound(2, rate, 20ms, 20ms, 200);
  EXPECT_LE(admitted - 200, std::max<int64_t>(bound, 0)) << "rate " << rate << "/s";
  a.store.reset();  // flushes what is pending
  b.store.reset();
  EXPECT_EQ(redis_count(*url, pre), 200);
}

TEST(DistributedStore, ExactAndAllOrNothingPassThroughAndBadInputIsAnError) {
  auto url = testing::shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().to_string();
  start_within_one_hour();
  const std::string pre = prefix("exact");
  Instance a = instance(*url, pre);
  const Policy exact = Policy::fixed_window(3, std::chrono::hours(1))->with_name("e").value();
  for (int i = 0; i < 4; ++i) {
    auto d = a.store->acquire(exact, "k");
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    EXPECT_EQ(d->allowed, i < 3);
  }
  EXPECT_EQ(a.store->counters().local_decisions, 0u);
  // All or nothing across a lease and an exact policy: decided exactly by Redis, atomically.
  const Policy leased = policy(Consistency::kLease, 5);
  const StoreOp ops[] = {{&leased, "k", 1, StoreOp::Kind::kAcquire}, {&exact, "k", 1, StoreOp::Kind::kAcquire}};
  auto both = a.store->decide_many(ops, Atomicity::kAllOrNothing);
  ASSERT_TRUE(both.ok()) << both.status().to_string();
  EXPECT_FALSE((*both)[1].allowed);
  EXPECT_EQ(redis_count(*url, pre, "k"), 0);  // the lease policy's part consumed nothing
  EXPECT_EQ(a.store->acquire(leased, "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a.store->acquire(leased, "k", 0).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ratelimit
