// closed_loop.h — drive an asynchronous store with a fixed number of calls in flight: each of
// `concurrency` chains issues its next call when its previous one completes, until `total`
// have been issued. Shared by ratelimit-bench (race, throughput) and the Redis store tests.
//
// Why it needs care: a store may complete inline (a memory store always, a Redis store failing
// fast while Redis is down), so a completion asks for the next call from inside the call that
// issued it; a per-thread trampoline turns that into a loop instead of unbounded recursion.
// Invariants: `issue` is called exactly `total` times (unless the wait times out); every wait
// is bounded by `timeout`; the Tally is only touched under its mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>

#include "mutex.h"
#include "ratelimit/decision.h"
#include "ratelimit/status.h"

namespace ratelimit::bench {

enum class Outcome { kAllowed, kDenied, kFailed /* store failure policy */, kError /* Result not ok */ };

inline Outcome outcome_of(const Result<Decision>& d) {
  if (!d.ok()) return Outcome::kError;
  if (d->reason == DecisionReason::kStoreFailedOpen ||
      d->reason == DecisionReason::kStoreFailedClosed) {
    return Outcome::kFailed;
  }
  return d->allowed ? Outcome::kAllowed : Outcome::kDenied;
}

struct Tally {
  Mutex mu;
  std::condition_variable cv;
  int issued RL_GUARDED_BY(mu) = 0;
  int done RL_GUARDED_BY(mu) = 0;
  int allowed RL_GUARDED_BY(mu) = 0;
  int denied RL_GUARDED_BY(mu) = 0;
  int failed RL_GUARDED_BY(mu) = 0;
  int errors RL_GUARDED_BY(mu) = 0;
};

// Issues `total` calls of `issue(i, done)` with at most `concurrency` in flight; `issue` must
// call done(outcome) exactly once. Returns true when all completed within `timeout`. `issue`
// and `tally` must outlive every call still running when this returns false.
[[nodiscard]] inline bool closed_loop(int total, int concurrency,
                        const std::function<void(int, std::function<void(Outcome)>)>& issue,
                        Tally& tally, std::chrono::milliseconds timeout) {
  auto next = std::make_shared<std::function<void()>>();
  std::weak_ptr<std::function<void()>> weak = next;
  *next = [&tally, &issue, total, weak] {
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
      int i;
      {
        MutexLock lock(tally.mu);
        if (tally.issued >= total) break;
        i = tally.issued++;
      }
      issue(i, [&tally, total, weak](Outcome outcome) {
        bool more;
        {
          MutexLock lock(tally.mu);
          switch (outcome) {
            case Outcome::kAllowed: ++tally.allowed; break;
            case Outcome::kDenied: ++tally.denied; break;
            case Outcome::kFailed: ++tally.failed; break;
            case Outcome::kError: ++tally.errors; break;
          }
          ++tally.done;
          more = tally.issued < total;
          if (tally.done == total) tally.cv.notify_all();
        }
        if (more) {
          if (auto f = weak.lock()) (*f)();
        }
      });
    }
    active = false;
    owed = 0;
  };
  for (int c = 0; c < concurrency; ++c) (*next)();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(tally.mu);
  while (tally.done != total) {
    if (lock.wait_until(tally.cv, deadline) == std::cv_status::timeout) return tally.done == total;
  }
  return true;
}

}  // namespace ratelimit::bench
