// algorithms.h — the decision math: five rate algorithms and one concurrency algorithm, pure
// functions of (policy, state, now, cost, op) — and, for concurrency, the lease id.
//
// Why here and only here: this is the one home of the rate-limit math (DESIGN.md). The memory
// store and ratelimit-sim call these functions; each Redis Lua script mirrors one of them line
// for line, and the shared test vectors (tests/vectors/*.json) hold all of them together.
//
// Conventions and invariants:
//   - Time is integer microseconds (`now_us`). A clock that steps backwards is treated as
//     "no time passed" (elapsed = max(0, now - last)); state never moves back in time.
//   - Bucket quantities are integer micro-units: one unit (token, request) = kUnit = 10^6.
//     Refill/leak over `elapsed` µs at `rate` units/s is floor(elapsed * rate) micro-units
//     (see units.h), computed in doubles that are exact below 2^53 so Lua gets the same bits.
//   - A value-initialised state (`State{}`) is a key never seen before: windows empty, token
//     bucket full (nothing taken), leaky bucket empty.
//   - Op::kPeek never changes what any decision observes; it may still write (the sliding
//     log drops expired entries), so callers serialise peeks like acquires. A denied request
//     never changes state, except in the policy's count-denied mode (see
//     Policy::with_count_denied) and Policy::fixed_window_every_hit, which counts every hit.
//     A report (Op::kReport, report()) is never refused: it records usage learnt after the
//     fact even past the limit (a debt, bounded by max_recorded) or gives units back.
//   - Every function is deterministic and allocation-free except the sliding log, whose state
//     holds at most policy.limit() entries — max_recorded(policy) (9 limits) once reports
//     have put it in debt.
// Not thread-safe by themselves: callers serialise access to one state (the memory store
// locks its shard; a Lua script runs atomically on the Redis server).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "ratelimit/decision.h"
#include "ratelimit/policy.h"
#include "ratelimit/store.h"

namespace ratelimit::algo {

// Micro-units per unit of capacity (token, request) in the bucket algorithms.
inline constexpr int64_t kUnit = 1'000'000;

enum class Op : uint8_t {
  kAcquire,  // decide and, when admitted (or in count-denied mode), consume
  kPeek,     // decide what kAcquire would answer; change nothing
  kRelease,  // concurrency only: free the lease named by its id, if it is still held
  kRenew,    // concurrency only: extend the lease named by its id to now + lease_ttl, if held
  kReport,   // rate policies only: record usage known after the fact (cost > 0, never refused:
             // may drive the key into debt) or give units back (cost < 0: a refund); see report()
};

// The core op a store op performs.
inline Op op_of(StoreOp::Kind kind) {
  switch (kind) {
    case StoreOp::Kind::kAcquire: return Op::kAcquire;
    case StoreOp::Kind::kPeek: return Op::kPeek;
    case StoreOp::Kind::kRelease: return Op::kRelease;
    case StoreOp::Kind::kRenew: return Op::kRenew;
    case StoreOp::Kind::kReport: return Op::kReport;
  }
  return Op::kPeek;
}

struct FixedWindowState {
  int64_t window_start_us = 0;  // start of the window `count` belongs to (multiple of W)
  int64_t count = 0;            // units admitted in that window
};

struct SlidingWindowCounterState {
  int64_t window_start_us = 0;  // start of the current window (multiple of W)
  int64_t prev = 0;             // units admitted in the window before it
  int64_t curr = 0;             // units admitted in the current window
};

struct SlidingLogEntry {
  int64_t at_us;  // admission time
  int64_t cost;   // units admitted at that time
};
// The sliding log's queue: a ring buffer in one heap block (none while empty), so a key costs
// 16 bytes per live entry plus bounded slack rather than whatever its busiest moment needed.
// Invariant after every decide(): capacity() <= 2 * size() + 2 (an empty queue holds no
// block), so the block never exceeds 8 + 16 * (2 * size() + 2) bytes; it grows by half
// (plus 1) when full and shrinks to 1.5 * size() + 2 when that bound is passed, so both are
// amortised O(1). A copy holds exactly its entries. Not thread-safe (like the state it is in).
class SlidingLogQueue {
 public:
  SlidingLogQueue() noexcept = default;
  SlidingLogQueue(const SlidingLogQueue& other);
  SlidingLogQueue& operator=(const SlidingLogQueue& other);
  SlidingLogQueue(SlidingLogQueue&& other) noexcept;
  SlidingLogQueue& operator=(SlidingLogQueue&& other) noexcept;
  ~SlidingLogQueue();

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // Entry i, oldest first (0 <= i < size()).
  const SlidingLogEntry& operator[](size_t i) const { return data_[physical(i)]; }
  SlidingLogEntry& operator[](size_t i) { return data_[physical(i)]; }
  SlidingLogEntry& front() { return data_[head_]; }
  const SlidingLogEntry& back() const { return (*this)[size_ - 1]; }
  SlidingLogEntry& back_mut() { return (*this)[size_ - 1]; }
  void push_back(const SlidingLogEntry& e);
  // Both: precondition !empty(); the block is resized only by shrink_to_bound().
  void pop_front();
  void pop_back();
  // Restores capacity() <= 2 * size() + 2 (frees the block when empty).
  void shrink_to_bound();
  void clear();

