// decide_many_mirror.cc — see decide_many_mirror.h.
#include "decide_many_mirror.h"

#include <map>
#include <random>
#include <utility>

#include "ratelimit/algorithms.h"

namespace ratelimit::vectors {
namespace {

std::string describe(const Decision& d) {
  return std::string(d.allowed ? "allowed" : "denied") + " reason " +
         std::to_string(static_cast<int>(d.reason)) + " remaining " + std::to_string(d.remaining) +
         " reset " + std::to_string(d.reset_after.count()) + " retry " +
         std::to_string(d.retry_after.count()) + " delay " + std::to_string(d.delay.count());
}

bool same(const Decision& a, const Decision& b) {
  return a.allowed == b.allowed && a.reason == b.reason && a.limit == b.limit &&
         a.remaining == b.remaining && a.reset_after == b.reset_after &&
         a.retry_after == b.retry_after && a.delay == b.delay;
}

Policy named(Result<Policy> p, const std::string& name) { return p->with_name(name).value(); }

}  // namespace

std::vector<Policy> decide_many_policies() {
  using std::chrono::milliseconds;
  std::vector<Policy> ps;
  for (bool denied : {false, true}) {
    const std::string d = denied ? "-cd" : "";
    ps.push_back(named(Policy::fixed_window(5, milliseconds(1000)), "dm-fw" + d).with_count_denied(denied));
    ps.push_back(named(Policy::sliding_window_log(4, milliseconds(900)), "dm-swl" + d).with_count_denied(denied));
    ps.push_back(named(Policy::sliding_window_counter(7, milliseconds(700)), "dm-swc" + d).with_count_denied(denied));
    ps.push_back(named(Policy::token_bucket(3.7, 5), "dm-tb" + d).with_count_denied(denied));
    ps.push_back(named(Policy::leaky_bucket(2.3, 4, LeakyMode::kShape), "dm-lb" + d).with_count_denied(denied));
  }
  ps.push_back(named(Policy::fixed_window_every_hit(3, milliseconds(800)), "dm-every-hit"));
  return ps;
}

std::vector<std::string> check_decide_many(Store& store, ManualClock& clock,
                                           const std::vector<Policy>& policies, int calls,
                                           uint32_t seed, const std::string& key_prefix) {
  std::mt19937 rng(seed);
  std::map<std::pair<std::string, std::string>, algo::AlgorithmState> model;
  std::vector<std::string> failures;
  int64_t now = 1'000'000'000;
  const std::vector<std::string> keys = {key_prefix + "a", key_prefix + "b", key_prefix + "c"};
  for (int call = 0; call < calls && failures.size() < 20; ++call) {
    now += std::uniform_int_distribution<int64_t>(0, 400'000)(rng);
    clock.set(Micros{now});
    const Atomicity atomicity = rng() % 2 == 0 ? Atomicity::kIndependent : Atomicity::kAllOrNothing;
    const size_t n = 1 + rng() % 4;
    std::vector<StoreOp> ops;
    for (size_t i = 0; i < n; ++i) {
      StoreOp op;
      op.policy = &policies[rng() % policies.size()];
      op.key = keys[rng() % keys.size()];
      op.cost = 1 + static_cast<int64_t>(rng() % 3);
      if (op.policy->counts_every_hit() && rng() % 3 == 0) op.cost = 0;  // check only
      op.kind = rng() % 4 == 0 ? StoreOp::Kind::kPeek : StoreOp::Kind::kAcquire;
      // All or nothing refuses a (policy, key) twice; independent ops may run in any order
      // (Redis pipelines them on several connections), so a repeat would have no one answer.
      bool repeated = false;
      for (const StoreOp& o : ops) repeated = repeated || (o.policy == op.policy && o.key == op.key);
      if (repeated) continue;
      ops.push_back(op);
    }
    auto got = store.decide_many(ops, atomicity);
    if (!got.ok() || got->size() != ops.size()) {
      failures.push_back("call " + std::to_string(call) + ": " +
                         (got.ok() ? "wrong count" : got.status().to_string()));
      continue;
    }
    std::vector<Decision> want;
    auto state_of = [&](const StoreOp& op) -> algo::AlgorithmState& {
      auto [it, fresh] = model.try_emplace({op.policy->name(), std::string(op.key)});
      if (fresh) it->second = algo::fresh_state(*op.policy);
      return it->second;
    };
    auto op_of = [](const StoreOp& op) {
      return op.kind == StoreOp::Kind::kAcquire ? algo::Op::kAcquire : algo::Op::kPeek;
    };
    if (atomicity == Atomicity::kAllOrNothing && ops.size() > 1) {
      std::vector<algo::LimitOp> items;
      for (const StoreOp& op : ops) items.push_back({op.policy, &state_of(op), op.cost, op_of(op)});
      // Whether all admitted is in `want` too (one decision per item); the mirror compares those.
      (void)algo::decide_all(items, now, want);
    } else {
      for (const StoreOp& op : ops) want.push_back(algo::decide(*op.policy, state_of(op), now, op.cost, op_of(op)));
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      if (same((*got)[i], want[i])) continue;
      failures.push_back("call " + std::to_string(call) + " op " + std::to_string(i) + " (" +
                         ops[i].policy->name() + ", " + std::string(ops[i].key) + ", cost " +
                         std::to_string(ops[i].cost) +
                         (atomicity == Atomicity::kAllOrNothing ? ", all or nothing" : "") +
                         "): store " + describe((*got)[i]) + " / core " + describe(want[i]));
    }
  }
  return failures;
}

}  // namespace ratelimit::vectors
