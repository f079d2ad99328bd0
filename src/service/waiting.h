// waiting.h — waiting instead of refusing: the service layer's bounded FIFO per (policy, key)
// in front of the decision service. A front-end that may wait (the HTTP API: /v1/acquire,
// /v1/leases, forward-auth) passes its request's wait budget and its completion here instead of
// to DecisionService::decide; nothing about queues is in any handler.
//
//   front-end ── decide(snapshot, items, budget, pending) ──> fast path: DecisionService
//                                 │ denied over the limit, budget > 0
//                                 v
//     per (policy, key): FIFO of waiters (<= max_queue) on the waiting thread
//        head re-decided (one store call) when woken by:
//          - a release of a lease on that key through this process (DecisionService's release
//            listener: immediately);
//          - a release through another process on the same Redis (released_elsewhere(), from
//            the store's release feed: immediately; this process's own release, heard again on
//            the feed, wakes nobody twice: the two arrivals are matched by lease id);
//          - the feed subscribing again after a loss (resubscribed(): every queue, once);
//          - the head's retry time: a rate policy's retry_after, a concurrency policy's earliest
//            lease expiry (without a feed, how a release through another process is seen: at
//            the latest when that lease would have expired; no polling);
//        admitted -> answered, the next head is tried while the decision says capacity is left;
//        a waiter's own deadline (min(max_wait, the request's budget)) -> 429 with Retry-After.
//
// Contract of decide(): as DecisionService::decide (true: answered now; false: pending.resume()
// exactly once later, from any thread), plus: one kAcquire item on a rule with max_wait > 0
// whose decision is a denial over the limit waits instead (at most min(rule.max_wait, budget));
// a full queue (max_queue waiters on that key) is answered at once with that denial; so is a
// denial that cannot turn into an admission within the budget (a rate retry_after beyond it,
// or a cost above the capacity). A request arriving while its key has waiters joins the tail
// without a store call, so waiters are served in arrival order; requests that arrive within
// one store round trip of each other are ordered as the store decides them. A rule with
// hold_delay (shape-mode leaky bucket) has each admitted acquire answered after its delay.
// Several items (all or nothing) never wait. The answer's outcome is counted once.
// cancel(pending): the client went away. A queued waiter leaves at once and costs nothing (no
// store call, no count); one whose re-decision is in flight is answered when it returns, and a
// lease it took then is released at once (a rate unit taken in that one round trip stays
// taken). The front-end must still let resume() arrive before it reuses the Pending.
// shutdown(): every waiter is answered now, with the denial it waited on (429 + Retry-After:
// not admitted; the client retries, on another instance if this one is going away); a held
// shaping answer is sent with its remaining delay. Later requests do not wait.
// Lifetime: the items (and the Rule and key they point to) and the snapshot must stay alive
// until completion (the front-end keeps them with its exchange); the service must outlive every
// Pending that used it, and must be built before and destroyed after its DecisionService's
// last decision.
// Thread-safety: decide(), cancel(), shutdown() and stats() from any thread. All queue state
// lives on the service's one waiting thread; the only shared words are per-shard atomics that
// let a request on a key with no waiters skip the thread entirely.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <thread>

#include "decision_service.h"

namespace ratelimit::service {

struct WaitStats {
  uint64_t waited = 0;     // requests that entered a queue
  uint64_t admitted = 0;   // ... and were admitted while waiting
  uint64_t timed_out = 0;  // ... answered 429 at their deadline
  uint64_t queue_full = 0; // denied at once: their key's queue was full
  uint64_t cancelled = 0;  // left the queue: the client went away
  uint64_t shutdown = 0;   // answered by shutdown()
  uint64_t held = 0;       // admitted answers held for their shaping delay
  uint64_t wakeups = 0;    // re-decisions of a queue's head (each one store call)
  int64_t waiting = 0;     // in a queue now
};

class WaitingService {
 public:
  explicit WaitingService(DecisionService& decisions);
  ~WaitingService();  // shutdown(), then stops the waiting thread
  WaitingService(const WaitingService&) = delete;
  WaitingService& operator=(const WaitingService&) = delete;

  // See top. `budget`: the most this request may wait (the policy's max_wait caps it; pass
  // Micros::max() when the request named none).
  bool decide(const Snapshot& snapshot, std::span<const Item> items, Atomicity atomicity, Micros budget,
              Pending& pending);
  // The client of `pending`'s current request went away (see top). Any thread; a no-op when the
  // request is not waiting.
  void cancel(Pending& pending);
  // Answers every waiter now (see top); later requests are decided without waiting.
  void shutdown();
  // A lease of `policy` on `key` was released, maybe through another process sharing the store
  // (the store's release feed: RedisStore::watch_releases). Wakes that key's queue here unless
  // this process's own release of `lease` already did. Any thread.
  void released_elsewhere(std::string_view policy, std::string_view key, const LeaseId& lease);
  // The release feed subscribed (again): releases may have been missed, so every queue's head
  // is decided once more. Also tells the service that releases come back on a feed (its own
  // are then remembered by id, to be recognised). Any thread.
  void resubscribed();
  WaitStats stats() const;

  DecisionService& decisions() { return decisions_; }

 private:
  friend struct Waiter;
  class Loop;
  static constexpr size_t kShards = 256;
  static size_t shard_of(std::string_view policy, std::string_view key);
  void released(std::string_view policy, std::string_view key, const LeaseId& lease, bool own);

  DecisionService& decisions_;
  std::unique_ptr<Loop> loop_;
  // Waiters queued in the keys of each shard (written on the waiting thread), and releases
  // seen per shard: together they close the gap between a denial and its enqueue (a release in
  // between is never lost, see waiting.cc).
  std::array<std::atomic<int64_t>, kShards> queued_{};
  std::array<std::atomic<uint64_t>, kShards> epoch_{};
  std::atomic<bool> stopped_{false};
  std::atomic<bool> feed_{false};  // releases come back on a release feed (resubscribed())
};

}  // namespace ratelimit::service
