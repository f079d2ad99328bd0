// store.cc — what every Store shares: input validation, and every call but the two doors
// (decide_many_async, reset_async) written once as a wrapper over them; StoreDecorator's
// forwarding. Invariant: a wrapper adds no decision of its own — what a store answers through
// acquire is exactly what its decide_many_async answers for that one op.
#include "ratelimit/store.h"

#include <array>
#include <condition_variable>
#include <optional>
#include <string>
#include <thread>

#include "mutex.h"
#include "state_peek.h"

namespace ratelimit {

Status validate_key(std::string_view key) {
  if (key.empty()) return Status::invalid_argument("key must not be empty");
  if (key.size() > kMaxKeyLength) {
    return Status::invalid_argument("key is " + std::to_string(key.size()) +
                                    " bytes; the maximum is " + std::to_string(kMaxKeyLength));
  }
  return {};
}

namespace {

Status concurrency_alone(const Policy& p) {
  return Status::invalid_argument("policy '" + p.name() +
                                  "' is a concurrency policy: it is decided alone (leases), not "
                                  "together with other policies");
}

}  // namespace

Status validate_acquire_all(std::span<const Policy> policies, std::string_view key, int64_t cost) {
  if (policies.empty() || policies.size() > kMaxPoliciesPerCall) {
    return Status::invalid_argument("between 1 and " + std::to_string(kMaxPoliciesPerCall) +
                                    " policies per call, got " + std::to_string(policies.size()));
  }
  for (size_t i = 0; i < policies.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (policies[i].name() == policies[j].name()) {
        return Status::invalid_argument("policy '" + policies[i].name() + "' given twice");
      }
    }
    if (policies[i].is_concurrency()) return concurrency_alone(policies[i]);
  }
  if (auto s = validate_key(key); !s.is_ok()) return s;
  return validate_cost(cost);
}

Status validate_op_count(size_t n, std::string_view what) {
  if (n >= 1 && n <= kMaxOpsPerCall) return {};
  return Status::invalid_argument("between 1 and " + std::to_string(kMaxOpsPerCall) + " " + std::string(what) +
                                  ", got " + std::to_string(n));
}

Status validate_decide_many(std::span<const StoreOp> ops, Atomicity atomicity) {
  if (Status s = validate_op_count(ops.size(), "operations per call"); !s.is_ok()) return s;
  for (size_t i = 0; i < ops.size(); ++i) {
    const StoreOp& op = ops[i];
    if (op.policy == nullptr) return Status::invalid_argument("operation without a policy");
    if (Status s = validate_key(op.key); !s.is_ok()) return s;
    if (op.kind == StoreOp::Kind::kReport) {
      if (Status s = validate_report_cost(*op.policy, op.cost); !s.is_ok()) return s;
    } else if (is_state_peek(*op.policy, op.kind == StoreOp::Kind::kPeek, op.cost)) {
      // a peek at the state as it is (state_peek.h)
    } else if (Status s = validate_cost(*op.policy, op.cost); !s.is_ok()) {
      return s;
    }
    const bool lease_op = op.kind == StoreOp::Kind::kRelease || op.kind == StoreOp::Kind::kRenew;
    if (lease_op && !op.policy->is_concurrency()) {
      return Status::invalid_argument("policy '" + op.policy->name() +
                                      "' is not a concurrency policy: it has no leases to release "
                                      "or renew");
    }
    if (lease_op && op.lease.empty()) return Status::invalid_argument("release/renew without a lease id");
    if (atomicity != Atomicity::kAllOrNothing) continue;
    if (op.policy->is_concurrency()) return concurrency_alone(*op.policy);
    for (size_t j = 0; j < i; ++j) {
      if (ops[j].key == op.key && ops[j].policy->name() == op.policy->name()) {
        return Status::invalid_argument("all or nothing: policy '" + op.policy->name() +
                                        "' on the same key given twice");
      }
    }
  }
  return {};
}

Status validate_report_cost(const Policy& policy, int64_t cost) {
  if (policy.is_concurrency()) {
    return Status::invalid_argument("policy '" + policy.name() +
                                    "' is a concurrency policy: its usage is the leases it holds, "
                                    "not reports");
  }
  if (cost < -kMaxCost || cost > kMaxCost) {
    return Status::invalid_argument("cost of a report must be between -" + std::to_string(kMaxCost) +
                                    " and " + std::to_string(kMaxCost) + ", got " +
                                    std::to_string(cost));
  }
  return {};
}

namespace {

// The completion of a blocking form, which runs either inline (on the caller's thread, before
// the door returns: no lock, no hand-off) or later on a store thread (then the caller waits on
// the condition variable). A completion on the caller's thread is necessarily inline: the
// caller is blocked in wait() otherwise, and a store never runs a completion on a thread it
// does not own. The waiter lives on the caller's stack; the completion touches nothing of it
// after notifying under the lock, so the caller may return (and destroy it) as soon as it has
// seen `ready_`.
template <typename T>
class Waiter {
 public:
  void set(T value) {
    value_.emplace(std::move(value));
    if (std::this_thread::get_id() == caller_) {
      inline_ = true;
      return;
    }
    MutexLock lock(mu_);
    ready_ = true;
    cv_.notify_one();
  }
  T wait() {
    if (!inline_) {
      MutexLock lock(mu_);
      while (!ready_) lock.wait(cv_);
    }
    return std::move(*value_);
  }

