// e2e_adaptive_test.cc — an adaptive concurrency limit through the real ratelimitd (issue 30):
// a real backend in this process (N workers; a call finding them all busy is refused, as a
// server without a queue answers 503) behind the lease API, driven by more clients than it has
// workers. Each client acquires a lease, calls the backend, and releases with the outcome
// (dropped when refused). The learned limit (the acquire answer's "limit") falls toward the
// backend's N while it is overloaded and climbs back when the backend grows (AIMD grows while
// half the limit is in use, so up to about twice what the clients hold); every limit seen
// lies in [min_limit, max_limit]. Events and bounded polls only: the thresholds are multiples of
// N, not timings. The same on a Redis store, and with two ratelimitd sharing one Redis (one
// learned limit for the fleet: src/redis/lua/adaptive.lua). Also: absurd release bodies are refused with 400 and change nothing, and the
// configuration's errors name the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "daemon.h"
#include "eventually.h"
#include "redis_server.h"

namespace ratelimit::e2e {
namespace {

using std::chrono::milliseconds;

// N workers; a call that finds them all busy is refused at once (false).
class Backend {
 public:
  explicit Backend(int workers) : workers_(workers) {}
  void resize(int workers) { workers_.store(workers); }
  bool call() {
    if (busy_.fetch_add(1) >= workers_.load()) {
      busy_.fetch_sub(1);
      return false;
    }
    std::this_thread::sleep_for(milliseconds(2));  // the service time (any value works)
    busy_.fetch_sub(1);
    return true;
  }