  size_t capacity() const;
  // Bytes requested from the allocator for the block (0 when there is none).
  size_t heap_bytes() const { return data_ == nullptr ? 0 : kHeaderBytes + 16 * capacity(); }

 private:
  static constexpr size_t kHeaderBytes = 8;  // the capacity, in front of the entries
  size_t physical(size_t i) const {
    const size_t j = head_ + i;
    const size_t cap = capacity();
    return j < cap ? j : j - cap;
  }
  void reallocate(size_t capacity);

  SlidingLogEntry* data_ = nullptr;  // entries; the block's capacity is stored just before
  uint32_t head_ = 0;                // physical index of the oldest entry
  uint32_t size_ = 0;
};

struct SlidingWindowLogState {
  SlidingLogQueue entries;  // admitted requests in the window, oldest first
  int64_t units = 0;        // sum of cost over the entries
};

struct TokenBucketState {
  int64_t taken_u = 0;  // micro-units missing from a full bucket: tokens = burst - taken/kUnit
  int64_t last_us = 0;  // time of the last refill
};

struct LeakyBucketState {
  int64_t level_u = 0;  // virtual queue level in micro-units (GCRA)
  int64_t last_us = 0;  // time of the last leak
};

// One lease of a concurrency policy: `weight` units held until `expires_us` (exclusive: a
// lease whose expiry is <= now is gone).
struct LeaseEntry {
  LeaseId id;
  int64_t expires_us = 0;
  int64_t weight = 1;
  int64_t granted_us = 0;  // when it was granted: an adaptive policy's round trip starts here
  int64_t inflight = 0;    // units held once it was granted (itself included)
};

// The leases held on one key, in order of expiry (ties: by id) — the order of the Redis sorted
// set that mirrors it (src/redis/lua/concurrency.lua), so expired leases are a prefix and the
// leases that free soonest come first. Units held = the sum of the weights.
// An adaptive policy (Policy::adaptive) also keeps the key's learned limit (limit_m 0: none
// yet, initial_limit applies); a fixed one leaves it untouched.
struct ConcurrencyState {
  std::vector<LeaseEntry> leases;
  adaptive::AdaptiveState adaptive;
};

// The state-type column of the algorithm table (kAlgorithmTable, policy.h): StateOf<A> is the
// state decide() keeps for algorithm A. A row without one here fails to compile below.
template <Algorithm A> struct StateOf;
template <> struct StateOf<Algorithm::kFixedWindow> { using type = FixedWindowState; };
template <> struct StateOf<Algorithm::kSlidingWindowLog> { using type = SlidingWindowLogState; };
template <> struct StateOf<Algorithm::kSlidingWindowCounter> {
  using type = SlidingWindowCounterState;
};
template <> struct StateOf<Algorithm::kTokenBucket> { using type = TokenBucketState; };
template <> struct StateOf<Algorithm::kLeakyBucket> { using type = LeakyBucketState; };
template <> struct StateOf<Algorithm::kConcurrency> { using type = ConcurrencyState; };
template <Algorithm A> using StateOfT = typename StateOf<A>::type;

namespace detail {
template <size_t... I>
auto state_variant(std::index_sequence<I...>)
    -> std::variant<StateOfT<kAlgorithmTable[I].algorithm>...>;
}  // namespace detail

// Any algorithm's state: alternative i is the state of Algorithm i, in table order by
// construction (so state.index() == algorithm_index(policy.algorithm()) when they match).
using AlgorithmState =
    decltype(detail::state_variant(std::make_index_sequence<kAlgorithmCount>{}));
static_assert(std::variant_size_v<AlgorithmState> == kAlgorithmCount);
static_assert(std::is_same_v<std::variant_alternative_t<algorithm_index(Algorithm::kConcurrency),
                                                        AlgorithmState>,
                             ConcurrencyState>);

// Preconditions for every decide(): policy.algorithm() matches the state type; op is kAcquire
// or kPeek (kReport goes through report() or the dispatching decide below); 1 <= cost <=
// kMaxCost (validate_cost; 0 too for a policy that counts every hit, and for kPeek, which then
// answers the key's state as it is: remaining = what is left now). A cost above the capacity
// yields reason kExceedsCapacity.
Decision decide(const Policy& policy, FixedWindowState& s, int64_t now_us, int64_t cost, Op op);
Decision decide(const Policy& policy, SlidingWindowLogState& s, int64_t now_us, int64_t cost,
                Op op);
Decision decide(const Policy& policy, SlidingWindowCounterState& s, int64_t now_us, int64_t cost,
                Op op);
Decision decide(const Policy& policy, TokenBucketState& s, int64_t now_us, int64_t cost, Op op);
Decision decide(const Policy& policy, LeakyBucketState& s, int64_t now_us, int64_t cost, Op op);

// Concurrency (Policy::concurrency): leases whose expiry is <= now free themselves first; then
//   kAcquire: admitted when units held + cost <= limit, adding a lease {lease, now + lease_ttl,
//             cost}; denied: retry_after = until enough leases expire for it to fit;
//   kPeek:    what kAcquire would answer (only expired leases are dropped);
//   kRelease: frees `lease` if held (allowed), else kLeaseNotHeld — idempotent, and an expired
//             or foreign id frees nothing;
//   kRenew:   moves `lease`'s expiry to now + lease_ttl if held (allowed), else kLeaseNotHeld.
// Every decision: remaining = limit - units held after it (>= 0), reset_after = until the last
// lease expires. Precondition: `lease` non-empty for kAcquire, kRelease and kRenew, and not
// already held (the store draws it at random: new_lease_id()). Allocates when a lease is added.
// Adaptive (policy.adaptive()): `limit` above is the key's learned limit (s.adaptive; Decision::
// limit says it), and each lease is one sample (adaptive::update_at at now): a release, its
// round trip from granting (or report.latency_us) and report.dropped; a lease that expired
// unreleased, a drop with its TTL as round trip — once, as it is removed.
Decision decide(const Policy& policy, ConcurrencyState& s, int64_t now_us, int64_t cost, Op op,
                const LeaseId& lease, const adaptive::ReleaseReport& report = {});

// The units a concurrency key admits at once now: policy.limit(), or an adaptive policy's learned
// limit (initial_limit before its first sample), within [min_limit, max_limit].
int64_t concurrency_limit(const Policy& policy, const ConcurrencyState& s);

// Dispatches on the policy's algorithm. If `state` holds another algorithm's state (a policy
// was redefined under the same name), it is replaced by a fresh state first. `lease` is read by
// concurrency policies only (see above); the rate algorithms take kAcquire, kPeek and kReport
// (report() below).
Decision decide(const Policy& policy, AlgorithmState& state, int64_t now_us, int64_t cost, Op op,
                const LeaseId& lease = {}, const adaptive::ReleaseReport& release = {});

// ---- Usage known after the fact: report, refund and debt (docs/usage.md) ----
//
// Debt: a report records its cost even past the limit, so a key can hold more units than its
// limit — a window's count above the limit, log entries beyond it, a bucket below empty (token:
// taken above burst; leaky: level above burst). While it does, every acquire is refused, and
// the debt is repaid only by the algorithm's own refill: the window ends (fixed window), the
// entries age out (log), the counts slide out (counter), the bucket refills or drains. Its bound:
// a key never holds more than max_recorded(policy) units, kMaxDebtLimits limits beyond its limit
// (the sliding window counter also at most (2^53 - 1) / window_us, which keeps its weighted
// count exact in a Lua double; never less than one limit); units reported beyond it are not
// recorded. The units admitted in any window (bucket: over any span) are then at most the limit
// plus what reports recorded, and a key in debt admits nothing until it is repaid.
inline constexpr int64_t kMaxDebtLimits = 8;
// The most units a key of `policy` holds after reports (see above); the limit for a
// concurrency policy (which takes no reports) and 2^52 for a count of every hit.
int64_t max_recorded(const Policy& policy);

// Records a report of `cost` units (kMaxCost >= |cost|) in `state` at now_us and answers the key's
// state after it. cost > 0: added to what the key holds (capped by max_recorded: never lowered
// by a report); cost < 0, a refund: that many units given back, never more than the algorithm
// still holds (never below zero used: a window's count, the log's newest entries first, a
// bucket's level — never above a full token bucket); cost 0: nothing changes. Units are given
// back where they are remembered: a refund after the window of the acquire it corrects has
// ended gives back from the current window, which is all the algorithm can see.
// The answer: allowed, reason kWithinLimit (a report is never refused), remaining = what an
// acquire could still take now (0 in debt), reset_after = until the key is fully available
// again, retry_after and delay 0. Precondition: a rate policy whose algorithm matches `state`.
Decision report(const Policy& policy, AlgorithmState& state, int64_t now_us, int64_t cost);

// The per-algorithm step of report(): the state after recording `cost` at now_us (see there).
void record(const Policy& policy, FixedWindowState& s, int64_t now_us, int64_t cost);
void record(const Policy& policy, SlidingWindowLogState& s, int64_t now_us, int64_t cost);
void record(const Policy& policy, SlidingWindowCounterState& s, int64_t now_us, int64_t cost);
void record(const Policy& policy, TokenBucketState& s, int64_t now_us, int64_t cost);
void record(const Policy& policy, LeakyBucketState& s, int64_t now_us, int64_t cost);

// What a report moves `held` (units, or micro-units with cap in the same scale) to: adds a
// positive cost up to `cap` (never lowering a value already above it), takes a refund down to
// 0 at most. Shared by every algorithm's record().
inline int64_t recorded(int64_t held, int64_t cost, int64_t cap) {
  if (cost < 0) return held + cost > 0 ? held + cost : 0;
  const int64_t after = held + cost < cap ? held + cost : cap;
  return after > held ? after : held;
}

// The answer to a call whose policy does not share the meaning of the key's live state
// (Policy::same_state_meaning): denied with kPolicyConflict, nothing counted, remaining 0,
// retry_after = reset_after = until_idle_us (> 0: when that state ends). Every store answers
// a conflict with it (the Lua builds the same four fields). Pure.
Decision conflict_decision(const Policy& policy, int64_t until_idle_us);

// A fresh (never seen) state for the policy's algorithm.
AlgorithmState fresh_state(const Policy& policy);

// The earliest time at which `state` is equivalent to a fresh state if no request arrives
// (windows expired, bucket refilled or drained). A store may drop the key from then on; Redis
// scripts use the same figure for the key's TTL. Returns <= now for a state that is idle, and
// 0 for a state of another algorithm than the policy's (decide() would replace it).
int64_t idle_at_us(const Policy& policy, const AlgorithmState& state);

// What a store keeps of a key it had to forget before the key was idle (the memory store's
// eviction residue): the time the state would be idle, the units it had in use, and for the
// buckets their exact level. Compact (24 bytes with a fingerprint) and conservative:
// state_from_residue rebuilds a state that admits no more than the forgotten one would have.
// Residues of different keys merge (merge()) into one that restricts each of them at least as
// much as its own, because the rebuilt state only restricts more as idle_at_us or used grows.
struct Residue {
  int64_t idle_at_us = 0;  // <= now: nothing to remember
  int64_t used = 0;        // units in use when it was taken, rounded up (see residue_of)
  int64_t level_u = 0;     // buckets only, 0 after a merge: micro-units taken (token) or queued
                           // (leaky) at idle_at_us - time_to_drain(level_u): the exact state
};

// The residue of `state` at `now_us` (at or after the state's last decision). `used` is, per
// algorithm: fixed window, the window's count; sliding log, the units of the live entries;
// sliding window counter, the current estimate's units (curr + the previous window's weighted
// part, rounded down as decide() rounds it) or, when only the previous window holds units, its
// count; token and leaky bucket, the level now in whole units, rounded up; concurrency, the
// units of the live leases (rebuilt as one lease that nobody owns, until the last expiry).
Residue residue_of(const Policy& policy, const AlgorithmState& state, int64_t now_us);

// Two keys' residues as one: the larger idle time and use; the buckets' exact level is dropped
// (their rebuilt level then follows from idle_at alone, rounded toward refusing).
inline Residue merge(const Residue& a, const Residue& b) {
  return {a.idle_at_us > b.idle_at_us ? a.idle_at_us : b.idle_at_us,
          a.used > b.used ? a.used : b.used, 0};
}

// A state for `policy` at `now_us` that restricts at least as much as any state S of the policy
// whose residue r' (taken at or before now) is covered by r (r' itself, or merged into r): at
// every later time, a request it would admit S would admit too, so the units admitted after
// forgetting S never exceed what S had left. Fresh when r.idle_at_us <= now. How much more it
// restricts than S (the price of forgetting): fixed window, token and leaky bucket (own
// residue) none; sliding log, the live entries all count as if admitted with the newest one;
// sliding window counter, the previous window's weight stops decaying for the rest of the
// current window; a merged residue, as much as the most restrictive key merged into it (the
// buckets' level rounded up by one micro-unit).
AlgorithmState state_from_residue(const Policy& policy, const Residue& r, int64_t now_us);

// One policy's part in an all-or-nothing check.
struct Limit {
  const Policy* policy;
  AlgorithmState* state;
};

// All-or-nothing over several limits on one key: every limit is peeked; only if all admit
// is each one acquired, otherwise nothing changes (count-denied mode does not apply here).
// `out` receives one Decision per limit, in order. Returns true when all admitted.
// With Op::kPeek nothing changes in any case.
[[nodiscard]] bool decide_all(std::span<const Limit> limits, int64_t now_us, int64_t cost, Op op,
                std::vector<Decision>& out);

// One item of an all-or-nothing check across several states (several keys), each with its own
// cost and op (Store::decide_many_async with Atomicity::kAllOrNothing).
struct LimitOp {
  const Policy* policy;
  AlgorithmState* state;
  int64_t cost;
  Op op;
};

// The general all-or-nothing check: every item is peeked at its own cost; only if all admit is
// each kAcquire item acquired (kPeek items only take part in the check), otherwise nothing
// changes. `out` receives one Decision per item, in order. Returns true when all admitted.
// The states must be distinct objects. decide_all above is this with one cost and op for all.
[[nodiscard]] bool decide_all(std::span<const LimitOp> items, int64_t now_us, std::vector<Decision>& out);

// Index of the decision a response should report: the denied one with the longest
// retry_after (an exceeds-capacity denial first), else the admitted one with the fewest
// remaining (ties: the first). Precondition: !decisions.empty().
size_t most_restrictive(std::span<const Decision> decisions);

}  // namespace ratelimit::algo
