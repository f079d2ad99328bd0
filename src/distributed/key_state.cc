// key_state.cc — the per-key policy of the lease and async modes (see key_state.h for the
// invariants and include/ratelimit/consistency.h for the math and bounds).
#include "key_state.h"

#include <algorithm>

namespace ratelimit::distributed_detail {
namespace {

void add_units(std::vector<std::pair<int64_t, int64_t>>& v, int64_t window, int64_t units) {
  for (auto& [w, n] : v) {
    if (w == window) {
      n += units;
      return;
    }
  }
  v.emplace_back(window, units);
}

void remove_units(std::vector<std::pair<int64_t, int64_t>>& v, int64_t window, int64_t units) {
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it->first == window) {
      it->second -= units;
      if (it->second <= 0) v.erase(it);
      return;
    }
  }
}

uint64_t get(const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); }

}  // namespace

DistributedCounters Counters::snapshot() const {
  DistributedCounters c;
  c.local_decisions = get(local_decisions);
  c.exact_passthrough = get(exact_passthrough);
  c.failed_open = get(failed_open);
  c.failed_closed = get(failed_closed);
  c.lease_reserves = get(lease_reserves);
  c.lease_reserve_failures = get(lease_reserve_failures);
  c.lease_units_granted = get(lease_units_granted);
  c.lease_units_returned = get(lease_units_returned);
  c.lease_units_held = get(units_held);
  c.async_pushes = get(async_pushes);
  c.async_push_failures = get(async_push_failures);
  c.async_units_pushed = get(async_units_pushed);
  c.async_units_pending = get(units_pending);
  c.async_units_over_limit = get(async_units_over_limit);
  c.async_view_age_us = get(view_age_us);
  c.keys = get(keys);
  return c;
}

KeyState::KeyState(const Policy& policy, std::string_view key, std::string map_key,
                   uint64_t generation)
    : policy_(policy), key_(key), map_key_(std::move(map_key)), generation_(generation) {}

int64_t KeyState::window_of(int64_t server_now) const {
  const int64_t t = std::max<int64_t>(0, server_now);
  return t - t % policy_.window().count();
}

bool KeyState::slice_live(int64_t server_now) const {
  return slice_left_ > 0 && slice_ws_ == window_of(server_now) && server_now < slice_until_;
}

Decision KeyState::local_decision(int64_t server_now, int64_t cost) const {
  algo::LocalUnits local[4];
  size_t n = 0;
  if (lease()) {
    if (slice_left_ > 0) local[n++] = {slice_ws_, -slice_left_};
  } else {
    for (const auto& [w, units] : pending_) {
      if (n < 4) local[n++] = {w, units};
    }
    for (const auto& [w, units] : pushing_) {
      if (n < 4) local[n++] = {w, units};
    }
  }
  return algo::decide_local(policy_, view_, std::span<const algo::LocalUnits>(local, n), server_now,
                            cost);
}

Decision KeyState::failure(const DistributedStoreOptions& options, Counters& counters) const {
  auto& counter = options.on_failure == FailurePolicy::kOpen ? counters.failed_open
                                                             : counters.failed_closed;
  counter.fetch_add(1, std::memory_order_relaxed);
  return failure_decision(options.on_failure, policy_.limit());
}

bool KeyState::view_fresh(int64_t local, const DistributedStoreOptions& options) const {
  const int64_t stale = std::max(options.stale_after.count(),
                                 3 * policy_.consistency().sync_interval.count());
  return have_view_ && local - view_local_ <= stale;
}

void KeyState::admit_hits(int64_t server_now, int64_t cost) {
  add_units(pending_, window_of(server_now), cost);
}

