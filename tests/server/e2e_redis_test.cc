// e2e_redis_test.cc — ratelimitd on the Redis store, end to end: two ratelimitd processes
// sharing one real Redis admit exactly the limit between them under concurrency, several
// policies stay all or nothing across processes, and an unreachable Redis is answered by the
// configured failure policy (open: 200, closed: 429 with Retry-After) and counted.
// Redis: the shared test server (RATELIMIT_TEST_REDIS_URL from scripts/test, or one started by
// tests/support); the failure test kills a private RedisServer of its own.
#include <gtest/gtest.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "daemon.h"
#include "window_room.h"
#include "redis_server.h"

namespace ratelimit::e2e {
namespace {

// A key prefix no earlier run or other test used, so a shared Redis never carries state over.
std::string fresh_prefix(const char* test) {
  static std::atomic<int> n{0};
  return std::string("e2e:") + test + ":" + std::to_string(getpid()) + ":" + std::to_string(n++) + ":" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + ":";
}

std::string config(const std::string& url, const std::string& prefix, const std::string& on_failure = "open") {
  return "store: { type: redis, url: \"" + url + "\", key_prefix: \"" + prefix + "\", on_failure: " +
         on_failure + ", command_timeout: 2s, connect_timeout: 1s }\n"
         "policies:\n"
         "  ten: { algorithm: sliding_window_log, limit: 10, window: 60s }\n"
         "  a10: { algorithm: fixed_window, limit: 10, window: 60s }\n"
         "  b15: { algorithm: token_bucket, rate: 0.001, burst: 15 }\n";
}

TEST(E2ERedis, TwoProcessesShareOneExactCount) {
  auto url = testing::shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().message();
  const std::string cfg = config(*url, fresh_prefix("exact"));
  Daemon one, two;
  ASSERT_TRUE(one.start(cfg)) << one.log();
  ASSERT_TRUE(two.start(cfg)) << two.log();
  // 200 acquires, 50 in flight (25 clients per process, 4 each), limit 10 -> exactly 10.
  const StatusCounts n =
      concurrent_acquires({one.port(), two.port()}, R"({"key":"shared","policy":"ten"})", 50, 4);
  EXPECT_EQ(n.ok, 10);
  EXPECT_EQ(n.denied, 190);
  EXPECT_EQ(n.other, 0);
  // Both processes see the same state.
  EXPECT_EQ(http_post(one.port(), "/v1/peek", R"({"key":"shared","policy":"ten"})").status, 429u);
  EXPECT_EQ(http_post(two.port(), "/v1/peek", R"({"key":"shared","policy":"ten"})").status, 429u);
}

TEST(E2ERedis, SeveralPoliciesAreAllOrNothingAcrossProcesses) {
  auto url = testing::shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().message();
  const std::string cfg = config(*url, fresh_prefix("atomic"));
  Daemon one, two;
  ASSERT_TRUE(one.start(cfg)) << one.log();
  ASSERT_TRUE(two.start(cfg)) << two.log();
  // a10 is a 60 s fixed window on Redis' clock (aligned to the minute): a boundary mid-run
  // would give its units back. The run takes well under a second; 5 s of the minute is left.
  testing::await_window_room(std::chrono::seconds(60), std::chrono::seconds(5));
  const PairCounts n = concurrent_pairs_and_singles(
      [&](int i) -> uint16_t { return i % 3 == 0 ? one.port() : two.port(); });
  EXPECT_EQ(n.errors, 0);
  EXPECT_EQ(n.pair_ok + n.single_ok, 15);
  EXPECT_LE(n.pair_ok, 10);
  const Reply p = http_post(one.port(), "/v1/peek", R"({"key":"atom","policy":"a10"})");
  if (n.pair_ok == 10) {
    EXPECT_EQ(p.status, 429u);
  } else {
    EXPECT_EQ(p.json().at("remaining").as_int64(), 10 - n.pair_ok - 1);
  }
}

TEST(E2ERedis, UnreachableRedisIsAnsweredByTheFailurePolicy) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.start().is_ok());
  Daemon open_d, closed_d;
  ASSERT_TRUE(open_d.start(config(redis.url(), fresh_prefix("fo"), "open"))) << open_d.log();
  ASSERT_TRUE(closed_d.start(config(redis.url(), fresh_prefix("fc"), "closed"))) << closed_d.log();
  ASSERT_EQ(http_post(open_d.port(), "/v1/acquire", R"({"key":"f","policy":"ten"})").status, 200u);
  ASSERT_EQ(http_post(closed_d.port(), "/v1/acquire", R"({"key":"f","policy":"ten"})").status, 200u);
  redis.kill();
  const Reply o = http_post(open_d.port(), "/v1/acquire", R"({"key":"f","policy":"ten"})");
  EXPECT_EQ(o.status, 200u) << o.body;
  const Reply c = http_post(closed_d.port(), "/v1/acquire", R"({"key":"f","policy":"ten"})");
  EXPECT_EQ(c.status, 429u) << c.body;
  EXPECT_EQ(c.header("Retry-After"), "1");
  const std::string mo = http_get(open_d.port(), "/metrics").body;
  EXPECT_NE(mo.find("ratelimitd_decisions_total{policy=\"ten\",outcome=\"failed_open\"} 1\n"), std::string::npos) << mo;
  const std::string mc = http_get(closed_d.port(), "/metrics").body;
  EXPECT_NE(mc.find("ratelimitd_decisions_total{policy=\"ten\",outcome=\"failed_closed\"} 1\n"), std::string::npos) << mc;
  // Still serving health checks and shutting down cleanly.
  EXPECT_EQ(http_get(closed_d.port(), "/healthz").status, 200u);
  closed_d.signal(SIGTERM);
  EXPECT_EQ(closed_d.wait_exit(std::chrono::seconds(10)), 0);
}

