// redis_sentinel_test.cc — RedisStore on redis-sentinel:// against real processes: one master,
// one replica and three redis-sentinel, all on free loopback ports (tests/support), stopped by
// pid. The store finds the master through the sentinels, stays exact, and follows a failover
// (forced with SENTINEL FAILOVER, or the master killed) under load without a restart: decisions
// answer by the failure policy only while the failover runs and are exact again afterwards.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "ratelimit/redis_store.h"
#include "eventually.h"
#include "redis_server.h"
#include "store_test_util.h"

namespace ratelimit::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

constexpr const char* kMaster = "rlmaster";

std::string role_of(uint16_t port) {
  auto c = RedisClient::connect("redis://127.0.0.1:" + std::to_string(port));
  if (!c.ok()) return "down";
  auto r = c->command({"ROLE"});
  if (!r.ok() || r->type != Reply::Type::kArray || r->elements.empty()) return "?";
  return r->elements[0].str;
}

class RedisSentinel : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(master_.start().is_ok());
    ASSERT_TRUE(
        replica_.start(0, {"--replicaof", "127.0.0.1", std::to_string(master_.port())}).is_ok());
    for (auto& s : sentinels_) ASSERT_TRUE(s.start_sentinel(master_.port(), kMaster, 2).is_ok());
    // Failover needs the replica in sync and known to the sentinels, and (for an election)
    // the sentinels known to each other.
    ASSERT_TRUE(eventually(
        [&] {
          auto c = RedisClient::connect(replica_.url());
          if (!c.ok()) return false;
          auto r = c->command({"INFO", "replication"});
          return r.ok() && r->str.find("master_link_status:up") != std::string::npos;
        },
        seconds(10)))
        << "the replica did not sync";
    ASSERT_TRUE(eventually(
        [&] {
          for (auto& s : sentinels_) {
            auto c = RedisClient::connect(s.url());
            if (!c.ok()) return false;
            auto replicas = c->command({"SENTINEL", "replicas", kMaster});
            auto peers = c->command({"SENTINEL", "sentinels", kMaster});
            if (!replicas.ok() || replicas->elements.size() != 1) return false;
            if (!peers.ok() || peers->elements.size() != 2) return false;
          }
          return true;
        },
        seconds(15)))
        << "the sentinels did not discover the replica and each other";
  }

  std::string url() const {
    std::string u = "redis-sentinel://";
    for (size_t i = 0; i < 3; ++i) {
      u += (i > 0 ? "," : "") + std::string("127.0.0.1:") + std::to_string(sentinels_[i].port());
    }
    return u + "/" + kMaster;
  }

  RedisStoreOptions options(FailurePolicy fp) const {
    RedisStoreOptions o;
    o.url = url();
    o.connections = 3;
    o.connect_timeout = milliseconds(1000);
    o.command_timeout = milliseconds(300);
    o.reconnect_backoff_min = milliseconds(10);
    o.reconnect_backoff_max = milliseconds(200);
    o.on_failure = fp;
    o.key_prefix = unique_prefix("sentinel");
    return o;
  }

  // Keys the store wrote on the node at `port` under its prefix.
  static size_t keys_on(uint16_t port, const std::string& prefix) {
    auto c = RedisClient::connect("redis://127.0.0.1:" + std::to_string(port));
    if (!c.ok()) return 0;
    auto r = c->command({"KEYS", prefix + "*"});
    return r.ok() ? r->elements.size() : 0;
  }

  RedisServer master_, replica_;
  RedisServer sentinels_[3];
};

// Load on a wide limit for as long as `running`: every call must complete, by Redis or by the
// failure policy, never with an error.
struct Load {
  std::atomic<bool> running{true};
  std::atomic<int> real{0}, by_policy{0}, errors{0};
  std::thread thread;

  void start(RedisStore& store) {
    thread = std::thread([this, &store] {
      auto p = Policy::token_bucket(1e6, 1'000'000)->with_name("wide").value();
      while (running) {
        auto r = fire(50, 10, [&](auto done) { store.acquire_async(p, "load", 1, std::move(done)); },
                      milliseconds(5000));
        if (!r.finished) errors += 1000;
        real += r.allowed + r.denied;
        by_policy += r.failed;
        errors += r.errors;
      }
    });
  }
  void stop() {
    running = false;
    thread.join();
  }
  ~Load() {
    if (thread.joinable()) stop();  // a failed ASSERT left it running
  }
  // Waits (bounded) until `n` more decisions have been answered by Redis than `real` held at
  // the call: the load has really run, whatever the machine's speed (a guessed sleep may end
  // before a slow machine finished one round).
  bool wait_more(int n) {
    const int from = real.load();
    return eventually([&] { return real.load() >= from + n || errors.load() > 0; }, seconds(15)) &&
           real.load() >= from + n;
  }
};