 private:
  std::atomic<int> workers_;
  std::atomic<int> busy_{0};
};

constexpr int kMin = 1, kMax = 60;
constexpr int kClients = 32;

const char* kConfig =
    "store: { type: memory }\n"
    "policies:\n"
    "  backend: { algorithm: concurrency, limit: adaptive, estimator: aimd, min_limit: 1, initial_limit: 60,\n"
    "             max_limit: 60, sample_window: 0, lease_ttl: 30s }\n"
    "  shape: { algorithm: concurrency, limit: adaptive, min_limit: 2, initial_limit: 5, max_limit: 10, lease_ttl: 30s }\n";

// The overload then growth loop on the daemons at `ports` (the clients spread over them).
// Returns the last limit each daemon answered.
std::vector<int64_t> learn(const std::vector<uint16_t>& ports) {
  Backend backend(5);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> last_limit{kMax};
  std::atomic<int64_t> out_of_bounds{0};
  std::atomic<int64_t> drops{0};
  std::vector<std::atomic<int64_t>> last_by_daemon(ports.size());  // 0: none answered yet
  std::vector<std::thread> clients;
  for (int t = 0; t < kClients; ++t) {
    clients.emplace_back([&, t] {
      const size_t daemon = static_cast<size_t>(t) % ports.size();
      Client c(ports[daemon]);
      while (!stop.load()) {
        const Reply a = c.post("/v1/leases", R"({"key":"db-1","policy":"backend"})");
        if (a.status == 429) {
          std::this_thread::sleep_for(milliseconds(1));  // pacing a refused client, not a wait for an event
          continue;
        }
        if (a.status != 200) continue;
        const int64_t limit = a.json().at("limit").as_int64();
        if (limit < kMin || limit > kMax) out_of_bounds.fetch_add(1);
        last_limit.store(limit);
        last_by_daemon[daemon].store(limit);
        const bool ok = backend.call();
        if (!ok) drops.fetch_add(1);
        c.request("DELETE", "/v1/leases/" + lease_id(a), ok ? R"({"outcome":"ok"})" : R"({"outcome":"dropped"})");
      }
    });
  }
  // Overloaded (32 clients, 5 workers): from 60 down to within 4x the workers.
  const bool fell = testing::eventually([&] { return last_limit.load() <= 20; }, milliseconds(30'000));
  const int64_t low = last_limit.load();
  // The backend grows to 60 workers: no more drops, the limit climbs back — while at least half
  // of it is in use (AIMD grows only then), so toward twice what the 32 clients hold at once.
  backend.resize(60);
  const bool rose = testing::eventually([&] { return last_limit.load() >= 24; }, milliseconds(30'000));
  stop.store(true);
  for (auto& t : clients) t.join();
  EXPECT_TRUE(fell) << "the limit stayed at " << low << " with 5 workers (drops " << drops.load() << ")";
  EXPECT_TRUE(rose) << "the limit stayed at " << last_limit.load() << " with 60 workers";
  EXPECT_GT(drops.load(), 0);
  EXPECT_EQ(out_of_bounds.load(), 0) << "a limit outside [min_limit, max_limit] was answered";
  std::printf("learned limit: %lld with 5 workers, %lld with 60; drops %lld\n", static_cast<long long>(low),
              static_cast<long long>(last_limit.load()), static_cast<long long>(drops.load()));
  std::vector<int64_t> out;
  for (auto& l : last_by_daemon) out.push_back(l.load());
  return out;
}

std::string redis_config(const testing::RedisServer& redis) {
  return "store: { type: redis, url: \"" + redis.url() + "\", command_timeout: 2s, connect_timeout: 2s }\n" +
         std::string(kConfig).substr(std::string(kConfig).find("policies:"));
}

TEST(E2EAdaptive, TheLearnedLimitFollowsTheBackendsWorkers) {
  Daemon d;
  ASSERT_TRUE(d.start(kConfig)) << d.log();
  learn({d.port()});
}

TEST(E2EAdaptive, TheLearnedLimitFollowsTheBackendsWorkersOnRedis) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.start().is_ok());
  Daemon d;
  ASSERT_TRUE(d.start(redis_config(redis))) << d.log();
  learn({d.port()});
}

// Issue 30: two ratelimitd on one Redis learn one limit — half the clients on each, one
// backend; both follow it, and once the load stops both answer the same learned limit.
TEST(E2EAdaptive, TwoDaemonsOnOneRedisLearnOneLimit) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.start().is_ok());
  Daemon one, two;
  ASSERT_TRUE(one.start(redis_config(redis))) << one.log();
  ASSERT_TRUE(two.start(redis_config(redis))) << two.log();
  const std::vector<int64_t> last = learn({one.port(), two.port()});
  EXPECT_GT(last[0], 0) << "the first daemon answered no lease";
  EXPECT_GT(last[1], 0) << "the second daemon answered no lease";
  // At rest: an acquire moves no limit, so each daemon's next answer is the one shared state's.
  Client c1(one.port()), c2(two.port());
  const Reply a = c1.post("/v1/leases", R"({"key":"db-1","policy":"backend"})");
  const Reply b = c2.post("/v1/leases", R"({"key":"db-1","policy":"backend"})");
  ASSERT_EQ(a.status, 200u) << a.body;
  ASSERT_EQ(b.status, 200u) << b.body;
  EXPECT_EQ(a.json().at("limit").as_int64(), b.json().at("limit").as_int64()) << a.body << " / " << b.body;
  // Without drops AIMD only grows: the shared limit is still at least what ended the growth.
  EXPECT_GE(a.json().at("limit").as_int64(), 24) << a.body;
  EXPECT_EQ(b.json().at("remaining").as_int64(), a.json().at("remaining").as_int64() - 1) << "one count of leases too";
}

TEST(E2EAdaptive, AbsurdReleasesAreRefusedAndChangeNothing) {
  Daemon d;
  ASSERT_TRUE(d.start(kConfig)) << d.log();
  Client c(d.port());
  const Reply a = c.post("/v1/leases", R"({"key":"k","policy":"shape"})");
  ASSERT_EQ(a.status, 200u) << a.body;
  EXPECT_EQ(a.json().at("limit").as_int64(), 5) << "initial_limit";
  const std::string path = "/v1/leases/" + lease_id(a);
  for (const char* body : {R"({"latency_ms":-1})", R"({"latency_ms":"NaN"})", R"({"latency_ms":3600000})",
                           R"({"latency_ms":1e300})", R"({"latency_ms":null})", R"({"outcome":"maybe"})",
                           R"({"outcome":"ok","latency":3})", R"([1])", "{"}) {
    const Reply r = c.request("DELETE", path, body);
    EXPECT_EQ(r.status, 400u) << body << " -> " << r.body;
  }
  const Reply second = c.post("/v1/leases", R"({"key":"k","policy":"shape"})");
  ASSERT_EQ(second.status, 200u);
  EXPECT_EQ(second.json().at("remaining").as_int64(), 3) << "the refused releases freed nothing";
  EXPECT_EQ(second.json().at("limit").as_int64(), 5) << "and moved nothing";
  const Reply ok = c.request("DELETE", path, R"({"outcome":"timeout","latency_ms":12.5})");
  ASSERT_EQ(ok.status, 200u) << ok.body;
  EXPECT_TRUE(ok.json().at("released").as_bool());
  // The learned limit per policy: still 5 (one sample of a 1 s window, which needs 10).
  const Reply page = c.get("/metrics");
  EXPECT_NE(page.body.find("ratelimitd_adaptive_limit{policy=\"shape\"} 5\n"), std::string::npos) << page.body;
}

TEST(E2EAdaptive, ConfigurationErrorsNameTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {"{ algorithm: concurrency, limit: adaptive, lease_ttl: 1s }", "needs 'max_limit'"},
      {"{ algorithm: concurrency, limit: adaptive, max_limit: 10, estimator: pid, lease_ttl: 1s }",
       "unknown estimator 'pid' (gradient2, aimd, vegas)"},
      {"{ algorithm: concurrency, limit: adaptive, max_limit: 10, min_limit: 20, lease_ttl: 1s }",
       "max_limit (10) must be at least min_limit (20)"},
      {"{ algorithm: concurrency, limit: 10, max_limit: 10, lease_ttl: 1s }",
       "'max_limit' applies with limit: adaptive"},
      {"{ algorithm: fixed_window, limit: 10, window: 1s, estimator: aimd }", "'estimator' applies to concurrency"},
      {"{ algorithm: concurrency, limit: adaptive, max_limit: 10, sample_window: 1ms, lease_ttl: 1s }",
       "window must be 0 (per sample) or 10000"},
  };
  for (const auto& [policy, want] : cases) {
    Daemon d;
    EXPECT_FALSE(d.start(std::string("store: { type: memory }\npolicies:\n  p: ") + policy + "\n")) << policy;
    EXPECT_NE(d.log().find(want), std::string::npos) << policy << "\n" << d.log();
  }
}

}  // namespace
}  // namespace ratelimit::e2e