 private:
  const std::thread::id caller_ = std::this_thread::get_id();
  bool inline_ = false;  // written and read on the caller's thread only
  std::optional<T> value_;
  Mutex mu_;
  std::condition_variable cv_;
  bool ready_ RL_GUARDED_BY(mu_) = false;
};

// The first decision of a door's answer (a call of one op).
Result<Decision> first(const Result<std::span<const Decision>>& r) {
  if (!r) return r.status();
  if (r->empty()) return Status::internal("a store answered no decision for one op");
  return r->front();
}

// Blocking: one call through the door, `make` turning its answer into T.
template <typename T, typename Make>
T through_door(Store& store, std::span<const StoreOp> ops, Atomicity atomicity, Make make) {
  Waiter<T> waiter;
  store.decide_many_async(ops, atomicity, [&waiter, &make](Result<std::span<const Decision>> r) {
    waiter.set(make(r));
  });
  return waiter.wait();
}

Result<std::vector<Decision>> copied(const Result<std::span<const Decision>>& r) {
  if (!r) return r.status();
  return std::vector<Decision>(r->begin(), r->end());
}

// acquire_all as ops: one kAcquire per policy, all or nothing. `policies` already validated
// (at most kMaxPoliciesPerCall).
std::span<const StoreOp> acquire_all_ops(std::array<StoreOp, kMaxPoliciesPerCall>& ops,
                                         std::span<const Policy> policies, std::string_view key,
                                         int64_t cost) {
  for (size_t k = 0; k < policies.size(); ++k) {
    ops[k] = {&policies[k], key, cost, StoreOp::Kind::kAcquire};
  }
  return {ops.data(), policies.size()};
}

}  // namespace

void Store::acquire_async(const Policy& policy, std::string_view key, int64_t cost,
                          DecisionCallback done) {
  decide_one_async({&policy, key, cost, StoreOp::Kind::kAcquire}, std::move(done));
}

void Store::peek_async(const Policy& policy, std::string_view key, int64_t cost,
                       DecisionCallback done) {
  decide_one_async({&policy, key, cost, StoreOp::Kind::kPeek}, std::move(done));
}

void Store::report_async(const Policy& policy, std::string_view key, int64_t cost,
                         DecisionCallback done) {
  decide_one_async({&policy, key, cost, StoreOp::Kind::kReport}, std::move(done));
}

void Store::acquire_all_async(std::span<const Policy> policies, std::string_view key,
                              int64_t cost, DecisionsCallback done) {
  if (Status s = validate_acquire_all(policies, key, cost); !s.is_ok()) return done(s);
  std::array<StoreOp, kMaxPoliciesPerCall> ops;
  decide_many_async(acquire_all_ops(ops, policies, key, cost), Atomicity::kAllOrNothing,
                    [done = std::move(done)](Result<std::span<const Decision>> r) {
                      done(copied(r));
                    });
}

Result<Decision> Store::acquire(const Policy& policy, std::string_view key, int64_t cost) {
  return decide_one({&policy, key, cost, StoreOp::Kind::kAcquire});
}

Result<Decision> Store::peek(const Policy& policy, std::string_view key, int64_t cost) {
  return decide_one({&policy, key, cost, StoreOp::Kind::kPeek});
}

Result<Decision> Store::report(const Policy& policy, std::string_view key, int64_t cost) {
  return decide_one({&policy, key, cost, StoreOp::Kind::kReport});
}

Result<std::vector<Decision>> Store::acquire_all(std::span<const Policy> policies,
                                                 std::string_view key, int64_t cost) {
  if (Status s = validate_acquire_all(policies, key, cost); !s.is_ok()) return s;
  std::array<StoreOp, kMaxPoliciesPerCall> ops;
  return through_door<Result<std::vector<Decision>>>(
      *this, acquire_all_ops(ops, policies, key, cost), Atomicity::kAllOrNothing, copied);
}

Status Store::reset(const Policy& policy, std::string_view key) {
  Waiter<Status> waiter;
  reset_async(policy, key, [&waiter](Status s) { waiter.set(std::move(s)); });
  return waiter.wait();
}

Result<std::vector<Decision>> Store::decide_many(std::span<const StoreOp> ops,
                                                 Atomicity atomicity) {
  return through_door<Result<std::vector<Decision>>>(*this, ops, atomicity, copied);
}

void Store::decide_one_async(const StoreOp& op, DecisionCallback done) {
  decide_many_async({&op, 1}, Atomicity::kIndependent,
                    [done = std::move(done)](Result<std::span<const Decision>> r) {
                      done(first(r));
                    });
}

Result<Decision> Store::decide_one(const StoreOp& op) {
  return through_door<Result<Decision>>(*this, {&op, 1}, Atomicity::kIndependent, first);
}

void Store::release_async(const Policy& policy, std::string_view key, const LeaseId& lease,
                          DecisionCallback done) {
  decide_one_async({&policy, key, 1, StoreOp::Kind::kRelease, lease}, std::move(done));
}

void Store::renew_async(const Policy& policy, std::string_view key, const LeaseId& lease,
                        DecisionCallback done) {
  decide_one_async({&policy, key, 1, StoreOp::Kind::kRenew, lease}, std::move(done));
}

Result<Decision> Store::release(const Policy& policy, std::string_view key, const LeaseId& lease) {
  return decide_one({&policy, key, 1, StoreOp::Kind::kRelease, lease});
}

Result<Decision> Store::renew(const Policy& policy, std::string_view key, const LeaseId& lease) {
  return decide_one({&policy, key, 1, StoreOp::Kind::kRenew, lease});
}

void StoreDecorator::decide_many_async(std::span<const StoreOp> ops, Atomicity atomicity,
                                       OpsCallback done) {
  inner_->decide_many_async(ops, atomicity, std::move(done));
}

void StoreDecorator::reset_async(const Policy& policy, std::string_view key,
                                 StatusCallback done) {
  inner_->reset_async(policy, key, std::move(done));
}

}  // namespace ratelimit
