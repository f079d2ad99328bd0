// store.cc — what every Store shares: input validation and the blocking forms built on the
// asynchronous ones (for stores that do not override them).
#include "ratelimit/store.h"

#include <future>
#include <string>

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
    if (Status s = validate_cost(*op.policy, op.cost); !s.is_ok()) return s;
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

namespace {

template <typename T, typename Start>
T wait_for(Start start) {
  std::promise<T> promise;
  auto future = promise.get_future();
  start([&promise](T r) { promise.set_value(std::move(r)); });
  return future.get();
}

}  // namespace

Result<Decision> Store::acquire(const Policy& policy, std::string_view key, int64_t cost) {
  return wait_for<Result<Decision>>(
      [&](auto done) { acquire_async(policy, key, cost, std::move(done)); });
}

Result<Decision> Store::peek(const Policy& policy, std::string_view key, int64_t cost) {
  return wait_for<Result<Decision>>(
      [&](auto done) { peek_async(policy, key, cost, std::move(done)); });
}

Result<std::vector<Decision>> Store::acquire_all(std::span<const Policy> policies,
                                                 std::string_view key, int64_t cost) {
  return wait_for<Result<std::vector<Decision>>>(
      [&](auto done) { acquire_all_async(policies, key, cost, std::move(done)); });
}

Status Store::reset(const Policy& policy, std::string_view key) {
  return wait_for<Status>([&](auto done) { reset_async(policy, key, std::move(done)); });
}

Result<std::vector<Decision>> Store::decide_many(std::span<const StoreOp> ops,
                                                 Atomicity atomicity) {
  return wait_for<Result<std::vector<Decision>>>([&](auto done) {
    decide_many_async(ops, atomicity, [done](Result<std::span<const Decision>> r) {
      if (!r) return done(r.status());
      done(std::vector<Decision>(r->begin(), r->end()));
    });
  });
}

void Store::decide_one_async(const StoreOp& op, DecisionCallback done) {
  decide_many_async({&op, 1}, Atomicity::kIndependent,
                    [done = std::move(done)](Result<std::span<const Decision>> r) {
                      if (!r) return done(r.status());
                      done(r->front());
                    });
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
  return wait_for<Result<Decision>>(
      [&](auto done) { release_async(policy, key, lease, std::move(done)); });
}

Result<Decision> Store::renew(const Policy& policy, std::string_view key, const LeaseId& lease) {
  return wait_for<Result<Decision>>(
      [&](auto done) { renew_async(policy, key, lease, std::move(done)); });
}

}  // namespace ratelimit
