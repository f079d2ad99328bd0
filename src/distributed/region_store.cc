// region_store.cc — RegionStore's decisions: each op of a global policy is sent to the own
// store with its limit lowered to algo::effective_limit (what the other regions' last known
// counts weigh taken off, capped at the region's share during a partition), so the own count is
// decided by the store's own atomic call; the answer is then given the policy's real limit, or
// replaced by algo::region_denial when the others alone left no room for the cost. Contract in
// include/ratelimit/region_store.h; the exchange that fills the views is region_exchange.cc.
// Invariants: the lowered policies outlive the inner call's return (StoreOp keeps pointers
// only until then); a failure-policy answer of the own store is passed on untouched.
#include <algorithm>

#include "map_key.h"
#include "mutex.h"
#include "region_core.h"

namespace ratelimit {

int RegionStore::Core::peer_index(const std::string& name) const {
  for (size_t i = 0; i < peers.size(); ++i) {
    if (peers[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

bool RegionStore::Core::partitioned_locked(int64_t local) const {
  const int64_t stale = 3 * options.sync_interval.count();
  for (const Peer& p : peers) {
    if (!p.reachable || p.last_ok_local < 0 || local - p.last_ok_local > stale) return true;
  }
  return false;
}

Result<std::shared_ptr<RegionStore>> RegionStore::wrap(std::shared_ptr<Store> own,
                                                       std::vector<RegionPeer> peers,
                                                       RegionStoreOptions options) {
  if (!own) return Status::invalid_argument("RegionStore needs its own region's store");
  if (peers.empty()) return Status::invalid_argument("RegionStore needs at least one other region");
  if (options.sync_interval < kMinSyncInterval || options.sync_interval > kMaxSyncInterval) {
    return Status::invalid_argument("regions.sync_interval must be between 1ms and 1m");
  }
  if (options.share < 0 || options.share > 1) {
    return Status::invalid_argument("a region's share must be in (0, 1]");
  }
  if (options.max_keys < 1 || options.max_keys > 100'000'000) {
    return Status::invalid_argument("max_keys must be between 1 and 100000000");
  }
  auto core = std::make_shared<Core>();
  for (RegionPeer& p : peers) {
    if (!p.counts) return Status::invalid_argument("region '" + p.name + "' has no store");
    if (p.name.empty() || p.name == options.region || core->peer_index(p.name) >= 0) {
      return Status::invalid_argument("region '" + p.name + "' is named twice (or is this region)");
    }
    Core::Peer peer;
    peer.name = std::move(p.name);
    peer.counts = std::move(p.counts);
    core->peers.push_back(std::move(peer));
  }
  core->options = std::move(options);
  core->clock = core->options.clock != nullptr ? core->options.clock : &SystemClock::instance();
  if (core->options.age_clock != nullptr) core->age_clock = core->options.age_clock;
  core->own = own;
  core->share = core->options.share > 0 ? core->options.share
                                        : 1.0 / static_cast<double>(core->peers.size() + 1);
  if (core->options.run_exchange) core->exchange.start([c = core.get()] { c->run(); });
  return std::shared_ptr<RegionStore>(new RegionStore(std::move(own), std::move(core)));
}

RegionStore::RegionStore(std::shared_ptr<Store> own, std::shared_ptr<Core> core)
    : StoreDecorator(std::move(own)), core_(std::move(core)) {}

RegionStore::~RegionStore() {
  core_->exchange.stop();
  // Reads still in flight hold the core (their completions capture it), and the core holds the
  // other regions' stores: left alone, both would outlive this object until those reads answer
  // (a partitioned region: the whole command timeout) and then be destroyed on a store's I/O
  // thread, after reporting reachability to an owner that has gone. So nothing is reported from
  // here on, and the other regions' stores are closed now, on this thread: their pending reads
  // complete (failure policy) inside their destructors. In ratelimitd the core is their only
  // owner; a caller that shares one keeps it open, and its completions then see `closing`.
  core_->closing.store(true);
  std::vector<std::shared_ptr<SharedCounts>> peers;
  {
    MutexLock lock(core_->mu);
    for (Core::Peer& p : core_->peers) peers.push_back(std::move(p.counts));
  }
  peers.clear();
}

Store& RegionStore::own() const { return inner(); }

void RegionStore::decide_many_async(std::span<const StoreOp> ops, Atomicity atomicity,
                                    OpsCallback done) {
  if (Status s = validate_decide_many(ops, atomicity); !s.is_ok()) return done(s);
  const bool any = std::any_of(ops.begin(), ops.end(), [](const StoreOp& op) {
    return op.policy->consistency().across_regions;
  });
  if (!any) return inner().decide_many_async(ops, atomicity, std::move(done));

  // Per op: the policy sent (lowered), and for a global op its real limit and, when the others
  // leave no room, the denial that replaces the store's answer.
  struct Global {
    bool global = false;
    int64_t limit = 0;
    bool denied_by_others = false;
    Decision denial;
  };
  std::vector<Policy> lowered;
  lowered.reserve(ops.size());
  std::vector<StoreOp> sent(ops.begin(), ops.end());
  auto info = std::make_shared<std::vector<Global>>(ops.size());
  Core& c = *core_;
  const int64_t now = c.clock->now().count();
  const int64_t local = c.local_us();
  bool added = false;
  {
    MutexLock lock(c.mu);
    const bool capped = c.options.partition_share && c.partitioned_locked(local);
    for (size_t i = 0; i < ops.size(); ++i) {
      const Policy& policy = *ops[i].policy;
      if (!policy.consistency().across_regions) continue;
      (*info)[i].global = true;
      (*info)[i].limit = policy.limit();
      c.decisions.fetch_add(1, std::memory_order_relaxed);
      std::span<const algo::RegionCount> others;
      std::string mk = distributed_detail::map_key(policy, ops[i].key);
      auto it = c.keys.find(mk);
      if (it == c.keys.end() || it->second.policy != policy) {
        if (it == c.keys.end() && c.keys.size() >= c.options.max_keys) {
          c.untracked.fetch_add(1, std::memory_order_relaxed);
        } else {
          Core::Key k{policy, std::string(ops[i].key), local,
                      std::vector<algo::RegionCount>(c.peers.size()),
                      std::vector<bool>(c.peers.size(), false)};
          it = c.keys.insert_or_assign(std::move(mk), std::move(k)).first;
          added = true;
        }
      }
      if (it != c.keys.end()) {
        it->second.last_used_local = local;
        others = it->second.seen;
      }
      int64_t cap = policy.limit();
      if (capped) {
        cap = algo::partition_cap(policy, c.share);
        c.capped.fetch_add(1, std::memory_order_relaxed);
      }
      // A report is never refused: it is recorded in this region's count (which the others
      // read) under the same lowered limit, so its answer says what is left across regions.
      const bool report = ops[i].kind == StoreOp::Kind::kReport;
      const algo::RegionSend send = algo::region_send(policy, others, now, cap, report ? 0 : ops[i].cost);
      if (send.denied_by_others && !report) {
        // Sent as a peek (below), so nothing is counted for it; its answer is replaced above.
        (*info)[i].denied_by_others = true;
        (*info)[i].denial = algo::region_denial(policy, others, now, ops[i].cost);
      }
      if (send.limit == policy.limit()) continue;  // decided on the policy itself
      auto with = policy.with_limit(send.limit);
      if (!with) continue;  // cannot happen for 1 <= limit <= L; decided on the real limit
      lowered.push_back(*std::move(with));
      sent[i].policy = &lowered.back();
    }
  }
  // A request the others' counts deny must count nothing in this region: its own count is what
  // the other regions read. So such an op is sent as a peek (the lowered limit, clamped to at
  // least 1, could otherwise admit and count a cost-1 request while the answer says denied), and
  // in an all-or-nothing group every op is (one denial denies the group).
  bool any_denied = false;
  for (size_t i = 0; i < ops.size(); ++i) {
    if ((*info)[i].denied_by_others && sent[i].kind == StoreOp::Kind::kAcquire) {
      sent[i].kind = StoreOp::Kind::kPeek;
      any_denied = true;
    }
  }
  if (any_denied && atomicity == Atomicity::kAllOrNothing) {
    for (StoreOp& op : sent) {
      if (op.kind == StoreOp::Kind::kAcquire) op.kind = StoreOp::Kind::kPeek;
    }
  }
  if (added) {
    {
      MutexLock lock(c.exchange.mu);
      c.new_key = true;
    }
    c.exchange.wake.notify_one();
  }
  auto core = core_;
  inner().decide_many_async(sent, atomicity, [info, core, done = std::move(done)](
                                               Result<std::span<const Decision>> r) {
    if (!r.ok()) return done(r.status());
    std::vector<Decision> out(r->begin(), r->end());
    for (size_t i = 0; i < out.size() && i < info->size(); ++i) {
      const Global& g = (*info)[i];
      if (!g.global) continue;
      Decision& d = out[i];
      if (d.reason == DecisionReason::kStoreFailedOpen ||
          d.reason == DecisionReason::kStoreFailedClosed) {
        continue;
      }
      if (g.denied_by_others) {
        d = g.denial;
        core->denied_by_others.fetch_add(1, std::memory_order_relaxed);
      }
      d.limit = g.limit;
      // An own count above the lowered limit (the others grew since it was admitted) leaves 0.
      d.remaining = std::max<int64_t>(0, d.remaining);
    }
    done(std::span<const Decision>(out));
  });
}

Status RegionStore::seen(const Policy& policy, std::string_view key, const std::string& region,
                         const algo::RegionCount& count) {
  if (!policy.consistency().across_regions) {
    return Status::invalid_argument("policy '" + policy.name() + "' is not counted across regions");
  }
  MutexLock lock(core_->mu);
  const int i = core_->peer_index(region);
  if (i < 0) return Status::invalid_argument("unknown region '" + region + "'");
  std::string mk = distributed_detail::map_key(policy, key);
  auto it = core_->keys.find(mk);
  if (it == core_->keys.end() || it->second.policy != policy) {
    Core::Key k{policy, std::string(key), core_->local_us(),
                std::vector<algo::RegionCount>(core_->peers.size()),
                std::vector<bool>(core_->peers.size(), false)};
    it = core_->keys.insert_or_assign(std::move(mk), std::move(k)).first;
  }
  algo::merge_region_count(policy, it->second.seen[static_cast<size_t>(i)], count);
  return {};
}

void RegionStore::set_reachable(const std::string& region, bool reachable) {
  MutexLock lock(core_->mu);
  const int i = core_->peer_index(region);
  if (i < 0) return;
  Core::Peer& p = core_->peers[static_cast<size_t>(i)];
  p.reachable = reachable;
  if (reachable) {
    p.ever_reached = true;
    p.last_ok_local = core_->local_us();
  }
}

std::vector<RegionStatus> RegionStore::regions() const {
  std::vector<RegionStatus> out;
  const int64_t local = core_->local_us();
  MutexLock lock(core_->mu);
  const int64_t stale = 3 * core_->options.sync_interval.count();
  for (const Core::Peer& p : core_->peers) {
    RegionStatus s;
    s.name = p.name;
    s.ever_reached = p.ever_reached;
    s.view_age_us = p.last_ok_local < 0 ? -1 : local - p.last_ok_local;
    s.reachable = p.reachable && s.view_age_us >= 0 && s.view_age_us <= stale;
    s.reads = p.reads;
    s.read_failures = p.failures;
    out.push_back(std::move(s));
  }
  return out;
}

RegionCounters RegionStore::counters() const {
  RegionCounters c;
  c.decisions = core_->decisions.load(std::memory_order_relaxed);
  c.capped = core_->capped.load(std::memory_order_relaxed);
  c.denied_by_others = core_->denied_by_others.load(std::memory_order_relaxed);
  c.untracked = core_->untracked.load(std::memory_order_relaxed);
  MutexLock lock(core_->mu);
  c.keys = core_->keys.size();
  return c;
}

}  // namespace ratelimit