TEST_F(RedisSentinel, FindsTheMasterAndIsExact) {
  auto store = must_connect(options(FailurePolicy::kOpen));
  ASSERT_NE(store, nullptr);
  expect_exactly_ten(*store, "k");
  const std::string prefix = store->options().key_prefix;
  EXPECT_GT(keys_on(master_.port(), prefix), 0u) << "decisions must run on the master";
}

TEST_F(RedisSentinel, FollowsAForcedFailoverUnderLoad) {
  auto store = must_connect(options(FailurePolicy::kClosed));
  ASSERT_NE(store, nullptr);
  Load load;
  load.start(*store);
  ASSERT_TRUE(load.wait_more(100)) << "load running before the failover";
  auto s = RedisClient::connect(sentinels_[0].url());
  ASSERT_TRUE(s.ok());
  auto r = s->command({"SENTINEL", "FAILOVER", kMaster});
  ASSERT_TRUE(r.ok());
  ASSERT_FALSE(r->is_error()) << r->str;
  ASSERT_TRUE(eventually([&] { return role_of(replica_.port()) == "master"; }, seconds(15)))
      << "the replica was not promoted";
  // The store follows on its own: fresh keys land on the new master and count exactly.
  auto p = Policy::token_bucket(1e6, 1'000'000)->with_name("probe").value();
  ASSERT_TRUE(eventually(
      [&] {
        auto d = store->acquire(p, "probe");
        return d.ok() && d->reason != DecisionReason::kStoreFailedClosed &&
               keys_on(replica_.port(), store->options().key_prefix + "{probe}") > 0;
      },
      seconds(15)))
      << "the store did not follow the failover";
  const bool ran_after = load.wait_more(100);  // load running after the failover
  load.stop();
  EXPECT_TRUE(ran_after) << "no load answered after the failover";
  EXPECT_EQ(load.errors, 0);
  EXPECT_GT(load.real, 0);
  expect_exactly_ten(*store, "after-failover");
  EXPECT_GT(keys_on(replica_.port(), store->options().key_prefix + "{after-failover}"), 0u);
  EXPECT_GT(store->counters().connects, 3u) << "it reconnected to the new master";
}

TEST_F(RedisSentinel, FollowsWhenTheMasterIsKilled) {
  auto store = must_connect(options(FailurePolicy::kOpen));
  ASSERT_NE(store, nullptr);
  expect_exactly_ten(*store, "before");
  Load load;
  load.start(*store);
  ASSERT_TRUE(load.wait_more(100)) << "load running before the kill";
  master_.kill();
  // down-after 1 s, then an election among the three sentinels.
  ASSERT_TRUE(eventually([&] { return role_of(replica_.port()) == "master"; }, seconds(20)))
      << "the sentinels did not promote the replica";
  auto p = Policy::token_bucket(1e6, 1'000'000)->with_name("probe").value();
  ASSERT_TRUE(eventually(
      [&] {
        auto d = store->acquire(p, "probe");
        return d.ok() && d->reason != DecisionReason::kStoreFailedOpen;
      },
      seconds(15)))
      << "the store did not follow the failover";
  load.stop();
  EXPECT_EQ(load.errors, 0);
  EXPECT_GT(load.by_policy, 0) << "the master was down: some decisions were the failure policy";
  expect_exactly_ten(*store, "after-kill");
  EXPECT_GT(keys_on(replica_.port(), store->options().key_prefix + "{after-kill}"), 0u);
}

TEST_F(RedisSentinel, UnknownMasterNameIsAClearError) {
  auto o = options(FailurePolicy::kOpen);
  o.url = url() + "-nope";
  const auto start = steady_clock::now();
  auto store = RedisStore::connect(o);
  ASSERT_FALSE(store.ok());
  EXPECT_LT(steady_clock::now() - start, seconds(5));
  EXPECT_NE(store.status().message().find("does not know a master named 'rlmaster-nope'"),
            std::string::npos)
      << store.status().to_string();
}

TEST(RedisSentinelUrl, Parses) {
  auto u = parse_redis_url("redis-sentinel://:pw@10.0.0.1:26380,[::1],s3/mymaster/2");
  ASSERT_TRUE(u.ok()) << u.status().to_string();
  EXPECT_TRUE(u->is_sentinel);
  ASSERT_EQ(u->seeds.size(), 3u);
  EXPECT_EQ(u->seeds[0].host, "10.0.0.1");
  EXPECT_EQ(u->seeds[0].port, 26380);
  EXPECT_EQ(u->seeds[1].host, "::1");
  EXPECT_EQ(u->seeds[1].port, 26379);
  EXPECT_EQ(u->seeds[2].port, 26379);
  EXPECT_EQ(u->master_name, "mymaster");
  EXPECT_EQ(u->db, 2);
  EXPECT_EQ(u->password, "pw");
  for (const char* bad : {"redis-sentinel://h:1", "redis-sentinel://h:1/", "redis-sentinel://h:1,/m",
                          "redis-sentinel://h:99999/m", "redis-sentinel://h/m/x",
                          "redis-sentinel:///m"}) {
    EXPECT_FALSE(parse_redis_url(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace ratelimit::testing
