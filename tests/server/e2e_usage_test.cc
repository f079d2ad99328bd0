// e2e_usage_test.cc — usage known after the response (issue 28), through the real binary on the
// memory store and on Redis: POST /v1/report records usage past the limit (a debt the next
// acquire is refused for, with the repayment time as Retry-After) and gives units back (a
// refund, never above the limit); several policies at once; bad input refused with nothing
// recorded; and the reservation pattern under concurrency — acquire(500) then report(actual -
// 500) from 50 clients — records exactly the sum of the actuals, on one daemon and on two
// sharing one Redis, within the over-admission bound docs/usage.md states.
// Windows are 1 h (started with room in their hour) and the buckets refill by 0.01 a second, so
// no count moves on its own by a whole unit while a test runs.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "daemon.h"
#include "redis_server.h"
#include "window_room.h"

namespace ratelimit::e2e {
namespace {

using namespace std::chrono_literals;

const char* const kAlgorithms[] = {"fw", "log", "counter", "token", "leaky"};

std::string policies() {
  return "policies:\n"
         "  fw:      { algorithm: fixed_window, limit: 10000, window: 1h }\n"
         "  log:     { algorithm: sliding_window_log, limit: 10000, window: 1h }\n"
         "  counter: { algorithm: sliding_window_counter, limit: 10000, window: 1h }\n"
         "  token:   { algorithm: token_bucket, rate: 0.01, burst: 10000 }\n"
         "  leaky:   { algorithm: leaky_bucket, rate: 0.01, burst: 10000 }\n"
         "  per_day: { algorithm: fixed_window, limit: 100000, window: 1h }\n"
         "  conc:    { algorithm: concurrency, limit: 5, lease_ttl: 30s }\n";
}

std::string prefix(const char* test) {
  return std::string("e2e-usage:") + test + ":" + std::to_string(getpid()) + ":" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + ":";
}

std::string memory_config() { return "store: { type: memory }\n" + policies(); }

std::string redis_config(const std::string& url, const std::string& key_prefix) {
  return "store: { type: redis, url: \"" + url + "\", key_prefix: \"" + key_prefix +
         "\", command_timeout: 2s, connect_timeout: 1s }\n" + policies();
}

std::string body(const std::string& policy, const std::string& key, int64_t cost) {
  return R"({"policy":")" + policy + R"(","key":")" + key + R"(","cost":)" + std::to_string(cost) + "}";
}

int64_t remaining(const Reply& r) { return r.json().as_object().at("remaining").to_number<int64_t>(); }

// The done-when walk of issue 28 for one policy: 9,900 of 10,000 then +500 reported -> 200,
// remaining 0; an acquire of 1 -> 429 whose Retry-After is the debt's repayment time; on another
// key an acquire of 1,000 then -900 -> remaining up by 900; -500 more -> the limit, never above.
void debt_and_refund(uint16_t port, const std::string& policy, int64_t repaid_in_s) {
  SCOPED_TRACE(policy);
  Client c(port);
  const std::string key = "walk-" + policy;
  Reply r = c.post("/v1/acquire", body(policy, key, 9900));
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(remaining(r), 100);
  r = c.post("/v1/report", body(policy, key, 500));
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(remaining(r), 0) << r.body;
  r = c.post("/v1/acquire", body(policy, key, 1));
  ASSERT_EQ(r.status, 429u) << r.body;
  const int64_t retry = std::stoll(r.header("Retry-After"));
  // Buckets: 401 units at 0.01 a second. Windows: the fixed window's debt leaves with the
  // current (epoch-aligned) hour; the log's with its oldest 9,900 entries, an hour after they
  // were taken; the counter's 10,400 only start to slide out when the hour ends, and one more
  // unit fits once 401/10,400 of the next hour (138.8 s) has passed — so its Retry-After can
  // exceed the window (a run in the first 139 s of an hour saw 3,699).
  const auto left_s = std::chrono::duration_cast<std::chrono::seconds>(
                          testing::window_time_left(std::chrono::hours(1))).count();
  const std::string name = policy;
  if (repaid_in_s == 0) repaid_in_s = name == "fw" ? left_s + 1 : name == "log" ? 3600 : left_s + 140;
  EXPECT_LE(retry, repaid_in_s) << r.body;  // less what refilled while the test ran
  EXPECT_GE(retry, repaid_in_s - 30) << r.body;

  const std::string key2 = "refund-" + policy;
  // The leaky bucket counts whole units down (floor): the leak since the acquire (0.01 a
  // second) may already show as one more unit left; the token bucket counts them up (ceil).
  const int64_t slack = policy == "leaky" ? 1 : 0;
  r = c.post("/v1/acquire", body(policy, key2, 1000));
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(remaining(r), 9000);
  r = c.post("/v1/report", body(policy, key2, -900));
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_GE(remaining(r), 9900) << r.body;
  EXPECT_LE(remaining(r), 9900 + slack) << r.body;
  r = c.post("/v1/report", body(policy, key2, -500));
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(remaining(r), 10000) << "a refund never raises remaining above the limit: " << r.body;
  r = c.post("/v1/peek", body(policy, key2, 1));
  EXPECT_EQ(remaining(r), 9999) << r.body;
}

void every_algorithm(uint16_t port) {
  for (const char* p : kAlgorithms) {
    // Token: the debt (400) and the token asked for; leaky: the level must leak to just below
    // the burst (floor(level) + 1 <= burst), 400 units and one micro-unit.
    const std::string name = p;
    debt_and_refund(port, p, name == "token" ? 40100 : name == "leaky" ? 40001 : 0);
  }
}

TEST(Usage, DebtAndRefundInEveryAlgorithmOnMemory) {
  testing::await_window_room(std::chrono::hours(1), std::chrono::seconds(60));
  Daemon d;
  ASSERT_TRUE(d.start(memory_config())) << d.log();
  every_algorithm(d.port());
}

TEST(Usage, DebtAndRefundInEveryAlgorithmOnRedis) {
  auto url = testing::shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().message();
  testing::await_window_room(std::chrono::hours(1), std::chrono::seconds(60));
  Daemon d;
  ASSERT_TRUE(d.start(redis_config(*url, prefix("walk")))) << d.log();
  every_algorithm(d.port());
}

// Tokens per hour and per "day" at once: both record, atomically, and both answer.
TEST(Usage, ReportToSeveralPoliciesRecordsInEach) {
  testing::await_window_room(std::chrono::hours(1), std::chrono::seconds(60));
  Daemon d;
  ASSERT_TRUE(d.start(memory_config())) << d.log();
  Client c(d.port());
  const Reply r = c.post("/v1/report", R"({"policies":["fw","per_day"],"key":"both","cost":700})");
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(remaining(c.post("/v1/peek", body("fw", "both", 1))), 10000 - 700 - 1);
  EXPECT_EQ(remaining(c.post("/v1/peek", body("per_day", "both", 1))), 100000 - 700 - 1);
}

// Every kind of bad report is a precise 400 and records nothing.
TEST(Usage, BadReportsAreRefusedAndRecordNothing) {
  Daemon d;
  ASSERT_TRUE(d.start(memory_config())) << d.log();
  Client c(d.port());
  ASSERT_EQ(c.post("/v1/acquire", body("fw", "bad", 100)).status, 200u);
  struct Case {
    const char* body;
    const char* error;
  } cases[] = {
      {R"({"policy":"nope","key":"bad","cost":5})", "unknown_policy"},
      {R"({"policy":"fw","key":"bad","cost":1.5})", "invalid_cost"},
      {R"({"policy":"fw","key":"bad","cost":"NaN"})", "invalid_cost"},
      {R"({"policy":"fw","key":"bad","cost":1e30})", "invalid_cost"},
      {R"({"policy":"fw","key":"bad","cost":-1e30})", "invalid_cost"},
      {R"({"policy":"fw","key":"bad","cost":1000001})", "invalid_cost"},
      {R"({"policy":"fw","key":"bad","cost":-1000001})", "invalid_cost"},
      {R"({"policy":"fw","key":"bad"})", "invalid_request"},
      {R"({"policy":"fw","key":"bad","cost":5,"max_wait_ms":10})", "invalid_request"},
      {R"({"policy":"fw","key":"","cost":5})", "invalid_key"},
      {R"({"policy":"conc","key":"bad","cost":5})", "concurrency_policy"},
      {R"({"policies":["fw","nope"],"key":"bad","cost":5})", "unknown_policy"},
  };
  for (const Case& k : cases) {
    const Reply r = c.post("/v1/report", k.body);
    EXPECT_EQ(r.status, 400u) << k.body << " -> " << r.body;
    EXPECT_NE(r.body.find(k.error), std::string::npos) << k.body << " -> " << r.body;
  }
  EXPECT_EQ(remaining(c.post("/v1/peek", body("fw", "bad", 1))), 10000 - 100 - 1);
  EXPECT_EQ(c.get("/v1/report").status, 405u);
}

// The reservation pattern: each of 50 clients acquires 500 (an estimate) and, when admitted,
// reports actual - 500 with actual drawn from 100 ... 1,500. Afterwards the count must be the sum
// of the admitted actuals exactly — read back by refunding all but half the limit, which leaves
// remaining = limit / 2 only if nothing was lost or invented — and the over-admission is within
// the bound of docs/usage.md: min(clients, ceil(limit / estimate)) * (max actual - estimate).
struct Reserved {
  std::atomic<int64_t> actual_sum{0};
  std::atomic<int> admitted{0};
  std::atomic<int> errors{0};
};

void reserve_and_reconcile(const std::vector<uint16_t>& ports, const std::string& key, Reserved& out) {
  constexpr int kClients = 50;
  constexpr int kRounds = 4;
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      Client c(ports[static_cast<size_t>(i) % ports.size()]);
      std::mt19937 rng(static_cast<uint32_t>(1000 + i));
      std::uniform_int_distribution<int64_t> actual(100, 1500);
      for (int k = 0; k < kRounds; ++k) {
        const Reply a = c.post("/v1/acquire", body("fw", key, 500));
        if (a.status == 429) continue;
        if (a.status != 200) {
          ++out.errors;
          continue;
        }
        const int64_t used = actual(rng);
        const Reply r = c.post("/v1/report", body("fw", key, used - 500));
        if (r.status != 200) {
          ++out.errors;
          continue;
        }
        out.actual_sum += used;
        ++out.admitted;
      }
    });
  }
  for (auto& t : threads) t.join();
}

