// distributed_regions.cc — RegionsModel (contract and the model's rules in distributed_regions.h).
// Invariants: a region's state changes only through algo::decide at a decision's time; a view
// changes only through algo::merge_region_count when a read's answer arrives; events hold ids
// (key, instance, region), never references, as the per-key vectors grow.
#include "distributed_regions.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include "ratelimit/algorithms.h"
#include "ratelimit/consistency.h"
#include "ratelimit/regions.h"
#include "recent_count.h"

namespace ratelimit::sim {
namespace {

// One instance's knowledge of one key: what it last read of each region.
struct View {
  int64_t last_used = -1;  // -1: not in use (never, or dropped): the next use reads at once
  std::vector<algo::RegionCount> seen;
  std::vector<bool> in_flight;
};

struct Key {
  std::vector<algo::AlgorithmState> own;  // per region: its store's state of this key
  std::vector<View> views;                // per instance
};

}  // namespace

struct RegionsModel::Impl {
  Policy policy;
  DistributedOptions o;
  Schedule schedule;
  int64_t regions = 1;
  std::vector<Key> keys;
  std::vector<std::vector<uint32_t>> used;  // per instance: keys in use
  std::unordered_map<int64_t, Policy> lowered;  // by limit
  std::vector<RecentCount> recent;              // per region: admissions within sync + cross rtt
  int64_t reads = 0, own_calls = 0;

  Impl(const Policy& p, const DistributedOptions& options, Schedule s)
      : policy(p), o(options), schedule(std::move(s)), regions(options.regions),
        used(static_cast<size_t>(options.instances)), recent(static_cast<size_t>(options.regions)) {}

  int64_t region_of(int64_t instance) const { return instance % regions; }
  int64_t keep() const { return std::max(policy.window().count(), 10 * o.sync_interval.count()); }

  Key& key(uint32_t id) {
    if (id >= keys.size()) keys.resize(id + 1);
    Key& k = keys[id];
    if (k.own.empty()) {
      k.own.resize(static_cast<size_t>(regions));
      k.views.resize(static_cast<size_t>(o.instances));
    }
    return k;
  }

  const Policy& with_limit(int64_t limit) {
    if (limit == policy.limit()) return policy;
    auto it = lowered.find(limit);
    if (it == lowered.end()) it = lowered.emplace(limit, policy.with_limit(limit).value()).first;
    return it->second;
  }

  // Instance `i` sends a read of key `id` to region `r` at `t`.
  void read(int64_t t, uint32_t id, int64_t i, int64_t r) {
    View& v = keys[id].views[static_cast<size_t>(i)];
    v.in_flight[static_cast<size_t>(r)] = true;
    ++reads;
    const int64_t half = o.cross_rtt.count() / 2;
    schedule(t + half, [this, t, id, i, r] {
      // At region r's store: its own count of the key now (a read, as the real add_hits of 0).
      algo::AlgorithmState state = keys[id].own[static_cast<size_t>(r)];
      const int64_t at = t + o.cross_rtt.count() / 2;
      const algo::RegionCount c = algo::region_count_of(algo::add_hits(policy, state, at, 0, 0));
      schedule(t + o.cross_rtt.count(), [this, id, i, r, c] {
        View& back = keys[id].views[static_cast<size_t>(i)];
        back.in_flight[static_cast<size_t>(r)] = false;
        if (back.last_used >= 0) algo::merge_region_count(policy, back.seen[static_cast<size_t>(r)], c);
      });
    });
  }

  void read_all(int64_t t, uint32_t id, int64_t i) {
    const View& v = keys[id].views[static_cast<size_t>(i)];
    for (int64_t r = 0; r < regions; ++r) {
      if (r != region_of(i) && !v.in_flight[static_cast<size_t>(r)]) read(t, id, i, r);
    }
  }

  void tick(int64_t i, int64_t t) {
    std::vector<uint32_t>& mine = used[static_cast<size_t>(i)];
    std::erase_if(mine, [&](uint32_t id) {
      View& v = keys[id].views[static_cast<size_t>(i)];
      const bool busy = std::find(v.in_flight.begin(), v.in_flight.end(), true) != v.in_flight.end();
      if (busy || t - v.last_used <= keep()) return false;
      v = View{};  // dropped, as the real exchange drops a key unused for keep()
      return true;
    });
    for (uint32_t id : mine) read_all(t, id, i);
    const int64_t next = t + o.sync_interval.count();
    schedule(next, [this, i, next] { tick(i, next); });
  }
};

RegionsModel::RegionsModel(const Policy& policy, const DistributedOptions& options, Schedule schedule)
    : impl_(std::make_unique<Impl>(policy, options, std::move(schedule))) {}
RegionsModel::RegionsModel(RegionsModel&&) noexcept = default;
RegionsModel& RegionsModel::operator=(RegionsModel&&) noexcept = default;
RegionsModel::~RegionsModel() = default;

void RegionsModel::start(int64_t t0) {
  Impl& m = *impl_;
  if (m.regions < 2) return;
  const int64_t sync = m.o.sync_interval.count();
  for (int64_t i = 0; i < m.o.instances; ++i) {
    const int64_t first = t0 - t0 % sync + sync + i * sync / m.o.instances;
    m.schedule(first, [&m, i, first] { m.tick(i, first); });
  }
}

RegionsModel::Outcome RegionsModel::decide(int64_t t, uint32_t id, int64_t cost, int64_t instance) {
  Impl& m = *impl_;
  const int64_t r = m.region_of(instance);
  Key& k = m.key(id);
  View& v = k.views[static_cast<size_t>(instance)];
  if (m.regions > 1 && v.last_used < 0) {
    // First use: blind to the others until the early read's answer arrives.
    v.seen.assign(static_cast<size_t>(m.regions), algo::RegionCount{});
    v.in_flight.resize(static_cast<size_t>(m.regions), false);
    m.used[static_cast<size_t>(instance)].push_back(id);
    v.last_used = t;
    m.read_all(t, id, instance);
  }
  v.last_used = t;
  std::vector<algo::RegionCount> others;
  for (int64_t s = 0; s < m.regions && m.regions > 1; ++s) {
    if (s != r) others.push_back(v.seen[static_cast<size_t>(s)]);
  }
  const Policy& p = m.policy;
  const algo::RegionSend send = algo::region_send(p, others, t, p.limit(), cost);
  ++m.own_calls;
  const Outcome out{.allowed = false, .latency_us = m.o.rtt.count()};
  algo::AlgorithmState& state = k.own[static_cast<size_t>(r)];
  if (send.denied_by_others) return out;  // a peek: nothing counted
  const bool allowed = algo::decide(m.with_limit(send.limit), state, t, cost, algo::Op::kAcquire).allowed;
  if (allowed) m.recent[static_cast<size_t>(r)].add(t, cost, m.o.sync_interval.count() + m.o.cross_rtt.count());
  return {allowed, m.o.rtt.count()};
}

int64_t RegionsModel::reads() const { return impl_->reads; }
int64_t RegionsModel::own_calls() const { return impl_->own_calls; }

int64_t RegionsModel::bound() const {
  const Impl& m = *impl_;
  if (m.regions < 2) return 0;
  int64_t peak = 0;
  for (const RecentCount& r : m.recent) peak = std::max(peak, r.peak);
  const double span_s = static_cast<double>(m.o.sync_interval.count() + m.o.cross_rtt.count()) / 1e6;
  return algo::latency_over_admission_bound(m.regions, static_cast<double>(peak) / span_s, m.o.sync_interval,
                                            m.o.cross_rtt, m.policy.limit());
}

}  // namespace ratelimit::sim
