// distributed_instances.cc — the lease and async instances of the distributed model: each is
// ratelimitd's per-key state (src/distributed/key_state.cc) with the shared store answering at
// once. When a slice ends, what demand it is sized for, how long a denial is answered locally and
// when a push leaves are the core functions the daemon calls (include/ratelimit/consistency.h:
// slice_life_us, slice_until_us, slice_demand, lease_recheck_us, next_push_us), so the model
// reserves, gives back and pushes at the daemon's instants.
#include "distributed_model.h"

namespace ratelimit::sim::model {

// lease: the daemon's KeyState::decide, reserve_call and on_reply with the store answering
// at once (the call's round trip delays the answer, not the count).
bool AlgoSim::lease(KeyState& k, uint32_t key, size_t idx, int64_t t, int64_t cost, int64_t rtt) {
  InstanceKey& ik = k.inst[idx];
  if (slice_live(ik, t) && ik.slice_units >= cost) {
    ik.slice_units -= cost;
    record(kLease, true, 0, 0);
    return true;
  }
  if (ik.lease_view_known) {  // a denial on the last view is answered here until its recheck
    const Decision d = lease_local(ik, t, cost);
    if (d.reason == DecisionReason::kExceedsCapacity || (!d.allowed && t < ik.recheck_at)) {
      record(kLease, false, 0, 0);
      return false;
    }
  }
  ik.demand = algo::slice_demand(ik.demand, ik.slice_granted, ik.slice_units, ik.slice_at, t);
  const int64_t want = algo::slice_size(lease_, ik.demand, algo::slice_life_us(lease_, t), cost);
  const algo::SharedView v = algo::reserve(lease_, k.store[kLease], t, ik.slice_window,
                                           ik.slice_window >= 0 ? ik.slice_units : 0, want);
  ik.lease_view = v;
  ik.lease_view.granted = 0;
  ik.lease_view_known = true;
  ik.slice_window = v.window_start_us;
  ik.slice_units = ik.slice_granted = v.granted;
  ik.slice_at = t;
  ik.slice_until = algo::slice_until_us(lease_, v.window_start_us, v.now_us);
  const uint64_t id = ++ik.slice_id;
  if (ik.slice_units > 0) schedule(ik.slice_until, [this, key, idx, id] { give_back(key, idx, id); });
  const bool ok = slice_live(ik, t) && ik.slice_units >= cost;
  if (ok) {
    ik.slice_units -= cost;
  } else if (const Decision d = lease_local(ik, t, cost); !d.allowed) {
    ik.recheck_at = t + algo::lease_recheck_us(lease_, d);
  }
  record(kLease, ok, rtt, 1);
  return ok;
}

bool AlgoSim::slice_live(const InstanceKey& ik, int64_t t) const {
  return ik.slice_units > 0 && ik.slice_window == t - t % w_ && t < ik.slice_until;
}

// The daemon's local_decision: the last view with this instance's unspent slice taken off.
Decision AlgoSim::lease_local(const InstanceKey& ik, int64_t t, int64_t cost) const {
  algo::LocalUnits slice{ik.slice_window, -ik.slice_units};
  return algo::decide_local(lease_, ik.lease_view, {&slice, ik.slice_units > 0 ? 1U : 0U}, t,
                            cost);
}

// The background thread at a slice's end (KeyState::tick): what is left goes back.
void AlgoSim::give_back(uint32_t key, size_t idx, uint64_t id) {
  InstanceKey& ik = keys_[key].inst[idx];
  if (ik.slice_id != id || ik.slice_units <= 0) return;
  const int64_t t = ik.slice_until;
  ik.demand = algo::slice_demand(ik.demand, ik.slice_granted, ik.slice_units, ik.slice_at, t);
  algo::reserve(lease_, keys_[key].store[kLease], t, ik.slice_window, ik.slice_units, 0);
  ik.slice_units = ik.slice_granted = 0;
  ++r_[kLease].store_calls;
}

// async: the daemon's KeyState::decide on its view plus the hits it holds; a key's first
// request, and one on a view older than the daemon's stale_after, wait for one read (here:
// the push happens now and the view it returns decides).
bool AlgoSim::async(KeyState& k, uint32_t key, size_t idx, int64_t t, int64_t ws, int64_t cost,
           int64_t rtt) {
  InstanceKey& ik = k.inst[idx];
  ik.used = true;
  ik.last_used = t;
  int64_t latency = 0, calls = 0;
  const int64_t stale = std::max(kStaleAfterUs, 3 * o_.sync_interval.count());
  if ((!ik.have_view || t - ik.view_at > stale) && ik.in_flight.empty()) {
    const bool first = !ik.tracked;
    ik.tracked = true;
    ik.view = push(k, ik, t);
    ik.in_flight.clear();  // the view just read holds them
    ik.have_view = true;
    ik.view_at = t;
    latency = rtt;
    calls = 1;
    if (first) schedule_push(key, idx);
  }
  std::vector<algo::LocalUnits> local = ik.pending;
  for (const Batch& b : ik.in_flight) local.push_back(b.units);
  const bool ok = algo::decide_local(async_, ik.view, local, t, cost).allowed;
  if (ok) {
    auto it = std::find_if(ik.pending.begin(), ik.pending.end(),
                           [&](const algo::LocalUnits& u) { return u.window_us == ws; });
    if (it == ik.pending.end()) ik.pending.push_back({ws, cost});
    else it->units += cost;
    ik.staleness.add(t, cost, o_.sync_interval.count() + max_rtt());
    peak_async_ = std::max(peak_async_, ik.staleness.peak);
  }
  record(kAsync, ok, latency, calls);
  return ok;
}

// One push (add_hits of what is pending; a read when nothing is): applied to the store now,
// its view returned. The next push time is the daemon's (algo::next_push_us).
algo::SharedView AlgoSim::push(KeyState& k, InstanceKey& ik, int64_t t) {
  algo::SharedView v{};
  const uint64_t batch = ++batch_;
  if (ik.pending.empty()) v = algo::add_hits(async_, k.store[kAsync], t, t - t % w_, 0);
  for (const algo::LocalUnits& u : ik.pending) {
    v = algo::add_hits(async_, k.store[kAsync], t, u.window_us, u.units);
    ik.in_flight.push_back({batch, u});
  }
  ik.pending.clear();
  ik.next_push = algo::next_push_us(async_, ik.next_push, t);
  ik.used = false;
  return v;
}

void AlgoSim::schedule_push(uint32_t key, size_t idx) {
  const int64_t at = keys_[key].inst[idx].next_push;
  schedule(at, [this, key, idx, at] { async_tick(key, idx, at, at); });
}

// The background thread at a key's planned push (KeyState::tick and idle): a push when hits
// are pending or the key was used since the last one, its view back a round trip later;
// otherwise only the grid moves on. A key unused for max(window, 10 × sync_interval) is
// dropped, as the daemon drops it (its next request reads again).
void AlgoSim::async_tick(uint32_t key, size_t idx, int64_t planned, int64_t t) {
  KeyState& k = keys_[key];
  InstanceKey& ik = k.inst[idx];
  if (!ik.tracked || ik.next_push != planned) return;
  if (!ik.in_flight.empty()) {  // a call in flight: the daemon looks again shortly
    schedule(t + kTickerFloorUs, [this, key, idx, planned, t] { async_tick(key, idx, planned, t + kTickerFloorUs); });
    return;
  }
  const int64_t keep = std::max(w_, 10 * o_.sync_interval.count());
  if (ik.pending.empty() && t - ik.last_used > keep) {
    ik.tracked = ik.have_view = false;
    return;
  }
  if (!ik.pending.empty() || ik.used) {
    const uint64_t batch = batch_ + 1;
    const algo::SharedView v = push(k, ik, t);
    ++r_[kAsync].store_calls;
    const int64_t at = t + rtt_of(static_cast<int64_t>(idx));
    schedule(at, [this, key, idx, batch, v, at] {
      InstanceKey& target = keys_[key].inst[idx];
      if (!target.have_view || v.now_us >= target.view.now_us) target.view = v;
      target.have_view = true;
      target.view_at = at;
      std::erase_if(target.in_flight, [&](const Batch& b) { return b.id == batch; });
    });
  } else {
    ik.next_push = algo::next_push_us(async_, ik.next_push, t);
  }
  schedule_push(key, idx);
}

}  // namespace ratelimit::sim::model
