// redis_store_decide.cc — RedisStore's single decisions: Impl::decide (one decision, batched by
// the script invoker with whatever else is queued: acquire_async, peek_async and every lease op
// — a concurrency acquire, release or renew) and Impl::decide_op (one StoreOp of
// decide_many_async, routed to the path its policy takes).
//
// Why its own file: the lease paths (a lease id drawn per concurrency acquire, carried back on
// the decision) change apart from connecting and counting (redis_store.cc).
//
// Invariants: `done` is called exactly once; a decision Redis answered for a concurrency policy
// carries its lease (an acquire's only when admitted); a failure-policy answer carries none,
// since nothing was stored under it; input errors answer with their Status before anything is
// sent.
#include <hiredis/hiredis.h>

#include "redis_store_impl.h"
#include "state_peek.h"

namespace ratelimit {
using namespace redis_detail;

void RedisStore::Impl::decide(const Policy& policy, std::string_view key, int64_t cost,
                              algo::Op op, DecisionCallback done, LeaseId lease,
                              const adaptive::ReleaseReport& report) {
  if (Status s = validate_key(key); !s.is_ok()) return done(s);
  if (op == algo::Op::kReport) {
    if (Status s = validate_report_cost(policy, cost); !s.is_ok()) return done(s);
    if (envoy_layout(policy)) return done(envoy_report_refused(policy));
  } else if (is_state_peek(policy, op == algo::Op::kPeek, cost)) {
    // a peek at the state as it is (state_peek.h)
  } else if (Status s = validate_cost(policy, cost); !s.is_ok()) {
    return done(s);
  }
  if (envoy_layout(policy)) return decide_envoy(policy, key, cost, op, std::move(done));
  const int64_t limit = policy.limit();
  if (policy.is_concurrency() && op == algo::Op::kAcquire) lease = new_lease_id();
  invoker->invoke_batched(
      decide_call(options.key_prefix, policy, key, cost, op, now_arg(), lease, report),
      [this, limit, lease, op, done = std::move(done)](const Status& error,
                                                       const redisReply* reply, size_t index,
                                                       size_t count) {
        if (error.is_ok()) {
          auto d = decode_decision_at(reply, index, count, limit);
          if (d.ok()) {
            counters.commands.fetch_add(1, std::memory_order_relaxed);
            if (!lease.empty() && (op != algo::Op::kAcquire || d->allowed)) d->lease = lease;
            return done(*d);
          }
          return done(fail_decisions(d.status(), {&limit, 1}).front());
        }
        done(fail_decisions(error, {&limit, 1}).front());
      });
}

Status RedisStore::Impl::envoy_report_refused(const Policy& policy) {
  // envoyproxy/ratelimit's counters take usage as hits (hits_addend), never a refund.
  return Status::invalid_argument("policy '" + policy.name() +
                                  "' keeps envoyproxy/ratelimit's counter layout: report usage "
                                  "as hits (Envoy's hits_addend), not through a report");
}

void RedisStore::Impl::decide_op(const StoreOp& op, DecisionCallback done) {
  const algo::Op kind = algo::op_of(op.kind);
  if (envoy_layout(*op.policy)) {
    return decide_envoy(*op.policy, op.key, op.cost, kind, std::move(done));
  }
  if (op.policy->is_concurrency()) {
    // A lease op (release_async, renew_async): batched like acquire_async, carrying its lease.
    return decide(*op.policy, op.key, op.cost, kind, std::move(done), op.lease, op.report);
  }
  run_script(decide_call(options.key_prefix, *op.policy, op.key, op.cost, kind, now_arg()),
             {op.policy->limit()},
             [done = std::move(done)](std::vector<Decision> d) { done(d.front()); });
}

}  // namespace ratelimit
