// decision_service.h — the transport-neutral decision service: every front-end (the HTTP API,
// forward-auth, the Envoy gRPC API, POST /json) turns its request into Items and asks this
// service; the service asks the store in one asynchronous call path, whatever the store, and
// hands the answer back. Front-ends parse and render only.
//
//   front-end ── decide(snapshot, items, atomicity, pending) ──> Store::decide_many_async
//      ^                                                                 │
//      └── true: answered inline ── or ── pending.resume() from a store thread
//
// What is decided here, once for every front-end:
//   - the shadow/enforced split: with Atomicity::kAllOrNothing only the enforced items form
//     the all-or-nothing group; shadow items are decided on their own, so a dark-launched rule
//     can neither block nor un-count the enforced ones;
//   - shadow mode: a shadow item's denial is counted (Outcome::kShadowDenied) and answered as
//     admitted (allowed, retry_after 0) — except a lease's release or renew, whose answer
//     (held or not) is a fact, not a verdict;
//   - counting: one outcome per acquired item in its rule's counters (a peek counts nothing);
//     store errors and the decision latency go to the Observer.
// Completion: decide() returns true when the answer is complete on return (a store that
// completes inline, such as MemoryStore, costs no hand-off and no allocation); otherwise it
// returns false and calls pending.resume() exactly once, later, from a store thread; the
// front-end then hands the work back to its own thread (post) before rendering. Because the
// answer can only be rendered after decide() returned, a front-end may take whatever it must
// keep alive for rendering (its snapshot) after a false return.
// Invariants: bad input (kInvalidArgument from the store's validation) consumes nothing;
// Pending's results are written only by the service, and only before completion.
// Thread-safety: DecisionService is shared by every front-end thread; decide() and reset() may
// be called concurrently with distinct Pending objects.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "ratelimit/decision.h"
#include "ratelimit/status.h"
#include "ratelimit/store.h"
#include "snapshot.h"

namespace ratelimit::service {

class DecisionService;
class WaitingService;
struct Waiter;
struct WaiterDeleter {
  void operator()(Waiter* w) const;
};

// One decision to make: `cost` units of `key` under `*rule`, consumed or only checked; or, on a
// concurrency rule, the lease `lease` released or renewed (StoreOp).
struct Item {
  const Rule* rule = nullptr;
  std::string_view key;  // read before decide() returns
  int64_t cost = 1;
  StoreOp::Kind kind = StoreOp::Kind::kAcquire;
  // Null: rule->policy. Else the request's own variant of it (Policy::with_limit: same name,
  // so the same counter); must outlive the decision (the store reads it until completion).
  const Policy* policy = nullptr;
  LeaseId lease{};  // kRelease / kRenew
  adaptive::ReleaseReport report{};  // kRelease: the outcome / latency the client reported
  // kAcquire on a rule with classes: the request's class (index into rule->classes, 0 highest);
  // the waiting service serves its queues by it. Its limit is already in `policy`.
  uint8_t priority = 0;
};

// Where the service reports what it measures (the daemon's Metrics).
class Observer {
 public:
  virtual ~Observer() = default;
  // Time from decide() to the store's answer; once per decide() and reset() call.
  virtual void observe_decision(std::chrono::nanoseconds latency) = 0;
  // A call the store answered with an error other than invalid input.
  virtual void count_store_error() = 0;
};

// One decision in flight, owned by the front-end (one per connection or per call, reused for
// the next request once complete). Not copyable or movable: the store holds its address.
class Pending {
 public:
  Pending() = default;
  Pending(const Pending&) = delete;
  Pending& operator=(const Pending&) = delete;
  virtual ~Pending() = default;

  // The answer, complete when decide()/reset() returned true or resume() is called:
  Status status;                     // not ok: no decisions (invalid input, or a store error)
  std::vector<Decision> decisions;   // one per item, in order, shadow mode applied
  std::vector<uint8_t> shadow_denied;  // per item: 1 when a shadow rule denied it (answered admitted)

  // Set by the waiting service (waiting.h) when this request entered a queue (the front-end's
  // waits-by-class metrics); false when it was answered without waiting.
  bool queued = false;

  // Called exactly once, from a store thread, when a decision completes after decide() or
  // reset() returned false. Implementations post the rendering to their own thread.
  virtual void resume() = 0;

 private:
  friend class DecisionService;
  friend class WaitingService;
  friend struct Waiter;
  // Set by the waiting service (waiting.h) on its own Pending: the outcome is counted once, when
  // the waiter's final answer is known, not at each decision it waits through.
  bool defer_counting_ = false;
  // The waiting service's state for this front-end Pending, made on first use and reused.
  std::unique_ptr<Waiter, WaiterDeleter> waiter_;
  struct Slot {
    RuleCounters* counters;
    bool shadow;
    bool acquire;
    bool lease_op;  // a release or renew: never answered by shadow mode
    bool release;
  };
  DecisionService* service_ = nullptr;
  std::vector<Slot> slots_;                  // per item
  std::vector<StoreOp> ops_;                 // both store calls' ops, back to back
  std::vector<uint32_t> items_;              // item index of each op
  size_t split_ = 0;                         // ops_[0, split_) = call 0, the rest = call 1
  Status call_status_[2];
  std::atomic<int> outstanding_{0};
  std::chrono::steady_clock::time_point start_{};
};

class DecisionService {
 public:
  // `observer` may be null; else it must outlive the service.
  DecisionService(std::shared_ptr<Store> store, Observer* observer);

  // Decides `items` (1 ... kMaxOpsPerCall) against `snapshot`'s rules (items point into it;
  // the snapshot must stay alive until decide() returns). With kAllOrNothing, the enforced
  // items are decided all or nothing (shadow items apart, see top); with kIndependent each on
  // its own. Returns true when `pending` holds the answer now; false when pending.resume()
  // will be called once it does.
  [[nodiscard]] bool decide(const Snapshot& snapshot, std::span<const Item> items, Atomicity atomicity,
              Pending& pending);

  // Forgets `key` under `rule` (pending.status only; no decisions). Completion as decide().
  bool reset(const Rule& rule, std::string_view key, Pending& pending);

  Store& store() { return *store_; }

  // Called (on the thread that completes the decision) for every release that freed a held
  // lease, with its policy, key and id: the waiting service wakes that key's waiters. Set once,
  // before the first decision; may be empty.
  using ReleaseListener = std::function<void(const Policy& policy, std::string_view key, const LeaseId& lease)>;
  void set_release_listener(ReleaseListener listener) { release_listener_ = std::move(listener); }

 private:
  void on_store(Pending& p, int call, Result<std::span<const Decision>> result);
  void finish(Pending& p);

  std::shared_ptr<Store> store_;
  Observer* observer_;
  ReleaseListener release_listener_;
};

// How an acquire's decision is counted in its rule's counters.
Outcome outcome_of(const Decision& d, bool shadow);

}  // namespace ratelimit::service
