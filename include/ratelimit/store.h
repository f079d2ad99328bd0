// store.h — where limit state lives: the interface every store implements (memory, Redis).
//
// Why asynchronous at heart: a networked store must keep many requests in flight on a few
// connections (pipelining), so each operation takes a completion that the store calls exactly
// once, on a thread of its choosing. The blocking forms are conveniences for embedding and
// tests.
// One door: a store implements exactly two virtual functions, decide_many_async (every
// decision: acquire, peek, release, renew, one op or many, independent or all or nothing) and
// reset_async. Every other call below is a non-virtual wrapper over them (store.cc), so a
// store — or a decorator over one (StoreDecorator, below) — decides each kind of call in one
// place and cannot answer acquire and decide_many differently. A blocking form whose completion
// runs inline costs no hand-off and no allocation.
// Contract for every implementation:
//   - Thread-safe: any method may be called from any thread, concurrently.
//   - The completion is called exactly once, possibly before the call returns (inline), and
//     must not throw. The store copies `key` and the policies before returning, so the caller's
//     buffers may die immediately.
//   - Errors (Result not ok) are for invalid input (kInvalidArgument, kResourceExhausted).
//     When the backing service fails, a store applies its configured failure policy and
//     answers a Decision with reason kStoreFailedOpen / kStoreFailedClosed instead.
//   - State is namespaced by policy name: the same key under two policies is two states.
//   - Concurrency policies (Policy::concurrency) go through the same calls: an acquire takes a
//     lease whose id the store draws (new_lease_id) and returns in Decision::lease; a release or
//     renew is a StoreOp of kind kRelease / kRenew naming the lease (release_async, renew_async
//     below). They are decided alone: never in acquire_all or an all-or-nothing decide_many.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "ratelimit/decision.h"
#include "ratelimit/policy.h"
#include "ratelimit/status.h"

namespace ratelimit {

inline constexpr size_t kMaxKeyLength = 512;  // bytes; longer keys are kInvalidArgument

// Checks a user key: 1 ... kMaxKeyLength bytes. Any byte values are allowed; stores must keep
// keys from colliding or escaping their namespace.
Status validate_key(std::string_view key);

using DecisionCallback = std::function<void(Result<Decision>)>;
// One Decision per policy, in the order given.
using DecisionsCallback = std::function<void(Result<std::vector<Decision>>)>;
using StatusCallback = std::function<void(Status)>;

// One item of Store::decide_many_async: `cost` units of `key` under `*policy`, consumed
// (kAcquire) or only checked (kPeek: what an acquire would answer; changes nothing); or, on a
// concurrency policy, the lease `lease` released (kRelease) or renewed (kRenew); or, on a rate
// policy, usage reported after the fact (kReport: `cost` recorded even past the limit, or given
// back when negative — algo::report in algorithms.h).
struct StoreOp {
  enum class Kind : uint8_t { kAcquire, kPeek, kRelease, kRenew, kReport };
  const Policy* policy = nullptr;  // read before decide_many_async returns; not kept
  std::string_view key;            // copied before decide_many_async returns
  int64_t cost = 1;                // 1 ... kMaxCost (0 too: check only, every-hit policies);
                                   // kReport: -kMaxCost ... kMaxCost
  Kind kind = Kind::kAcquire;
  LeaseId lease{};                 // kRelease / kRenew: the lease (non-empty); else ignored
  // kRelease on an adaptive policy: the outcome / latency the client reported (validated by
  // the caller: adaptive::validate_latency_us); ignored otherwise.
  adaptive::ReleaseReport report{};
};

// A fresh lease id: 128 bits from the kernel's CSPRNG (getrandom), never all zero. Stores call
// it for each admitted concurrency acquire. Thread-safe; fork-safe (a child never repeats its
// parent's ids).
LeaseId new_lease_id();

// How the ops of one decide_many_async call relate.
enum class Atomicity : uint8_t {
  // Each op is decided on its own, exactly as acquire_async / peek_async would decide it (a
  // denied op never prevents another from consuming). Ops may be decided in any order.
  kIndependent,
  // All or nothing across every op, atomically: each op is first checked at its own cost;
  // only if every one admits are the kAcquire ops consumed; otherwise nothing changes (count-
  // denied mode does not apply). Admitted ops report what they leave if all admit. kReport ops
  // never refuse, so a call of reports only records every one of them, atomically.
  kAllOrNothing,
};

// Most ops in one decide_many_async call — the one bound on the items of one decision: the
// decision service's batch and an Envoy request's descriptors (rls::kMaxDescriptors) are this
// constant under their own names, each checked by validate_op_count.
inline constexpr size_t kMaxOpsPerCall = 64;

// kInvalidArgument "between 1 and 64 <what>, got <n>" unless 1 <= n <= kMaxOpsPerCall.
[[nodiscard]] Status validate_op_count(size_t n, std::string_view what);

// The decisions of decide_many_async: decisions[i] answers ops[i]. The span is valid only
// during the call of the completion (copy what must outlive it).
using OpsCallback = std::function<void(Result<std::span<const Decision>>)>;

class Store {
 public:
  Store() = default;
  virtual ~Store() = default;
  // A store holds state (or connections): never copied, never moved.
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // ---- The door: the only virtual functions. ----
  // Every decision. Preconditions, checked before any state is touched (else the completion
  // gets kInvalidArgument and nothing changes): 1 ... kMaxOpsPerCall ops; every policy
  // non-null; every key valid (validate_key); every cost valid for its policy
  // (validate_cost(policy, cost)); with kAllOrNothing no (policy name, key) pair twice (both
  // ops would check the same state before either consumed). A store that cannot make the ops
  // atomic together (Redis Cluster: keys in different hash slots) refuses kAllOrNothing with
  // kInvalidArgument saying why. When the backing service fails, every op is answered by the
  // failure policy. The completion runs once, inline or on a store thread, as for every call.
  virtual void decide_many_async(std::span<const StoreOp> ops, Atomicity atomicity,
                                 OpsCallback done) = 0;
  // Forgets `key` under `policy`: its next request is treated as the first.
  virtual void reset_async(const Policy& policy, std::string_view key, StatusCallback done) = 0;

