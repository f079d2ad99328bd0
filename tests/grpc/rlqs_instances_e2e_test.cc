// rlqs_instances_e2e_test.cc — issue 29's "several ratelimitd, one limit": two real ratelimitd on
// one real Redis (a redis-server of its own: the test kills and restarts it), three real gRPC
// clients speaking Envoy's proto on one bucket of 300 rps, demands 10, 100 and 1000 rps, split
// 2 + 1 over the two daemons and reporting every second (src/rlqs/quota_sync.h).
//
// What must hold: once every client's first assignment (made before any demand was known) has
// been replaced — from the end of the second round on — the latest assignments of the three
// clients, summed over both daemons, are at most 300 × 1.1 after every single report; after
// convergence each is within 10 % of its max-min share of the whole fleet (10, 100, 190), which
// no daemon could give from its own clients alone (alone, the daemon of the 100-rps client would
// give it 300 and the other 10/290: 600 in all). Redis killed: each daemon divides the whole
// limit among its own clients (the documented N × over-admission), ratelimitd_rlqs_sync_up is 0
// and the outage is logged; Redis back: the shares of the whole fleet again.
// Bounded: ~10 + 8 + 10 rounds of one second; every wait has a deadline.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "redis_server.h"
#include "rlqs_client.h"
#include "rls_daemon.h"

namespace ratelimit {
namespace {

using rlqs_test::Envoy;
using rlqs_test::Pairs;
using Clock = std::chrono::steady_clock;

std::string config(uint16_t redis_port) {
  return "grpc_listen: 127.0.0.1:0\n"
         "store: {type: redis, url: \"redis://127.0.0.1:" + std::to_string(redis_port) +
         "/0\", command_timeout: 500ms, on_failure: open}\n"
         "rlqs:\n"
         "  sync_interval: 500ms\n"
         "  buckets:\n"
         "    - match: {name: api}\n"
         "      domain: envoy\n"
         "      limit: 300\n"
         "      unit: second\n";
}

struct Fleet {
  std::array<Envoy*, 3> clients;
  Clock::time_point next = Clock::now();
  double max_sum = 0;  // the largest sum seen after a single report, while checked
  int round = 0;

  double sum() const {
    double s = 0;
    for (const Envoy* c : clients) s += std::max(0.0, c->rate);
    return s;
  }
  // One round (each client reports once, a, b, c); when `check_sum`, the sum of the latest
  // assignments after each report is held to the bound. Returns whether all are near `targets`.
  bool play(const std::array<double, 3>& targets, bool check_sum, double bound) {
    std::this_thread::sleep_until(next);  // Envoy's reporting interval, not a wait for a result
    next += std::chrono::seconds(1);
    ++round;
    bool near = true;
    std::string line;
    for (size_t i = 0; i < clients.size(); ++i) {
      EXPECT_TRUE(clients[i]->report()) << "client " << i << " round " << round;
      if (check_sum) {
        max_sum = std::max(max_sum, sum());
        EXPECT_LE(sum(), bound) << "round " << round << " after client " << i << "'s report";
      }
      near = near && rlqs_test::near(clients[i]->rate, targets[i]);
      line += " " + std::to_string(static_cast<int>(clients[i]->rate));
    }
    std::cout << "round " << round << ":" << line << " (sum " << sum() << ")" << std::endl;
    return near;
  }
};

int64_t metric(const grpc_test::Server& s, const std::string& name) {
  return e2e::metric_value(s.daemon.port(), name);
}

TEST(RlqsInstancesE2e, TwoDaemonsOnOneRedisDivideOneLimit) {
  ratelimit::testing::RedisServer redis;
  ASSERT_TRUE(redis.start().is_ok());
  grpc_test::Server one, two;
  ASSERT_TRUE(one.start(config(redis.port())));
  ASSERT_TRUE(two.start(config(redis.port())));
  ASSERT_TRUE(one.daemon.wait_log("rlqs: sharing demands through Redis", std::chrono::seconds(5))) << one.daemon.log();
  const Pairs api = {{"name", "api"}};
  // a and c on the first daemon, b on the second.
  Envoy a(one.channel, api, 10), b(two.channel, api, 100), c(one.channel, api, 1000);
  Fleet fleet{{&a, &b, &c}};
  const std::array<double, 3> shares = {10, 100, 190};
  constexpr double kBound = 300 * 1.1;

  // Round 1: first reports (no demand known anywhere): the initial shares, not checked.
  fleet.play(shares, false, 0);
  // Round 2 replaces them; from its end on, the sum is held after every report.
  fleet.play(shares, false, 0);
  EXPECT_LE(fleet.sum(), kBound) << "after every client's second report";
  int converged = 0;
  for (int k = 3; k <= 10; ++k) {
    const bool near = fleet.play(shares, true, kBound);
    if (near && converged == 0) converged = k;
    if (!near) converged = 0;
  }
  EXPECT_NE(converged, 0) << "the assignments did not settle within 10 % of 10/100/190";
  EXPECT_LE(converged, 5) << "nor within five reports";
  std::cout << "within 10 % of 10/100/190 from round " << converged << "; largest sum after round 2: "
            << fleet.max_sum << " (bound " << kBound << ")" << std::endl;
  // Each daemon counts the other's clients in the division.
  const std::string labels = "{domain=\"envoy\",bucket=\"name=api\"}";
  EXPECT_EQ(metric(one, "ratelimitd_rlqs_bucket_clients" + labels), 2);
  EXPECT_EQ(metric(one, "ratelimitd_rlqs_bucket_remote_clients" + labels), 1);
  EXPECT_EQ(metric(two, "ratelimitd_rlqs_bucket_remote_clients" + labels), 2);
  EXPECT_EQ(metric(one, "ratelimitd_rlqs_sync_up"), 1);
  EXPECT_GT(metric(two, "ratelimitd_rlqs_sync_exchanges_total"), 5);

  // Redis killed: within a TTL each daemon divides the whole limit among its own clients: b 300
  // on its own (demand 100, the rest headroom), a and c 10/290.
  redis.kill();
  bool local_only = false;
  for (int k = 0; k < 8 && !local_only; ++k) local_only = fleet.play({10, 300, 290}, false, 0);
  EXPECT_TRUE(local_only) << "without Redis the daemons should fall back to local-only division";
  EXPECT_EQ(metric(one, "ratelimitd_rlqs_sync_up"), 0);
  EXPECT_GT(metric(two, "ratelimitd_rlqs_sync_failures_total"), 0);
  EXPECT_TRUE(two.daemon.wait_log("rlqs: exchanging demands through Redis failed", std::chrono::seconds(1)))
      << two.daemon.log();
  std::cout << "Redis down: local-only division, sum " << fleet.sum() << std::endl;

  // Redis back: the fleet's shares again, and the sum within the bound once they are.
  ASSERT_TRUE(redis.restart().is_ok());
  int back = 0;
  for (int k = 1; k <= 10 && back == 0; ++k) {
    if (fleet.play(shares, false, 0)) back = k;
  }
  EXPECT_NE(back, 0) << "the shares did not come back after Redis returned";
  std::cout << "Redis back: 10/100/190 again after " << back << " rounds" << std::endl;
  for (int k = 0; k < 3; ++k) fleet.play(shares, true, kBound);
  EXPECT_EQ(metric(two, "ratelimitd_rlqs_sync_up"), 1);
  EXPECT_TRUE(one.daemon.wait_log("rlqs: demands exchanged through Redis again", std::chrono::seconds(1)))
      << one.daemon.log();
}

}  // namespace
}  // namespace ratelimit