void check_exact(uint16_t port, const std::string& key, const Reserved& got) {
  const int64_t sum = got.actual_sum.load();
  EXPECT_EQ(got.errors.load(), 0);
  ASSERT_GE(sum, 5000) << "too few admitted to read the count back";
  // Over-admission bound: at most 20 reservations of 500 fit in 10,000, each over by <= 1,000.
  EXPECT_LE(sum, 10000 + 20 * 1000) << "admitted " << got.admitted.load();
  const Reply r = http_post(port, "/v1/report", body("fw", key, -(sum - 5000)));
  ASSERT_EQ(r.status, 200u) << r.body;
  EXPECT_EQ(remaining(r), 5000) << "recorded != sum of actuals (" << sum << ", " << got.admitted.load()
                                << " admitted): " << r.body;
  std::printf("reserve/reconcile: %d admitted, %lld units recorded (limit 10000)\n", got.admitted.load(),
              static_cast<long long>(sum));
}

TEST(Usage, ReservationsReconciledConcurrentlyRecordExactlyOnMemory) {
  testing::await_window_room(std::chrono::hours(1), std::chrono::seconds(120));
  Daemon d;
  ASSERT_TRUE(d.start(memory_config())) << d.log();
  Reserved got;
  reserve_and_reconcile({d.port()}, "race", got);
  check_exact(d.port(), "race", got);
}

TEST(Usage, ReservationsReconciledConcurrentlyRecordExactlyOnTwoDaemonsSharingRedis) {
  auto url = testing::shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().message();
  testing::await_window_room(std::chrono::hours(1), std::chrono::seconds(120));
  const std::string cfg = redis_config(*url, prefix("race"));
  Daemon one, two;
  ASSERT_TRUE(one.start(cfg)) << one.log();
  ASSERT_TRUE(two.start(cfg)) << two.log();
  Reserved got;
  reserve_and_reconcile({one.port(), two.port()}, "race", got);
  check_exact(one.port(), "race", got);
}

}  // namespace
}  // namespace ratelimit::e2e