// /readyz follows the store: 503 while Redis is unreachable, 200 again once it is back;
// /healthz (liveness) stays 200 throughout.
TEST(E2ERedis, ReadyzFollowsTheStoreAndHealthzStaysUp) {
  testing::RedisServer redis;
  ASSERT_TRUE(redis.start().is_ok());
  Daemon d;
  ASSERT_TRUE(d.start(config(redis.url(), fresh_prefix("rz")))) << d.log();
  EXPECT_EQ(http_get(d.port(), "/readyz").status, 200u);
  redis.kill();
  auto wait_ready_status = [&](unsigned want) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    Reply r = http_get(d.port(), "/readyz");
    while (r.status != want && std::chrono::steady_clock::now() < end) {
      // A decision lets the store notice a dead connection at once.
      http_post(d.port(), "/v1/acquire", R"({"key":"r","policy":"ten"})");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      r = http_get(d.port(), "/readyz");
    }
    return r;
  };
  const Reply down = wait_ready_status(503);
  EXPECT_EQ(down.status, 503u) << down.body;
  EXPECT_NE(down.body.find("store_unavailable"), std::string::npos) << down.body;
  EXPECT_EQ(http_get(d.port(), "/healthz").status, 200u);
  // Decisions during the outage (failed open), then wait for the outage watch (a 500 ms poll)
  // to log the outage — not a guessed 800 ms, which a loaded machine can overrun.
  for (int i = 0; i < 20; ++i) http_post(d.port(), "/v1/acquire", R"({"key":"r","policy":"ten"})");
  ASSERT_TRUE(d.wait_log("store unavailable:", std::chrono::seconds(10))) << d.log();
  ASSERT_TRUE(redis.restart().is_ok());
  const Reply up = wait_ready_status(200);
  EXPECT_EQ(up.status, 200u) << up.body;
  // The outage is two log lines, whatever the number of failed decisions.
  const auto count = [](const std::string& log, const std::string& what) {
    size_t n = 0;
    for (size_t at = log.find(what); at != std::string::npos; at = log.find(what, at + 1)) ++n;
    return n;
  };
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (count(d.log(), "store available again") == 0 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::string log = d.log();
  EXPECT_EQ(count(log, "store unavailable:"), 1u) << log;
  EXPECT_EQ(count(log, "store available again"), 1u) << log;
  EXPECT_NE(log.find(" failed closed, "), std::string::npos) << log;
  EXPECT_EQ(log.find("store available again after 0.0s: 0 decisions failed open"), std::string::npos) << log;
  EXPECT_NE(http_get(d.port(), "/metrics").body.find("ratelimitd_http_requests_total{endpoint=\"readyz\",status=\"503\"}"),
            std::string::npos);
}

TEST(E2ERedis, ResetClearsTheSharedState) {
  auto url = testing::shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().message();
  const std::string token = "e2e-admin-token-0123456789";
  const std::string cfg = config(*url, fresh_prefix("reset")) + "admin_token: \"" + token + "\"\n";
  Daemon one, two;
  ASSERT_TRUE(one.start(cfg)) << one.log();
  ASSERT_TRUE(two.start(cfg)) << two.log();
  for (int i = 0; i < 10; ++i) ASSERT_EQ(http_post(one.port(), "/v1/acquire", R"({"key":"r","policy":"ten"})").status, 200u);
  EXPECT_EQ(http_post(two.port(), "/v1/acquire", R"({"key":"r","policy":"ten"})").status, 429u);
  Client c(two.port());
  EXPECT_EQ(c.request("POST", "/v1/reset", R"({"key":"r","policy":"ten"})", {{"Authorization", "Bearer " + token}}).status, 200u);
  EXPECT_EQ(http_post(one.port(), "/v1/acquire", R"({"key":"r","policy":"ten"})").status, 200u);
}