bool KeyState::decide(int64_t cost, bool peek, int64_t local, int64_t offset,
                      const DistributedStoreOptions& options, Counters& counters, Decision* out,
                      std::function<void(Decision)> later, std::vector<Send>& sends) {
  last_used_ = local;
  const int64_t sn = local + offset;
  if (lease()) {
    if (have_view_ && slice_live(sn) && slice_left_ >= cost) {
      *out = local_decision(sn, cost);
      out->allowed = true;
      out->reason = DecisionReason::kWithinLimit;
      out->retry_after = Micros{0};
      if (!peek) slice_left_ -= cost;
      counters.local_decisions.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    if (have_view_) {
      const Decision d = local_decision(sn, cost);
      if (peek || d.reason == DecisionReason::kExceedsCapacity ||
          (!d.allowed && local < recheck_at_)) {
        *out = d;
        counters.local_decisions.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
    }
  } else {
    used_since_sync_ = true;
    if (view_fresh(local, options)) {
      *out = local_decision(sn, cost);
      if (out->allowed && !peek) admit_hits(sn, cost);
      counters.local_decisions.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  if (local < down_until_) {
    *out = failure(options, counters);
    if (!lease() && out->allowed && !peek) admit_hits(sn, cost);
    return true;
  }
  waiters_.push_back({cost, peek, std::move(later)});
  if (in_flight_ == 0) {
    if (lease()) {
      sends.push_back(reserve_call(local, sn, counters));
    } else {
      push_calls(local, counters, sends);
    }
  }
  return false;
}

Send KeyState::reserve_call(int64_t local, int64_t server_now, Counters& counters) {
  int64_t wanted = 0;
  for (const Waiter& w : waiters_) {
    if (!w.peek) wanted += w.cost;
  }
  wanted = std::min<int64_t>(wanted, kMaxCost);
  demand_ = algo::slice_demand(demand_, slice_granted_, slice_left_, slice_at_, local);
  const int64_t life = algo::slice_life_us(policy_, server_now);
  Send s(Send::Kind::kReserve, policy_);
  s.user_key = key_;
  s.map_key = map_key_;
  s.generation = generation_;
  s.window_us = slice_ws_;
  s.give_back = slice_left_;
  s.want = wanted > 0 ? algo::slice_size(policy_, demand_, life, wanted) : 0;
  slice_left_ = 0;  // leaves this instance now, whatever becomes of the call
  slice_granted_ = 0;
  ++in_flight_;
  counters.lease_reserves.fetch_add(1, std::memory_order_relaxed);
  return s;
}

void KeyState::push_calls(int64_t local, Counters& counters, std::vector<Send>& sends) {
  Send s(Send::Kind::kAddHits, policy_);
  s.user_key = key_;
  s.map_key = map_key_;
  s.generation = generation_;
  if (pending_.empty()) {
    sends.push_back(s);  // a read: hits 0
    ++in_flight_;
  }
  for (const auto& [w, units] : pending_) {
    s.window_us = w;
    s.hits = units;
    sends.push_back(s);
    add_units(pushing_, w, units);
    ++in_flight_;
  }
  counters.async_pushes.fetch_add(pending_.empty() ? 1 : pending_.size(), std::memory_order_relaxed);
  pending_.clear();
  next_sync_ = algo::next_push_us(policy_, next_sync_, local);
  used_since_sync_ = false;
}

void KeyState::accept_view(const algo::SharedView& v, int64_t local) {
  if (!have_view_ || v.now_us >= view_.now_us) view_ = v;
  view_.granted = 0;
  view_.dropped = 0;
  have_view_ = true;
  view_local_ = local;
}

void KeyState::on_reply(const Send& sent, const Result<algo::SharedView>& view, int64_t local,
                        int64_t offset, const DistributedStoreOptions& options,
                        Counters& counters, std::vector<Answer>& answers, std::vector<Send>& more) {
  --in_flight_;
  if (sent.kind == Send::Kind::kAddHits) {
    if (view.ok()) {
      remove_units(pushing_, sent.window_us, sent.hits);
      counters.async_units_pushed.fetch_add(sent.hits, std::memory_order_relaxed);
      counters.async_units_over_limit.fetch_add(view->dropped, std::memory_order_relaxed);
      accept_view(*view, local);
    } else {
      counters.async_push_failures.fetch_add(1, std::memory_order_relaxed);
      if (sent.hits > 0) {
        remove_units(pushing_, sent.window_us, sent.hits);
        add_units(pending_, sent.window_us, sent.hits);
      }
      down_until_ = local + policy_.consistency().sync_interval.count();
    }
    if (in_flight_ == 0) serve_async_waiters(local, offset, options, counters, answers);
    return;
  }
  if (!view.ok()) {
    counters.lease_reserve_failures.fetch_add(1, std::memory_order_relaxed);
    down_until_ = local + policy_.consistency().sync_interval.count();
    for (Waiter& w : waiters_) answers.push_back({std::move(w.done), failure(options, counters)});
    waiters_.clear();
    return;
  }
  counters.lease_units_granted.fetch_add(view->granted, std::memory_order_relaxed);
  counters.lease_units_returned.fetch_add(sent.give_back, std::memory_order_relaxed);
  accept_view(*view, local);
  slice_ws_ = view->window_start_us;
  slice_left_ = view->granted;
  slice_granted_ = view->granted;
  slice_at_ = local;
  slice_until_ = algo::slice_until_us(policy_, view->window_start_us, view->now_us);
  serve_lease_waiters(sent, *view, local, offset, options, answers, more, counters);
}

void KeyState::serve_lease_waiters(const Send& sent, const algo::SharedView& v, int64_t local,
                                   int64_t offset, const DistributedStoreOptions& /*options*/,
                                   std::vector<Answer>& answers, std::vector<Send>& more,
                                   Counters& counters) {
  const int64_t sn = std::max(local + offset, v.now_us);
  std::vector<Waiter> still;
  for (Waiter& w : waiters_) {
    Decision d = local_decision(sn, w.cost);
    if (!w.peek && slice_live(sn) && slice_left_ >= w.cost) {
      d.allowed = true;
      d.reason = DecisionReason::kWithinLimit;
      d.retry_after = Micros{0};
      slice_left_ -= w.cost;
    } else if (d.allowed && !w.peek && v.granted >= sent.want) {
      still.push_back(std::move(w));  // the store has more than this slice: ask again
      continue;
    } else if (!d.allowed) {
      recheck_at_ = local + algo::lease_recheck_us(policy_, d);
      if (d.reason != DecisionReason::kExceedsCapacity && d.reason != DecisionReason::kOverLimit) {
        d.reason = DecisionReason::kOverLimit;
      }
    }
    answers.push_back({std::move(w.done), d});
  }
  waiters_ = std::move(still);
  if (!waiters_.empty()) more.push_back(reserve_call(local, sn, counters));
}

void KeyState::serve_async_waiters(int64_t local, int64_t offset,
                                   const DistributedStoreOptions& options, Counters& counters,
                                   std::vector<Answer>& answers) {
  const int64_t sn = local + offset;
  for (Waiter& w : waiters_) {
    Decision d;
    if (view_fresh(local, options)) {
      d = local_decision(sn, w.cost);
    } else {
      d = failure(options, counters);
    }
    if (d.allowed && !w.peek) admit_hits(sn, w.cost);
    answers.push_back({std::move(w.done), d});
  }
  waiters_.clear();
}

void KeyState::count_orphan_reply(const Send& sent, const algo::SharedView& view,
                                  Counters& counters) {
  if (sent.kind == Send::Kind::kReserve) {
    counters.lease_units_returned.fetch_add(sent.give_back, std::memory_order_relaxed);
    counters.lease_units_granted.fetch_add(view.granted, std::memory_order_relaxed);
  } else {
    counters.async_units_pushed.fetch_add(sent.hits, std::memory_order_relaxed);
    counters.async_units_over_limit.fetch_add(view.dropped, std::memory_order_relaxed);
  }
}

void KeyState::tick(int64_t local, int64_t offset, const DistributedStoreOptions& /*options*/,
                    Counters& counters, std::vector<Send>& sends) {
  if (in_flight_ > 0) return;
  if (lease()) {
    if (slice_left_ > 0 && !slice_live(local + offset)) {
      sends.push_back(reserve_call(local, local + offset, counters));
    }
    return;
  }
  if (local < next_sync_) return;
  if (!pending_.empty() || used_since_sync_) {
    push_calls(local, counters, sends);
  } else {
    next_sync_ = algo::next_push_us(policy_, next_sync_, local);
  }
}

void KeyState::flush(int64_t local, int64_t offset, Counters& counters, std::vector<Send>& sends) {
  if (lease()) {
    if (slice_left_ > 0 && in_flight_ == 0) {
      // A give-back alone: no waiter, so the call wants nothing.
      sends.push_back(reserve_call(local, local + offset, counters));
    }
    return;
  }
  if (!pending_.empty()) push_calls(local, counters, sends);
}

void KeyState::forget() {
  slice_left_ = 0;
  slice_granted_ = 0;
  pending_.clear();
  have_view_ = false;
  recheck_at_ = 0;
}

int64_t KeyState::due_at(int64_t offset) const {
  const int64_t keep = std::max(policy_.window().count(),
                                10 * policy_.consistency().sync_interval.count());
  int64_t due = last_used_ + keep + 1;
  if (lease()) {
    if (slice_left_ > 0) due = std::min(due, slice_until_ - offset);
  } else {
    due = std::min(due, next_sync_);
  }
  return due;
}

bool KeyState::idle(int64_t local) const {
  if (busy() || slice_left_ > 0 || !pending_.empty() || !pushing_.empty()) return false;
  const int64_t keep = std::max(policy_.window().count(),
                                10 * policy_.consistency().sync_interval.count());
  return local - last_used_ > keep;
}

uint64_t KeyState::view_age_us(int64_t local) const {
  if (!have_view_) return 0;
  return static_cast<uint64_t>(std::max<int64_t>(0, local - view_local_));
}

uint64_t KeyState::units_held() const {
  return lease() ? static_cast<uint64_t>(std::max<int64_t>(0, slice_left_)) : 0;
}

uint64_t KeyState::units_pending() const {
  uint64_t n = 0;
  for (const auto& [w, units] : pending_) n += static_cast<uint64_t>(units);
  for (const auto& [w, units] : pushing_) n += static_cast<uint64_t>(units);
  return n;
}

}  // namespace ratelimit::distributed_detail
