// store_test_util.h — shared helpers of the Redis store tests: building a store on the test
// Redis, unique key names, firing many calls with a bounded number in flight, and the policy
// sets the tests share.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "closed_loop.h"
#include "ratelimit/policy.h"
#include "ratelimit/redis_store.h"
#include "redis_server.h"

namespace ratelimit::testing {

inline RedisStoreOptions options_for(const std::string& url) {
  RedisStoreOptions o;
  o.url = url;
  o.connections = 4;
  o.command_timeout = std::chrono::milliseconds(2000);  // generous: shared, loaded machine
  o.connect_timeout = std::chrono::milliseconds(2000);
  return o;
}

// A key prefix no other run used, so tests never meet old state in the shared Redis.
inline std::string unique_prefix(const std::string& what) {
  std::random_device rd;
  return "rltest:" + what + ":" + std::to_string(rd()) + std::to_string(rd()) + ":";
}

struct FireResult {
  int allowed = 0;
  int denied = 0;
  int failed = 0;  // kStoreFailedOpen / kStoreFailedClosed
  int errors = 0;  // Result not ok
  bool finished = false;
};

// Fires `total` calls of `issue` (which must call its argument exactly once) keeping at most
// `in_flight` outstanding, and waits (bounded by `timeout`) for all of them. The driver is
// ratelimit-bench's (tools/bench/closed_loop.h).
inline FireResult fire(int total, int in_flight,
                       const std::function<void(std::function<void(Result<Decision>)>)>& issue,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(20000)) {
  // Shared so that calls still running after a timed-out wait never touch a dead frame.
  auto tally = std::make_shared<bench::Tally>();
  const bool finished = bench::closed_loop(
      total, in_flight,
      [&issue, tally](int, std::function<void(bench::Outcome)> done) {
        issue([tally, done = std::move(done)](Result<Decision> d) { done(bench::outcome_of(d)); });
      },
      *tally, timeout);
  std::lock_guard lock(tally->mu);
  FireResult out;
  out.allowed = tally->allowed;
  out.denied = tally->denied;
  out.failed = tally->failed;
  out.errors = tally->errors;
  out.finished = finished;
  return out;
}

inline Policy named(Result<Policy> p, const std::string& name) {
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return p->with_name(name).value();
}

inline bool is_failure(const Decision& d) {
  return d.reason == DecisionReason::kStoreFailedOpen ||
         d.reason == DecisionReason::kStoreFailedClosed;
}

// Limit 10 for every algorithm, nothing refills during a test: the leaky bucket admits again
// as soon as one micro-unit has leaked (floor(level) + cost <= burst), which takes 1 s here.
inline std::vector<Policy> limit_ten_policies() {
  using std::chrono::seconds;
  return {named(Policy::fixed_window(10, seconds(60)), "fw10"),
          named(Policy::sliding_window_log(10, seconds(60)), "swl10"),
          named(Policy::sliding_window_counter(10, seconds(60)), "swc10"),
          named(Policy::token_bucket(1e-6, 10), "tb10"),
          named(Policy::leaky_bucket(1e-6, 10), "lb10")};
}

// `total` acquires of one fresh key, `in_flight` at a time, limit 10 (sliding log): exactly 10
// admitted and nothing answered by the failure policy — the store is exact (again).
inline void expect_exactly_ten(Store& store, const std::string& key, int total = 200,
                               int in_flight = 50) {
  auto p = Policy::sliding_window_log(10, std::chrono::seconds(60))->with_name("exact").value();
  auto r = fire(total, in_flight,
                [&](auto done) { store.acquire_async(p, key, 1, std::move(done)); });
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.allowed, 10);
  EXPECT_EQ(r.denied, total - 10);
  EXPECT_EQ(r.failed + r.errors, 0);
}

// A test on the shared test Redis (RATELIMIT_TEST_REDIS_URL, or one tests/support starts):
// url_ is its URL and client_ a blocking client on it for looking at keys directly.
class RedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto url = shared_test_redis_url();
    ASSERT_TRUE(url.ok()) << url.status().to_string();
    url_ = *url;
    auto c = RedisClient::connect(url_);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    client_ = std::make_unique<RedisClient>(std::move(*c));
  }
  std::string url_;
  std::unique_ptr<RedisClient> client_;
};

inline std::shared_ptr<RedisStore> must_connect(RedisStoreOptions o) {
  auto s = RedisStore::connect(std::move(o));
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? *s : nullptr;
}

// Policies covering every algorithm and mode, with awkward rates (non-integer, below one per
// second) so floor/ceil and the drain correction loops are exercised.
inline std::vector<Policy> mirror_policies() {
  std::vector<Policy> ps;
  for (bool denied : {false, true}) {
    const std::string d = denied ? "-cd" : "";
    ps.push_back(named(Policy::fixed_window(5, std::chrono::milliseconds(1000)), "fw" + d).with_count_denied(denied));
    ps.push_back(named(Policy::sliding_window_log(5, std::chrono::milliseconds(1000)), "swl" + d).with_count_denied(denied));
    ps.push_back(named(Policy::sliding_window_counter(7, std::chrono::milliseconds(700)), "swc" + d).with_count_denied(denied));
    ps.push_back(named(Policy::token_bucket(3.7, 5), "tb" + d).with_count_denied(denied));
    ps.push_back(named(Policy::token_bucket(0.3, 3), "tbslow" + d).with_count_denied(denied));
    ps.push_back(named(Policy::leaky_bucket(2.9, 4, LeakyMode::kPolice), "lbp" + d).with_count_denied(denied));
    ps.push_back(named(Policy::leaky_bucket(1.0 / 3.0, 6, LeakyMode::kShape), "lbs" + d).with_count_denied(denied));
  }
  return ps;
}


}  // namespace ratelimit::testing
