// store_test_util.h — shared helpers of the Redis store tests: building a store on the test
// Redis, unique key names, and firing many calls with a bounded number in flight.
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

#include "closed_loop.h"
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

inline std::shared_ptr<RedisStore> must_connect(RedisStoreOptions o) {
  auto s = RedisStore::connect(std::move(o));
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? *s : nullptr;
}

}  // namespace ratelimit::testing
