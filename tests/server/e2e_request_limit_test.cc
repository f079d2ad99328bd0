// e2e_request_limit_test.cc — a caller's own limit over HTTP (POST /v1/acquire with "limit"),
// end to end on the real ratelimitd, with the memory store and with a real Redis:
//   - within the policy's request_limit bounds the request is decided with that limit, on the
//     policy's own counter: raising a tenant's plan mid-window keeps what it has used;
//   - outside the bounds, on a policy without request_limit, or with "policies": 400, and
//     nothing is consumed;
//   - the answer (body and RateLimit-Policy) reports the limit the request was decided by.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>

#include "daemon.h"
#include "redis_server.h"

namespace ratelimit::e2e {
namespace {

const char* kPolicies =
    "policies:\n"
    "  plan: { algorithm: sliding_window_log, limit: 3, window: 1h, request_limit: { min: 2, max: 1000 } }\n"
    "  burst: { algorithm: token_bucket, rate: 0.001, burst: 2, request_limit: { max: 10 } }\n"
    "  fixed: { algorithm: fixed_window, limit: 3, window: 1h }\n";

Reply acquire(const Daemon& d, const std::string& key, const std::string& policy, int64_t limit) {
  std::string body = R"({"key":")" + key + R"(","policy":")" + policy + '"';
  if (limit != 0) body += R"(,"limit":)" + std::to_string(limit);
  return http_post(d.port(), "/v1/acquire", body + "}");
}

void check_plan_changes(const Daemon& d) {
  // Tenant 7 on a plan of 5 uses 4, then its plan is raised to 10 mid-window: 6 more pass.
  for (int i = 0; i < 4; ++i) {
    Reply r = acquire(d, "tenant:7", "plan", 5);
    ASSERT_EQ(r.status, 200u) << r.body;
    EXPECT_EQ(r.json().at("limit").as_int64(), 5);
    EXPECT_EQ(r.json().at("remaining").as_int64(), 5 - 1 - i);
    EXPECT_EQ(r.header("RateLimit-Policy"), "\"plan\";q=5;w=3600");
  }
  for (int i = 0; i < 6; ++i) {
    Reply r = acquire(d, "tenant:7", "plan", 10);
    ASSERT_EQ(r.status, 200u) << "request " << i << " on the raised plan: " << r.body;
    EXPECT_EQ(r.json().at("remaining").as_int64(), 10 - 4 - 1 - i);
  }
  Reply over = acquire(d, "tenant:7", "plan", 10);
  EXPECT_EQ(over.status, 429u) << over.body;
  EXPECT_EQ(over.json().at("limit").as_int64(), 10);
  // The same counter as the policy's own limit (3): already far over it.
  EXPECT_EQ(acquire(d, "tenant:7", "plan", 0).status, 429u);
  // Lowered below what is used: denied at once.
  EXPECT_EQ(acquire(d, "tenant:7", "plan", 2).status, 429u);

  // Another tenant on the configured limit is untouched by tenant 7's plan.
  for (int i = 0; i < 3; ++i) EXPECT_EQ(acquire(d, "tenant:8", "plan", 0).status, 200u);
  EXPECT_EQ(acquire(d, "tenant:8", "plan", 0).status, 429u);

  // A bucket's own limit is its burst (the rate stays the policy's).
  for (int i = 0; i < 5; ++i) EXPECT_EQ(acquire(d, "t", "burst", 5).status, 200u) << i;
  EXPECT_EQ(acquire(d, "t", "burst", 5).status, 429u);
}

void check_refusals(const Daemon& d) {
  auto error_of = [](const Reply& r) { return r.json().at("error").as_string(); };
  Reply low = acquire(d, "fresh", "plan", 1);
  EXPECT_EQ(low.status, 400u);
  EXPECT_EQ(error_of(low), "invalid_limit");
  EXPECT_NE(low.body.find("between 2 and 1000"), std::string::npos) << low.body;
  Reply high = acquire(d, "fresh", "plan", 1001);
  EXPECT_EQ(high.status, 400u);
  EXPECT_EQ(error_of(high), "invalid_limit");
  Reply none = acquire(d, "fresh", "fixed", 10);
  EXPECT_EQ(none.status, 400u);
  EXPECT_EQ(error_of(none), "limit_not_allowed");
  Reply multi = http_post(d.port(), "/v1/acquire", R"({"key":"fresh","policies":["plan","fixed"],"limit":5})");
  EXPECT_EQ(multi.status, 400u);
  EXPECT_EQ(error_of(multi), "invalid_request");
  // None of these consumed anything: "fresh" still has the whole configured limit.
  Reply peek = http_post(d.port(), "/v1/peek", R"({"key":"fresh","policy":"plan"})");
  EXPECT_EQ(peek.json().at("remaining").as_int64(), 2) << peek.body;  // after this one: 3 - 1
  Reply fixed = http_post(d.port(), "/v1/peek", R"({"key":"fresh","policy":"fixed"})");
  EXPECT_EQ(fixed.json().at("remaining").as_int64(), 2) << fixed.body;
}

TEST(E2ERequestLimit, MemoryStore) {
  Daemon d;
  ASSERT_TRUE(d.start(std::string("threads: 1\n") + kPolicies)) << d.log();
  check_plan_changes(d);
  check_refusals(d);
}

TEST(E2ERequestLimit, RedisStore) {
  auto url = testing::shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().message();
  static std::atomic<int> n{0};
  const std::string prefix = "e2e:request_limit:" + std::to_string(getpid()) + ":" + std::to_string(n++) + ":" +
                             std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + ":";
  Daemon d;
  ASSERT_TRUE(d.start("threads: 1\nstore: { type: redis, url: \"" + *url + "\", key_prefix: \"" + prefix + "\", command_timeout: 2s }\n" +
                      kPolicies))
      << d.log();
  check_plan_changes(d);
  check_refusals(d);
  if (HasFailure()) ADD_FAILURE() << "ratelimitd's log:\n" << d.log();
}

}  // namespace
}  // namespace ratelimit::e2e