// store.denial_cache: repeats of a denied request are answered without a Redis call, counted;
// a reset through this ratelimitd forgets at once; a reset through another one is seen within
// max_ttl (the documented bound).
TEST(E2ERedis, DenialCacheAnswersRepeatsWithoutRedisAndRespectsResets) {
  auto url = testing::shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().message();
  const std::string token = "e2e-admin-token-0123456789";
  const std::string prefix = fresh_prefix("dcache");
  std::string cached = config(*url, prefix) + "admin_token: \"" + token + "\"\n";
  cached.replace(cached.find(" }\n"), 3, ", denial_cache: { max_ttl: 400ms } }\n");
  Daemon one, two;
  ASSERT_TRUE(one.start(cached)) << one.log();
  ASSERT_TRUE(two.start(config(*url, prefix) + "admin_token: \"" + token + "\"\n")) << two.log();
  const std::string body = R"({"key":"hot","policy":"ten"})";
  for (int i = 0; i < 10; ++i) ASSERT_EQ(http_post(one.port(), "/v1/acquire", body).status, 200u);
  ASSERT_EQ(http_post(one.port(), "/v1/acquire", body).status, 429u);  // the store's denial, remembered

  const std::string before = http_get(one.port(), "/metrics").body;
  Client c(one.port());
  for (int i = 0; i < 100; ++i) {
    const Reply r = c.request("POST", "/v1/acquire", body, {});
    ASSERT_EQ(r.status, 429u) << r.body;
    ASSERT_FALSE(r.header("Retry-After").empty());
  }
  const std::string after = http_get(one.port(), "/metrics").body;
  EXPECT_EQ(metric_in(after, "ratelimitd_denial_cache_hits_total") - metric_in(before, "ratelimitd_denial_cache_hits_total"),
            100) << after;
  EXPECT_EQ(metric_in(after, "ratelimitd_redis_commands_total"), metric_in(before, "ratelimitd_redis_commands_total"))
      << "a cached denial must not reach Redis";
  EXPECT_GE(metric_in(after, "ratelimitd_denial_cache_entries"), 1);

  // A reset through this instance: forgotten here at once.
  Client admin(one.port());
  ASSERT_EQ(admin.request("POST", "/v1/reset", body, {{"Authorization", "Bearer " + token}}).status, 200u);
  EXPECT_EQ(http_post(one.port(), "/v1/acquire", body).status, 200u);

  // Exhaust again, then reset through the other instance: this one may keep denying from its
  // cache, but for no longer than max_ttl (400 ms) after the denial it remembered.
  for (int i = 0; i < 9; ++i) ASSERT_EQ(http_post(one.port(), "/v1/acquire", body).status, 200u);
  ASSERT_EQ(http_post(one.port(), "/v1/acquire", body).status, 429u);
  const auto denied_at = std::chrono::steady_clock::now();
  Client other(two.port());
  ASSERT_EQ(other.request("POST", "/v1/reset", body, {{"Authorization", "Bearer " + token}}).status, 200u);
  // Timed by when each request is *sent*, not when its answer arrives: the cache remembered
  // the denial before denied_at, so a request sent max_ttl after it must not be refused from
  // the cache, however slowly this machine then answers it (a bound on the answer's arrival
  // would hold only with slack for a request's time, which a loaded machine can overrun).
  unsigned status = 429;
  auto last_denied_sent = denied_at;
  while (status == 429 && std::chrono::steady_clock::now() - denied_at < std::chrono::seconds(3)) {
    const auto sent = std::chrono::steady_clock::now();
    status = http_post(one.port(), "/v1/acquire", body).status;
    if (status == 429) {
      last_denied_sent = sent;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  EXPECT_EQ(status, 200u);
  EXPECT_LT(last_denied_sent - denied_at, std::chrono::milliseconds(400))
      << "a reset elsewhere must be seen within max_ttl (400 ms)";
}

// `--check --connect` runs the binary against a real redis-server: running (exit 0, the
// functions or scripts loaded), stopped (exit 1, the reason), a password it refuses (exit 2),
// and a port that accepts but never answers (exit 1 within the 3 s bound, though
// connect_timeout says 10 s). The memory store is trivially ok.
class CheckConnect : public ::testing::Test {
 protected:
  void TearDown() override { std::remove(path_.c_str()); }
  int check(const std::string& store_yaml, std::string& out, std::chrono::milliseconds* took = nullptr) {
    std::ofstream(path_) << "policies:\n  a: { algorithm: fixed_window, limit: 1, window: 1s }\n" << store_yaml;
    const auto start = std::chrono::steady_clock::now();
    const int rc = Daemon::run({"--config", path_, "--check", "--connect"}, out);
    if (took) *took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    return rc;
  }
  const std::string path_ = ::testing::TempDir() + "check_connect_" + std::to_string(::getpid()) + ".yaml";
};

TEST_F(CheckConnect, RunningStoppedRefusedAndSilentRedis) {
  std::string out;
  EXPECT_EQ(check("", out), 0) << out;
  EXPECT_NE(out.find("store memory (max_keys 1000000) OK (in process"), std::string::npos) << out;

  testing::RedisServer redis;
  ASSERT_TRUE(redis.start(0, {"--requirepass", "s3cret-pass"}).is_ok());
  const std::string hostport = "127.0.0.1:" + std::to_string(redis.port());
  EXPECT_EQ(check("store: { type: redis, url: \"redis://:s3cret-pass@" + hostport + "/0\" }\n", out), 0) << out;
  EXPECT_NE(out.find("OK (connected in "), std::string::npos) << out;
  EXPECT_TRUE(out.find("functions loaded (FCALL)") != std::string::npos ||
              out.find("scripts loaded (EVALSHA)") != std::string::npos) << out;
  EXPECT_EQ(out.find("s3cret-pass"), std::string::npos) << out;  // the password is never shown

  EXPECT_EQ(check("store: { type: redis, url: \"redis://:wrong-pass@" + hostport + "/0\" }\n", out), 2) << out;
  EXPECT_NE(out.find("refused after "), std::string::npos) << out;
  EXPECT_NE(out.find("AUTH"), std::string::npos) << out;
  EXPECT_EQ(check("store: { type: redis, url: \"redis://" + hostport + "/0\" }\n", out), 2) << out;
  EXPECT_NE(out.find("NOAUTH"), std::string::npos) << out;

  redis.kill();
  EXPECT_EQ(check("store: { type: redis, url: \"redis://:s3cret-pass@" + hostport + "/0\" }\n", out), 1) << out;
  EXPECT_NE(out.find("--connect: store redis redis://…@" + hostport + "/0 unreachable after "), std::string::npos) << out;
  EXPECT_NE(out.find("Connection refused"), std::string::npos) << out;
}

TEST_F(CheckConnect, ASilentPortIsGivenUpWithinTheBound) {
  // A listening socket nobody reads: the TCP connect succeeds, the Redis handshake never ends.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd, 8), 0);
  socklen_t len = sizeof a;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string url = "redis://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "/0";
  std::string out;
  std::chrono::milliseconds took{0};
  EXPECT_EQ(check("store: { type: redis, url: \"" + url + "\", connect_timeout: 10s }\n", out, &took), 1) << out;
  ::close(fd);
  EXPECT_NE(out.find("unreachable after "), std::string::npos) << out;
  EXPECT_NE(out.find("took longer than 3000 ms"), std::string::npos) << out;
  // Timed over the whole run (process start, config, connect): at least the bound, and well
  // before connect_timeout (10 s) — 9 s leaves a loaded machine's process start room (6 s was
  // a guess at this one's).
  EXPECT_GE(took.count(), 2900);
  EXPECT_LT(took.count(), 9000);
  // A shorter connect_timeout is the bound then.
  const int fd2 = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd2, 0);
  a.sin_port = 0;
  ASSERT_EQ(::bind(fd2, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(fd2, 8), 0);
  len = sizeof a;
  ASSERT_EQ(::getsockname(fd2, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const std::string url2 = "redis://127.0.0.1:" + std::to_string(ntohs(a.sin_port)) + "/0";
  EXPECT_EQ(check("store: { type: redis, url: \"" + url2 + "\", connect_timeout: 300ms }\n", out, &took), 1) << out;
  ::close(fd2);
  // The bound it gave up at, as it says it (machine-independent), and before the 3 s one.
  EXPECT_NE(out.find("took longer than 300 ms"), std::string::npos) << out;
  EXPECT_LT(took.count(), 2900) << out;
}

TEST(CheckConnectFlags, ConnectNeedsCheck) {
  std::string out;
  EXPECT_EQ(Daemon::run({"--config", std::string(RATELIMIT_SOURCE_DIR) + "/examples/ratelimit.yaml", "--connect"}, out), 2);
  EXPECT_NE(out.find("--connect goes with --check"), std::string::npos) << out;
}

}  // namespace
}  // namespace ratelimit::e2e