  // ---- Wrappers over the door (store.cc); none is virtual. ----
  // Decides `cost` units for `key` under `policy` and consumes them when admitted: one kAcquire
  // op, kIndependent.
  void acquire_async(const Policy& policy, std::string_view key, int64_t cost,
                     DecisionCallback done);
  // What acquire would answer now; changes nothing: one kPeek op.
  void peek_async(const Policy& policy, std::string_view key, int64_t cost,
                  DecisionCallback done);
  // Usage known after the fact (algo::report): `cost` units recorded even past the limit (the
  // key is then in debt), or given back when negative (a refund; -kMaxCost ... kMaxCost, see
  // validate_report_cost). Never refused: the Decision is the key's state after it. One kReport
  // op. Rate policies only.
  void report_async(const Policy& policy, std::string_view key, int64_t cost,
                    DecisionCallback done);
  // Several limits on one key, all or nothing: if any denies, none consumes. Each Decision is
  // that policy's answer (admitted ones report what they would leave if all had admitted).
  // Precondition (validate_acquire_all): 1 ... 16 policies with distinct names, none a
  // concurrency policy. One kAcquire op per policy, kAllOrNothing.
  void acquire_all_async(std::span<const Policy> policies, std::string_view key, int64_t cost,
                         DecisionsCallback done);

  // Blocking forms: wait for the completion (none from inside a completion of the same store).
  Result<Decision> acquire(const Policy& policy, std::string_view key, int64_t cost = 1);
  Result<Decision> peek(const Policy& policy, std::string_view key, int64_t cost = 1);
  Result<Decision> report(const Policy& policy, std::string_view key, int64_t cost);
  Result<std::vector<Decision>> acquire_all(std::span<const Policy> policies,
                                            std::string_view key, int64_t cost = 1);
  Status reset(const Policy& policy, std::string_view key);
  // Blocking decide_many_async: the decisions copied out, one per op.
  Result<std::vector<Decision>> decide_many(std::span<const StoreOp> ops, Atomicity atomicity);
  // decide_many_async of the one op `op`, kIndependent, answering its single Decision (or the
  // call's error). Thread-safety: that of decide_many_async.
  void decide_one_async(const StoreOp& op, DecisionCallback done);
  // Blocking decide_one_async.
  Result<Decision> decide_one(const StoreOp& op);

  // Concurrency policies: frees `lease` of `key` if it is still held (allowed), else a Decision
  // with reason kLeaseNotHeld (expired, released before, or never issued here: frees nothing).
  // Idempotent. A decide_many_async of one kRelease op.
  void release_async(const Policy& policy, std::string_view key, const LeaseId& lease,
                     DecisionCallback done);
  // Extends `lease` to now + lease_ttl if it is still held (allowed), else kLeaseNotHeld.
  void renew_async(const Policy& policy, std::string_view key, const LeaseId& lease,
                   DecisionCallback done);
  Result<Decision> release(const Policy& policy, std::string_view key, const LeaseId& lease);
  Result<Decision> renew(const Policy& policy, std::string_view key, const LeaseId& lease);
};

// The one base of every Store that stands in front of another (DenialCache, DistributedStore,
// RegionStore): it holds the inner store and forwards both doors to it unchanged, so a
// decorator overrides only the door whose answers it changes and inherits the rest.
// Thread-safety: that of the inner store. The decorator keeps the inner store alive.
class StoreDecorator : public Store {
 public:
  void decide_many_async(std::span<const StoreOp> ops, Atomicity atomicity,
                         OpsCallback done) override;
  void reset_async(const Policy& policy, std::string_view key, StatusCallback done) override;
  // The wrapped store.
  Store& inner() const { return *inner_; }

 protected:
  explicit StoreDecorator(std::shared_ptr<Store> inner) : inner_(std::move(inner)) {}

 private:
  std::shared_ptr<Store> inner_;
};

inline constexpr size_t kMaxPoliciesPerCall = 16;

// Validates the shared preconditions of acquire_all: 1 ... kMaxPoliciesPerCall policies, no
// name twice, none a concurrency policy, a valid key and cost. Stores call it before touching state.
Status validate_acquire_all(std::span<const Policy> policies, std::string_view key, int64_t cost);

// Validates the preconditions of decide_many_async (see there), and that kRelease / kRenew ops
// are on concurrency policies with a non-empty lease, that kReport ops are on rate policies
// with -kMaxCost <= cost <= kMaxCost (validate_report_cost), and that an all-or-nothing call
// holds no concurrency policy. Stores call it before touching state.
Status validate_decide_many(std::span<const StoreOp> ops, Atomicity atomicity);

// A report's cost: a rate policy (a concurrency policy's usage is its leases), and
// -kMaxCost ... kMaxCost (negative: a refund). kInvalidArgument saying which, else ok.
Status validate_report_cost(const Policy& policy, int64_t cost);

}  // namespace ratelimit
