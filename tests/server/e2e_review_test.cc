// e2e_review_test.cc — the fourth review's findings 3, 4 and 5 (issue 33) on the real ratelimitd,
// with the memory store and with a real Redis:
//   - a reload that lowers a limit below what a key counts answers remaining 0 and `r=0`, never a
//     negative number (fixed_window and sliding_window_log went to -10);
//   - POST /v1/leases applies a request's "limit" as acquire and peek do — refused with
//     limit_not_allowed / invalid_limit where they refuse it, applied where they apply it — so
//     peek and the lease it predicts agree; an unknown policy there is 400 unknown_policy.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <string>

#include "daemon.h"
#include "redis_server.h"
#include "window_room.h"

namespace ratelimit::e2e {
namespace {

std::string policies(int64_t limit) {
  const std::string l = std::to_string(limit);
  return "policies:\n"
         "  fixed: { algorithm: fixed_window, limit: " + l + ", window: 1h }\n"
         "  log: { algorithm: sliding_window_log, limit: " + l + ", window: 1h }\n"
         "  db: { algorithm: concurrency, limit: 2, lease_ttl: 60s, request_limit: { max: 5 } }\n"
         "  db_plain: { algorithm: concurrency, limit: 2, lease_ttl: 60s }\n";
}

std::string error_of(const Reply& r) { return std::string(r.json().at("error").as_string()); }

// 20 on each window policy, the limit lowered to 10 by a reload: denied with remaining 0.
void check_lowered_limit(Daemon& d, const std::string& store) {
  for (const char* p : {"fixed", "log"}) {
    const std::string body = std::string(R"({"key":"k","policy":")") + p + "\"}";
    for (int i = 0; i < 20; ++i) ASSERT_EQ(http_post(d.port(), "/v1/acquire", body).status, 200u) << p << " " << i;
  }
  d.rewrite_config(store + policies(10));
  d.signal(SIGHUP);
  ASSERT_TRUE(d.wait_log("reload ok", std::chrono::seconds(5))) << d.log();
  for (const char* p : {"fixed", "log"}) {
    const std::string body = std::string(R"({"key":"k","policy":")") + p + "\"}";
    for (const char* endpoint : {"/v1/acquire", "/v1/peek"}) {
      const Reply r = http_post(d.port(), endpoint, body);
      EXPECT_EQ(r.status, 429u) << p << endpoint << r.body;
      EXPECT_EQ(r.json().at("remaining").as_int64(), 0) << p << endpoint << r.body;
      EXPECT_EQ(r.json().at("limit").as_int64(), 10) << p << endpoint << r.body;
      EXPECT_NE(r.header("RateLimit").find(";r=0;"), std::string::npos) << p << endpoint << r.header("RateLimit");
    }
  }
}

void check_lease_limits(const Daemon& d) {
  const auto lease = [&](const std::string& body) { return http_post(d.port(), "/v1/leases", body); };
  const auto peek = [&](const std::string& body) { return http_post(d.port(), "/v1/peek", body); };
  // No request_limit: refused as peek refuses it, whatever the limit; nothing is taken.
  for (const char* limit : {"1000000", "1"}) {
    const std::string body = std::string(R"({"key":"l","policy":"db_plain","limit":)") + limit + "}";
    const Reply r = lease(body);
    EXPECT_EQ(r.status, 400u) << r.body;
    EXPECT_EQ(error_of(r), "limit_not_allowed") << r.body;
    EXPECT_EQ(error_of(peek(body)), "limit_not_allowed");
  }
  EXPECT_EQ(peek(R"({"key":"l","policy":"db_plain"})").json().at("remaining").as_int64(), 2) << "nothing taken";
  // Outside request_limit (max 5): invalid_limit, as peek.
  const Reply six = lease(R"({"key":"l","policy":"db","limit":6})");
  EXPECT_EQ(six.status, 400u) << six.body;
  EXPECT_EQ(error_of(six), "invalid_limit") << six.body;
  EXPECT_EQ(error_of(peek(R"({"key":"l","policy":"db","limit":6})")), "invalid_limit");
  // The policy's own 2 held; with "limit": 4 peek says 2 free, and the lease agrees.
  for (int i = 0; i < 2; ++i) ASSERT_EQ(lease(R"({"key":"l","policy":"db"})").status, 200u) << i;
  EXPECT_EQ(lease(R"({"key":"l","policy":"db"})").status, 429u);
  const Reply p4 = peek(R"({"key":"l","policy":"db","limit":4})");
  EXPECT_EQ(p4.status, 200u) << p4.body;
  EXPECT_EQ(p4.json().at("remaining").as_int64(), 2) << p4.body;  // free now (concurrency peek)
  EXPECT_EQ(p4.json().at("limit").as_int64(), 4) << p4.body;
  for (int64_t left : {1, 0}) {
    const Reply r = lease(R"({"key":"l","policy":"db","limit":4})");
    ASSERT_EQ(r.status, 200u) << r.body;
    EXPECT_EQ(r.json().at("limit").as_int64(), 4) << r.body;
    EXPECT_EQ(r.json().at("remaining").as_int64(), left) << r.body;
  }
  EXPECT_EQ(lease(R"({"key":"l","policy":"db","limit":4})").status, 429u);
  // An unknown policy: 400 unknown_policy, as on acquire and peek (the errors table).
  const Reply unknown = lease(R"({"key":"l","policy":"nope"})");
  EXPECT_EQ(unknown.status, 400u) << unknown.body;
  EXPECT_EQ(error_of(unknown), "unknown_policy");
}

TEST(E2EReview, MemoryStore) {
  testing::await_window_room(std::chrono::hours(1), std::chrono::seconds(30));
  Daemon d;
  const std::string store = "threads: 1\n";
  ASSERT_TRUE(d.start(store + policies(20))) << d.log();
  check_lease_limits(d);
  check_lowered_limit(d, store);
}

TEST(E2EReview, RedisStore) {
  auto url = testing::shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().message();
  testing::await_window_room(std::chrono::hours(1), std::chrono::seconds(30));
  static std::atomic<int> n{0};
  const std::string prefix = "e2e:review:" + std::to_string(getpid()) + ":" + std::to_string(n++) + ":" +
                             std::to_string(std::chrono::steady_clock::now().time_since_epoch().count()) + ":";
  const std::string store = "threads: 1\nstore: { type: redis, url: \"" + *url + "\", key_prefix: \"" + prefix +
                            "\", command_timeout: 2s }\n";
  Daemon d;
  ASSERT_TRUE(d.start(store + policies(20))) << d.log();
  check_lease_limits(d);
  check_lowered_limit(d, store);
  if (HasFailure()) ADD_FAILURE() << "ratelimitd's log:\n" << d.log();
}

}  // namespace
}  // namespace ratelimit::e2e
