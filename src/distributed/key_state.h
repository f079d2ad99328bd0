// key_state.h — what one DistributedStore holds for one (policy, key): the last view of the
// shared count, the lease slice or the async hits not yet pushed, and the requests waiting for
// the one store call in flight. Internal to src/distributed.
//
// Why apart from distributed_store.cc: this is the per-key policy of both modes (when to decide
// locally, when to ask the store, what to send, how a reply is applied); the store file only
// routes ops, holds the map and runs the background thread.
// Invariants:
//   - the caller holds DistributedStore::Core::mu around every method; no method calls a
//     completion or the shared store: answers and sends are returned in vectors for the caller
//     to run after dropping the lock;
//   - lease: at most one reserve in flight; a slice's units are spent only in its window and
//     before slice_until (the store's clock); units handed to a reserve as give_back leave the
//     slice before the call is sent (a failed call leaves them counted in the store: under-
//     admission only, never a second give-back);
//   - async: every admitted hit is in pending_ or pushing_ until a reply acknowledges it; a
//     failed push moves its hits back to pending_ (re-sent with the next push);
//   - every waiter is answered exactly once, by a reply or by the failure policy.
// Not thread-safe (see the lock above).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ratelimit/consistency.h"
#include "ratelimit/distributed_store.h"

namespace ratelimit::distributed_detail {

struct Counters {
  std::atomic<uint64_t> local_decisions{0}, exact_passthrough{0}, failed_open{0}, failed_closed{0},
      lease_reserves{0}, lease_reserve_failures{0}, lease_units_granted{0}, lease_units_returned{0},
      async_pushes{0}, async_push_failures{0}, async_units_pushed{0}, async_units_over_limit{0};
  // Gauges, refreshed by the background thread.
  std::atomic<uint64_t> units_held{0}, units_pending{0}, view_age_us{0}, keys{0};

  DistributedCounters snapshot() const;
};

// A store call to make (after the lock is dropped) and where its reply goes.
struct Send {
  enum class Kind : uint8_t { kReserve, kAddHits };
  Send(Kind k, const Policy& p) : kind(k), policy(p) {}
  Kind kind;
  Policy policy;
  std::string user_key;
  std::string map_key;
  uint64_t generation = 0;
  int64_t window_us = 0;  // reserve: the give-back's window; add_hits: the hits' window
  int64_t give_back = 0;
  int64_t want = 0;
  int64_t hits = 0;
};

// An answer to deliver (after the lock is dropped).
struct Answer {
  std::function<void(Decision)> done;
  Decision decision;
};

class KeyState {
 public:
  KeyState(const Policy& policy, std::string_view key, std::string map_key, uint64_t generation = 0);

  const Policy& policy() const { return policy_; }
  // Changes when the key is forgotten or redefined: replies of an older generation are ignored.
  uint64_t generation() const { return generation_; }

  // Decides `cost` units now (local time `local`, the store's clock ≈ local + offset): true
  // with `*out` set when answered here; false when the request waits for a store call (then
  // `later` is called exactly once, from a reply). `sends` receives the calls to make.
  [[nodiscard]] bool decide(int64_t cost, bool peek, int64_t local, int64_t offset,
              const DistributedStoreOptions& options, Counters& counters, Decision* out,
              std::function<void(Decision)> later, std::vector<Send>& sends);

  // Applies the reply to `sent` (a view or the store's error); answers waiters and may ask for
  // another call (a reserve that was not enough for everyone waiting).
  void on_reply(const Send& sent, const Result<algo::SharedView>& view, int64_t local,
                int64_t offset, const DistributedStoreOptions& options, Counters& counters,
                std::vector<Answer>& answers, std::vector<Send>& more);
  // A reply for a key no longer held (reset, dropped): only counted.
  static void count_orphan_reply(const Send& sent, const algo::SharedView& view, Counters& counters);

  // Background round: a due push, or the give-back of an expired slice.
  void tick(int64_t local, int64_t offset, const DistributedStoreOptions& options,
            Counters& counters, std::vector<Send>& sends);
  // Everything held goes back now (stop, redefinition).
  void flush(int64_t local, int64_t offset, Counters& counters, std::vector<Send>& sends);
  // Forgets counts (a reset): the slice is dropped, pending hits too; waiters and calls in
  // flight stay (their replies still answer the waiters).
  void forget();

  // The local time of this key's next background work (a push, a slice's expiry, being
  // dropped): the background thread need not look at it before then.
  int64_t due_at(int64_t offset) const;
  // Nothing held, nothing in flight, unused for long enough: may be dropped.
  bool idle(int64_t local) const;
  bool busy() const { return in_flight_ > 0 || !waiters_.empty(); }
  uint64_t view_age_us(int64_t local) const;
  uint64_t units_held() const;
  uint64_t units_pending() const;

 private:
  struct Waiter {
    int64_t cost;
    bool peek;
    std::function<void(Decision)> done;
  };
  using WindowUnits = std::vector<std::pair<int64_t, int64_t>>;  // (window start, units)

  bool lease() const { return policy_.consistency().mode == Consistency::kLease; }
  int64_t window_of(int64_t server_now) const;
  bool slice_live(int64_t server_now) const;
  // The algorithm's decision on the view plus what this instance knows beyond it.
  Decision local_decision(int64_t server_now, int64_t cost) const;
  Decision failure(const DistributedStoreOptions& options, Counters& counters) const;
  bool view_fresh(int64_t local, const DistributedStoreOptions& options) const;
  Send reserve_call(int64_t local, int64_t server_now, Counters& counters);
  void push_calls(int64_t local, Counters& counters, std::vector<Send>& sends);
  void accept_view(const algo::SharedView& v, int64_t local);
  void admit_hits(int64_t server_now, int64_t cost);
  void serve_lease_waiters(const Send& sent, const algo::SharedView& v, int64_t local,
                           int64_t offset, const DistributedStoreOptions& options,
                           std::vector<Answer>& answers, std::vector<Send>& more,
                           Counters& counters);
  void serve_async_waiters(int64_t local, int64_t offset, const DistributedStoreOptions& options,
                           Counters& counters, std::vector<Answer>& answers);

  Policy policy_;
  std::string key_;
  std::string map_key_;
  uint64_t generation_;

  bool have_view_ = false;
  algo::SharedView view_;
  int64_t view_local_ = 0;  // local time the view arrived
  int64_t last_used_ = 0;
  int in_flight_ = 0;       // store calls of this key in flight
  int64_t down_until_ = 0;  // local: after a failure, requests needing the store fail fast
  std::vector<Waiter> waiters_;

  // lease
  int64_t slice_ws_ = 0;
  int64_t slice_left_ = 0;
  int64_t slice_granted_ = 0;
  int64_t slice_until_ = 0;  // store's clock
  int64_t slice_at_ = 0;     // local time it was granted
  double demand_ = 0;        // units/s this instance spent from its last slice
  int64_t recheck_at_ = 0;   // local: a local denial stands until then

  // async
  WindowUnits pending_;  // admitted here, not yet sent
  WindowUnits pushing_;  // sent, not yet acknowledged
  int64_t next_sync_ = 0;
  bool used_since_sync_ = false;
};

}  // namespace ratelimit::distributed_detail
