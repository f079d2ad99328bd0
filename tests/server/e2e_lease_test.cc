// e2e_lease_test.cc — concurrency policies through the real ratelimitd, counted from outside:
// the lease API's contract (statuses, bodies, RateLimit-Policy qu="concurrent-requests",
// idempotent ownership-checked release, renew, metrics); 200 HTTP clients on limit 10 holding
// at most 10 at every instant, on the memory store and on two ratelimitd sharing one Redis; a
// holder killed with SIGKILL frees its unit after lease_ttl and not before, and its late
// release then frees nothing.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <thread>

#include <boost/json.hpp>

#include "daemon.h"
#include "redis_server.h"

namespace ratelimit::e2e {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

const char* kPolicies =
    "policies:\n"
    "  db: { algorithm: concurrency, limit: 10, lease_ttl: 60s }\n"
    "  two: { algorithm: concurrency, limit: 2, lease_ttl: 60s }\n"
    "  one: { algorithm: concurrency, limit: 1, lease_ttl: 1500ms }\n"
    "  rate: { algorithm: fixed_window, limit: 10, window: 60s }\n";

std::string memory_config() { return std::string("store: { type: memory }\n") + kPolicies; }

std::string redis_config(const std::string& url, const std::string& prefix) {
  return "store: { type: redis, url: \"" + url + "\", key_prefix: \"" + prefix +
         "\", command_timeout: 2s, connect_timeout: 2s }\n" + kPolicies;
}

std::string fresh_prefix(const char* what) {
  return std::string("e2e-lease:") + what + ":" + std::to_string(getpid()) + ":" +
         std::to_string(Clock::now().time_since_epoch().count()) + ":";
}

TEST(E2ELeases, TheContract) {
  Daemon d;
  ASSERT_TRUE(d.start(memory_config())) << d.log();
  Client c(d.port());
  const Reply a = c.post("/v1/leases", R"({"key":"tenant-7","policy":"two"})");
  ASSERT_EQ(a.status, 200u) << a.body;
  const std::string id = lease_id(a);
  ASSERT_FALSE(id.empty()) << a.body;
  EXPECT_EQ(a.json().at("expires_ms").as_int64(), 60'000);
  EXPECT_EQ(a.json().at("remaining").as_int64(), 1);
  EXPECT_EQ(a.header("RateLimit-Policy"), R"("two";q=2;qu="concurrent-requests")");
  EXPECT_TRUE(c.post("/v1/leases", R"({"key":"tenant-7","policy":"two","cost":1})").status == 200u);
  const Reply full = c.post("/v1/leases", R"({"key":"tenant-7","policy":"two"})");
  EXPECT_EQ(full.status, 429u);
  EXPECT_EQ(full.header("Retry-After"), "60");
  EXPECT_EQ(c.post("/v1/leases", R"({"key":"tenant-7","policy":"two","cost":3})").status, 400u)
      << "a cost above the limit can never be admitted";

  const Reply renewed = c.post("/v1/leases/" + id + "/renew", "");
  EXPECT_EQ(renewed.status, 200u) << renewed.body;
  EXPECT_EQ(renewed.json().at("renewed").as_bool(), true);
  const Reply released = c.request("DELETE", "/v1/leases/" + id);
  ASSERT_EQ(released.status, 200u) << released.body;
  EXPECT_EQ(released.json().at("released").as_bool(), true);
  EXPECT_EQ(released.json().at("remaining").as_int64(), 1);
  const Reply again = c.request("DELETE", "/v1/leases/" + id);
  ASSERT_EQ(again.status, 200u) << "release is idempotent";
  EXPECT_EQ(again.json().at("released").as_bool(), false);
  EXPECT_EQ(c.post("/v1/leases/" + id + "/renew", "").status, 404u) << "released: nothing to renew";

  // A forged id (right policy and key, other 128 bits) frees nothing.
  std::string forged = id;
  forged[0] = forged[0] == '0' ? '1' : '0';
  EXPECT_EQ(c.request("DELETE", "/v1/leases/" + forged).json().at("released").as_bool(), false);
  EXPECT_EQ(c.post("/v1/peek", R"({"key":"tenant-7","policy":"two"})").json().at("remaining").as_int64(), 1);

  // Bad input is refused before the store, with the reason.
  EXPECT_EQ(c.request("DELETE", "/v1/leases/not-a-lease").status, 400u);
  EXPECT_EQ(c.request("DELETE", "/v1/leases/" + id.substr(0, 40)).status, 400u);
  EXPECT_EQ(c.get("/v1/leases").status, 405u);
  EXPECT_EQ(c.request("GET", "/v1/leases/" + id).status, 405u);
  EXPECT_EQ(c.post("/v1/leases", R"({"key":"k","policy":"nope"})").status, 400u);  // unknown_policy, as on acquire
  EXPECT_EQ(c.post("/v1/leases", R"({"key":"k","policy":"rate"})").status, 400u);
  EXPECT_EQ(c.post("/v1/leases", R"({"key":"k","policies":["two","db"]})").status, 400u);
  const Reply acquire = c.post("/v1/acquire", R"({"key":"k","policy":"two"})");
  EXPECT_EQ(acquire.status, 400u) << "acquire cannot release: concurrency policies are leases only";
  EXPECT_NE(acquire.body.find("concurrency_policy"), std::string::npos) << acquire.body;
  EXPECT_EQ(c.get("/v1/forward-auth?policy=two").status, 400u);

  const std::string metrics = c.get("/metrics").body;
  EXPECT_NE(metrics.find("ratelimitd_leases_acquired_total{policy=\"two\"} 2"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("ratelimitd_leases_denied_total{policy=\"two\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("ratelimitd_leases_released_total{policy=\"two\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("ratelimitd_leases_renewed_total{policy=\"two\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("ratelimitd_leases_held{policy=\"two\"} 1"), std::string::npos);
}

struct Contention {
  int peak = 0, admitted = 0, released_held = 0, other = 0;
};

// `clients` HTTP clients, each on its own connection to ports[i % n], each taking one lease of
// "db" (limit 10) on key "hot", holding it `hold`, then releasing it; a refused client retries
// after 2 ms. Counted by testing::HolderCount (raised after the 200, lowered before the DELETE,
// so it never exceeds what the store holds; the first ten wait there until ten hold at once).
Contention contend(const std::vector<uint16_t>& ports, int clients, milliseconds hold) {
  std::atomic<int> admitted{0}, held{0}, other{0};
  std::barrier sync(clients);
  std::vector<std::thread> threads;
  const auto stop_at = Clock::now() + std::chrono::seconds(90);
  testing::HolderCount holders(10, stop_at);
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      Client c(ports[static_cast<size_t>(i) % ports.size()]);
      sync.arrive_and_wait();
      while (Clock::now() < stop_at) {
        const Reply r = c.post("/v1/leases", R"({"key":"hot","policy":"db"})");
        if (r.status == 429) {
          std::this_thread::sleep_for(milliseconds(2));
          continue;
        }
        if (r.status != 200) {
          other++;
          return;
        }
        admitted++;
        if (hold_and_release(c, r, hold, holders)) held++;
        else other++;
        return;
      }
    });
  }
  for (auto& t : threads) t.join();
  return {holders.peak(), admitted.load(), held.load(), other.load()};
}

TEST(E2ELeases, TwoHundredClientsOnLimitTenHoldAtMostTenMemory) {
  Daemon d;
  ASSERT_TRUE(d.start(memory_config())) << d.log();
  const Contention n = contend({d.port()}, 200, milliseconds(25));
  EXPECT_EQ(n.peak, 10);
  EXPECT_EQ(n.admitted, 200);
  EXPECT_EQ(n.released_held, 200);
  EXPECT_EQ(n.other, 0);
  EXPECT_EQ(http_post(d.port(), "/v1/peek", R"({"key":"hot","policy":"db"})").json().at("remaining").as_int64(), 10);
}

TEST(E2ELeases, TwoHundredClientsOnLimitTenAcrossTwoDaemonsSharingRedis) {
  auto url = testing::shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().message();
  const std::string cfg = redis_config(*url, fresh_prefix("race"));
  Daemon one, two;
  ASSERT_TRUE(one.start(cfg)) << one.log();
  ASSERT_TRUE(two.start(cfg)) << two.log();
  const Contention n = contend({one.port(), two.port()}, 200, milliseconds(25));
  EXPECT_EQ(n.peak, 10);
  EXPECT_EQ(n.admitted, 200);
  EXPECT_EQ(n.released_held, 200);
  EXPECT_EQ(n.other, 0);
  EXPECT_EQ(http_post(one.port(), "/v1/peek", R"({"key":"hot","policy":"db"})").json().at("remaining").as_int64(), 10);
}

// A holder process takes the only unit of "one" (lease_ttl 1.5 s) and is killed with SIGKILL:
// it never releases. The unit stays held until lease_ttl has passed since the acquire, then
// frees itself; the dead holder's release, presented late, frees nothing of the new holder's.
void killed_holder_frees_after_ttl(const std::vector<uint16_t>& ports) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const auto before_acquire = Clock::now();
  const pid_t holder = fork();  // no thread of this process is running: safe to fork
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives this test if it fails before the kill
    close(fds[0]);
    const Reply r = http_post(ports.front(), "/v1/leases", R"({"key":"crash","policy":"one"})");
    const std::string id = r.status == 200 ? lease_id(r) : "";
    (void)!write(fds[1], id.data(), id.size());
    close(fds[1]);
    for (;;) pause();  // holds the lease until killed
  }
  close(fds[1]);
  std::string id;
  char buf[1024];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) id.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  const auto acquired_by = Clock::now();
  ASSERT_EQ(kill(holder, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(holder, &status, 0), holder);
  ASSERT_FALSE(id.empty()) << "the holder got no lease";

  // Not before lease_ttl: every attempt sent until 1.4 s after the holder began to acquire is
  // refused. How many attempts fit depends on how long the holder's acquire took (on a loaded
  // machine most of the window): at least one, each checking the claim.
  int refused = 0;
  while (Clock::now() < before_acquire + milliseconds(1400)) {
    const Reply r = http_post(ports.back(), "/v1/leases", R"({"key":"crash","policy":"one"})");
    ASSERT_EQ(r.status, 429u) << "freed before lease_ttl: " << r.body;
    ++refused;
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_GE(refused, 1) << "the holder's acquire took the whole window: nothing was checked";
  // After lease_ttl (1.5 s after the acquire, plus slack for a loaded machine) it is free.
  std::this_thread::sleep_until(acquired_by + milliseconds(1600));
  const Reply next = http_post(ports.back(), "/v1/leases", R"({"key":"crash","policy":"one"})");
  ASSERT_EQ(next.status, 200u) << next.body;
  // The dead holder's release, late: frees nothing (the new holder keeps the unit).
  const Reply late = Client(ports.front()).request("DELETE", "/v1/leases/" + id);
  ASSERT_EQ(late.status, 200u);
  EXPECT_EQ(late.json().at("released").as_bool(), false);
  EXPECT_EQ(http_post(ports.front(), "/v1/peek", R"({"key":"crash","policy":"one"})").json().at("remaining").as_int64(), 0);
  EXPECT_EQ(Client(ports.back()).request("DELETE", "/v1/leases/" + lease_id(next)).json().at("released").as_bool(), true);
}

TEST(E2ELeases, AKilledHolderFreesItsUnitAfterTheTtlAndNotBeforeMemory) {
  Daemon d;
  ASSERT_TRUE(d.start(memory_config())) << d.log();
  killed_holder_frees_after_ttl({d.port()});
  const std::string metrics = http_get(d.port(), "/metrics").body;
  EXPECT_NE(metrics.find("ratelimitd_leases_expired_total{policy=\"one\"} 1"), std::string::npos) << metrics;
}

TEST(E2ELeases, AKilledHolderFreesItsUnitAfterTheTtlAndNotBeforeRedisTwoDaemons) {
  auto url = testing::shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().message();
  const std::string cfg = redis_config(*url, fresh_prefix("crash"));
  Daemon one, two;
  ASSERT_TRUE(one.start(cfg)) << one.log();
  ASSERT_TRUE(two.start(cfg)) << two.log();
  killed_holder_frees_after_ttl({one.port(), two.port()});
}

}  // namespace
}  // namespace ratelimit::e2e
