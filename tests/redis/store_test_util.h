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
// `in_flight` outstanding, and waits (bounded by `timeout`) for all of them.
inline FireResult fire(int total, int in_flight,
                       const std::function<void(std::function<void(Result<Decision>)>)>& issue,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(20000)) {
  struct Shared {
    std::mutex mu;
    std::condition_variable cv;
    FireResult r;
    int issued = 0;
    int done = 0;
  };
  auto sh = std::make_shared<Shared>();
  auto issue_one = std::make_shared<std::function<void()>>();
  *issue_one = [sh, total, &issue, issue_one_weak = std::weak_ptr<std::function<void()>>(issue_one)] {
    // A store may complete inline (e.g. failing fast while Redis is down); the completion then
    // asks for the next call from inside this one. A per-thread trampoline turns that into a
    // loop instead of unbounded recursion.
    static thread_local bool active = false;
    static thread_local int owed = 0;
    if (active) {
      ++owed;
      return;
    }
    active = true;
    owed = 1;
    while (owed > 0) {
      --owed;
      {
        std::lock_guard lock(sh->mu);
        if (sh->issued >= total) break;
        ++sh->issued;
      }
      issue([sh, total, issue_one_weak](Result<Decision> d) {
        bool more = false;
        {
          std::lock_guard lock(sh->mu);
          if (!d.ok()) {
            ++sh->r.errors;
          } else if (d->reason == DecisionReason::kStoreFailedOpen ||
                     d->reason == DecisionReason::kStoreFailedClosed) {
            ++sh->r.failed;
          } else if (d->allowed) {
            ++sh->r.allowed;
          } else {
            ++sh->r.denied;
          }
          ++sh->done;
          more = sh->issued < total;
          if (sh->done == total) sh->cv.notify_all();
        }
        if (more) {
          if (auto f = issue_one_weak.lock()) (*f)();
        }
      });
    }
    active = false;
    owed = 0;
  };
  for (int i = 0; i < in_flight; ++i) (*issue_one)();
  std::unique_lock lock(sh->mu);
  sh->r.finished = sh->cv.wait_for(lock, timeout, [&] { return sh->done == total; });
  FireResult out = sh->r;
  lock.unlock();
  // Calls still running hold `sh` and a weak reference to issue_one; `issue` must outlive them,
  // which the bounded wait above guarantees when finished is true.
  return out;
}

inline std::shared_ptr<RedisStore> must_connect(RedisStoreOptions o) {
  auto s = RedisStore::connect(std::move(o));
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? *s : nullptr;
}

}  // namespace ratelimit::testing
