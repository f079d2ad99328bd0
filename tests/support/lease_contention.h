// lease_contention.h — many threads contending for the leases of one concurrency key, counted
// from outside the store: the check behind "200 concurrent acquirers on limit 10 hold exactly
// 10 at every instant", shared by the memory and Redis tests (header-only: it needs nothing but
// a Store).
//
// How it counts: HolderCount (holder_count.h), raised after an acquire was admitted and lowered
// before the release, so a peak above the limit proves an over-admission; its gate holds the
// first `limit` leases until they are all held at once, so the peak reaching the limit does not
// depend on the machine's speed. Every release must report the lease still held (nothing
// expires: the TTL is far longer than the run). Bounded: every thread stops after `deadline`.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "holder_count.h"
#include "ratelimit/concurrency_limiter.h"

namespace ratelimit::testing {

struct ContentionResult {
  int peak_in_flight = 0;        // most holders at once, counted from outside
  int64_t admitted = 0;          // acquires that returned a held lease
  int64_t denied = 0;            // acquires refused over the limit
  int64_t released_held = 0;     // releases that reported the lease still held
  int64_t released_lost = 0;     // releases that reported it gone (must be 0 here)
  int64_t errors = 0;            // store errors and unexpected decisions
  bool finished = false;         // every thread completed its admissions before the deadline
};

// `threads` acquirers (released together) each take `holds_per_thread` leases on `key`, one
// at a time, holding each for `hold`; a denied acquirer waits `backoff` and tries again.
inline ContentionResult contend_for_leases(const ConcurrencyLimiter& limiter,
                                           const std::string& key, int threads,
                                           int holds_per_thread, std::chrono::microseconds hold,
                                           std::chrono::microseconds backoff,
                                           std::chrono::seconds deadline) {
  std::atomic<int64_t> admitted{0}, denied{0}, held{0}, lost{0}, errors{0};
  std::atomic<int> done{0};
  const auto stop_at = std::chrono::steady_clock::now() + deadline;
  HolderCount holders(static_cast<int>(limiter.policy().limit()), stop_at);
  std::latch start(threads);
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      start.arrive_and_wait();
      int got = 0;
      while (got < holds_per_thread && std::chrono::steady_clock::now() < stop_at) {
        auto lease = limiter.acquire(key);
        if (!lease.ok()) {
          errors.fetch_add(1);
          std::this_thread::sleep_for(backoff);
          continue;
        }
        if (!lease->held()) {
          if (lease->decision().reason != DecisionReason::kOverLimit) errors.fetch_add(1);
          denied.fetch_add(1);
          std::this_thread::sleep_for(backoff);
          continue;
        }
        ++got;
        admitted.fetch_add(1);
        holders.held();
        std::this_thread::sleep_for(hold);
        holders.releasing();
        auto r = lease->release();
        if (!r.ok()) {
          errors.fetch_add(1);
        } else if (*r) {
          held.fetch_add(1);
        } else {
          lost.fetch_add(1);
        }
      }
      if (got == holds_per_thread) done.fetch_add(1);
    });
  }
  for (auto& th : pool) th.join();
  ContentionResult r;
  r.peak_in_flight = holders.peak();
  r.admitted = admitted.load();
  r.denied = denied.load();
  r.released_held = held.load();
  r.released_lost = lost.load();
  r.errors = errors.load();
  r.finished = done.load() == threads;
  return r;
}

}  // namespace ratelimit::testing
