// decision_service.cc — the one decision path of every front-end (see decision_service.h).
//
// Completion without a race or a hand-off on the inline path: `outstanding_` counts the store
// calls still to answer plus one held by decide() itself. Whoever brings it to zero finishes:
// decide() (the store answered inline, or before decide() was done issuing) returns true and
// the front-end renders at once; a store thread that brings it to zero finishes and calls
// resume(). The store callbacks capture only a pointer to the Pending, so std::function keeps
// them inline: a decision on the memory store allocates nothing here.
#include "decision_service.h"

namespace ratelimit::service {
namespace {

using SteadyClock = std::chrono::steady_clock;

}  // namespace

Outcome outcome_of(const Decision& d, bool shadow) {
  switch (d.reason) {
    case DecisionReason::kStoreFailedOpen: return Outcome::kFailedOpen;
    case DecisionReason::kStoreFailedClosed: return Outcome::kFailedClosed;
    case DecisionReason::kPolicyConflict: return Outcome::kConflict;
    default: break;
  }
  if (d.allowed) return Outcome::kAllowed;
  return shadow ? Outcome::kShadowDenied : Outcome::kDenied;
}

DecisionService::DecisionService(std::shared_ptr<Store> store, Observer* observer)
    : store_(std::move(store)), observer_(observer) {}

bool DecisionService::decide(const Snapshot& snapshot, std::span<const Item> items,
                             Atomicity atomicity, Pending& p) {
  const size_t n = items.size();
  p.service_ = this;
  p.status = Status();
  p.call_status_[0] = Status();
  p.call_status_[1] = Status();
  p.start_ = SteadyClock::now();
  p.decisions.resize(n);
  p.shadow_denied.assign(n, 0);
  p.slots_.resize(n);
  p.ops_.clear();
  p.items_.clear();
  if (Status s = validate_op_count(n, "decisions per request"); !s.is_ok()) {
    p.status = std::move(s);
    return true;
  }
  size_t enforced = 0;
  for (size_t i = 0; i < n; ++i) {
    const Item& it = items[i];
    const bool shadow = it.rule->shadow || snapshot.shadow_all;
    const bool lease_op = it.kind == StoreOp::Kind::kRelease || it.kind == StoreOp::Kind::kRenew;
    p.slots_[i] = {it.rule->counters, shadow, it.kind == StoreOp::Kind::kAcquire, lease_op,
                   it.kind == StoreOp::Kind::kRelease};
    enforced += shadow ? 0 : 1;
  }
  // The all-or-nothing group is the enforced items; with fewer than two of them, independent
  // decisions answer the same.
  const bool group = atomicity == Atomicity::kAllOrNothing && enforced >= 2;
  auto add = [&](size_t i) {
    const Item& it = items[i];
    p.ops_.push_back({it.policy != nullptr ? it.policy : &it.rule->policy, it.key, it.cost, it.kind, it.lease, it.report});
    p.items_.push_back(static_cast<uint32_t>(i));
  };
  if (group) {
    for (size_t i = 0; i < n; ++i) {
      if (!p.slots_[i].shadow) add(i);
    }
    p.split_ = p.ops_.size();
    for (size_t i = 0; i < n; ++i) {
      if (p.slots_[i].shadow) add(i);
    }
  } else {
    for (size_t i = 0; i < n; ++i) add(i);
    p.split_ = n;
  }
  const bool second = p.split_ < n;
  p.outstanding_.store(second ? 3 : 2, std::memory_order_relaxed);
  Pending* pp = &p;
  store_->decide_many_async(std::span<const StoreOp>(p.ops_.data(), p.split_),
                            group ? Atomicity::kAllOrNothing : Atomicity::kIndependent,
                            [pp](Result<std::span<const Decision>> r) {
                              pp->service_->on_store(*pp, 0, std::move(r));
                            });
  if (second) {
    store_->decide_many_async(std::span<const StoreOp>(p.ops_.data() + p.split_, n - p.split_),
                              Atomicity::kIndependent, [pp](Result<std::span<const Decision>> r) {
                                pp->service_->on_store(*pp, 1, std::move(r));
                              });
  }
  if (p.outstanding_.fetch_sub(1, std::memory_order_acq_rel) != 1) return false;
  finish(p);
  return true;
}

void DecisionService::on_store(Pending& p, int call, Result<std::span<const Decision>> result) {
  const size_t begin = call == 0 ? 0 : p.split_;
  const size_t end = call == 0 ? p.split_ : p.ops_.size();
  if (!result) {
    p.call_status_[call] = result.status();
  } else if (result->size() != end - begin) {
    p.call_status_[call] = Status::internal("the store answered " + std::to_string(result->size()) +
                                            " decisions for " + std::to_string(end - begin));
  } else {
    for (size_t k = begin; k < end; ++k) p.decisions[p.items_[k]] = (*result)[k - begin];
  }
  if (p.outstanding_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  finish(p);
  p.resume();
}

void DecisionService::finish(Pending& p) {
  if (observer_ != nullptr) observer_->observe_decision(SteadyClock::now() - p.start_);
  for (const Status& s : p.call_status_) {
    if (!s.is_ok() && p.status.is_ok()) p.status = s;
  }
  if (!p.status.is_ok()) {
    if (observer_ != nullptr && p.status.code() != StatusCode::kInvalidArgument) {
      observer_->count_store_error();
    }
    return;
  }
  if (release_listener_) {
    for (size_t k = 0; k < p.ops_.size(); ++k) {
      if (p.slots_[p.items_[k]].release && p.decisions[p.items_[k]].reason == DecisionReason::kWithinLimit) {
        release_listener_(*p.ops_[k].policy, p.ops_[k].key, p.ops_[k].lease);
      }
    }
  }
  for (size_t i = 0; i < p.slots_.size(); ++i) {
    const Pending::Slot& s = p.slots_[i];
    Decision& d = p.decisions[i];
    if (s.acquire && !p.defer_counting_) s.counters->count(outcome_of(d, s.shadow));
    if (s.shadow && !s.lease_op && !d.allowed) {
      p.shadow_denied[i] = 1;
      d.allowed = true;
      d.reason = DecisionReason::kWithinLimit;
      d.retry_after = Micros{0};
    }
  }
}

bool DecisionService::reset(const Rule& rule, std::string_view key, Pending& p) {
  p.service_ = this;
  p.status = Status();
  p.decisions.clear();
  p.shadow_denied.clear();
  p.outstanding_.store(2, std::memory_order_relaxed);
  Pending* pp = &p;
  store_->reset_async(rule.policy, key, [pp](Status s) {
    Observer* observer = pp->service_->observer_;
    if (!s.is_ok() && s.code() != StatusCode::kInvalidArgument && observer != nullptr) {
      observer->count_store_error();
    }
    pp->status = std::move(s);
    if (pp->outstanding_.fetch_sub(1, std::memory_order_acq_rel) == 1) pp->resume();
  });
  return p.outstanding_.fetch_sub(1, std::memory_order_acq_rel) == 1;
}

}  // namespace ratelimit::service
