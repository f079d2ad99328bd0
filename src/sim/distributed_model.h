// distributed_model.h — the distributed model's engine, internal to src/sim: per algorithm
// (AlgoSim) the four modes side by side on one request stream, driven by an event queue; the
// lease and async instances are distributed_instances.cc, the facade and options distributed.cc,
// the regions mode RegionsModel (distributed_regions.h) on the same queue.
// Not thread-safe (one run, one thread).
#pragma once

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <queue>
#include <vector>

#include "distributed.h"
#include "distributed_regions.h"
#include "recent_count.h"
#include "ratelimit/algorithms.h"
#include "ratelimit/consistency.h"

namespace ratelimit::sim::model {

enum Mode : size_t { kExact = 0, kLease = 1, kAsync = 2, kRegions = 3, kModes = 4 };
const char* const kModeNames[kModes] = {"exact", "lease", "async", "regions"};

struct Batch {
  uint64_t id = 0;
  algo::LocalUnits units;
};

// ratelimitd's defaults the model shares (DistributedStoreOptions::stale_after; the background
// thread's shortest wait while a call is in flight, distributed_store.cc run_ticker).
constexpr int64_t kStaleAfterUs = 1'000'000;
constexpr int64_t kTickerFloorUs = 500;

// One instance's knowledge of one key: the daemon's KeyState (src/distributed/key_state.cc)
// reduced to what decides. Its instants — a slice's life and end, the demand a slice is sized
// for, how long a denial is answered locally, when a push leaves — come from the same core
// functions (include/ratelimit/consistency.h) the daemon calls.
struct InstanceKey {
  // lease
  int64_t slice_window = -1, slice_units = 0, slice_until = 0;
  int64_t slice_granted = 0, slice_at = 0;
  uint64_t slice_id = 0;
  double demand = 0;  // units/s (algo::slice_demand)
  algo::SharedView lease_view{};
  bool lease_view_known = false;
  int64_t recheck_at = 0;
  // async
  algo::SharedView view{};
  bool have_view = false;
  int64_t view_at = 0;
  std::vector<algo::LocalUnits> pending;  // admitted, not yet pushed
  std::vector<Batch> in_flight;           // pushed, no view yet
  bool tracked = false;                   // held by the daemon: first request until idle
  bool used = false;                      // since the last push
  int64_t next_push = 0, last_used = 0;
  RecentCount staleness;  // admissions within sync + rtt (for the bound)
};

struct KeyState {
  std::array<algo::AlgorithmState, 3> store;  // exact, lease, async: the one shared store
  std::vector<InstanceKey> inst;
  int64_t window = -1;              // accounting: the window being counted
  std::array<int64_t, kModes> count{};
};

struct Event {
  int64_t t = 0;
  uint64_t seq = 0;
  std::function<void()> run;
  bool operator>(const Event& o) const { return t != o.t ? t > o.t : seq > o.seq; }
};

class AlgoSim {
 public:
  AlgoSim(Policy exact, Policy lease, Policy async, const DistributedOptions& o)
      : exact_(std::move(exact)), lease_(std::move(lease)), async_(std::move(async)), o_(o),
        regions_(exact_, o, [this](int64_t t, std::function<void()> f) { schedule(t, std::move(f)); }) {
    for (size_t m = 0; m < kModes; ++m) {
      r_[m].algorithm = algorithm_name(exact_.algorithm());
      r_[m].mode = kModeNames[m];
    }
    w_ = exact_.window().count();
  }

  void schedule(int64_t t, std::function<void()> f) { events_.push({t, ++seq_, std::move(f)}); }
  void advance(int64_t t) {
    while (!events_.empty() && events_.top().t <= t) {
      Event e = events_.top();
      events_.pop();
      e.run();
    }
  }

  void start(int64_t t0) { regions_.start(t0); }

  void add(int64_t t, uint32_t key_id, int64_t cost, int64_t instance) {
    advance(t);
    last_t_ = t;
    if (key_id >= keys_.size()) keys_.resize(key_id + 1);
    KeyState& k = keys_[key_id];
    if (k.inst.empty()) k.inst.resize(static_cast<size_t>(o_.instances));
    const int64_t ws = t - t % w_;
    if (k.window != ws) {
      close_window(k);
      k.window = ws;
    }
    const int64_t rtt = rtt_of(instance);
    std::array<bool, kModes> ok{};
    // exact: one call to the store per decision.
    ok[kExact] = algo::decide(exact_, k.store[kExact], t, cost, algo::Op::kAcquire).allowed;
    record(kExact, ok[kExact], rtt, 1);
    const auto idx = static_cast<size_t>(instance);
    ok[kLease] = lease(k, key_id, idx, t, cost, rtt);
    ok[kAsync] = async(k, key_id, idx, t, ws, cost, rtt);
    const RegionsModel::Outcome rd = regions_.decide(t, key_id, cost, instance);
    ok[kRegions] = rd.allowed;
    record(kRegions, rd.allowed, rd.latency_us, 1);
    for (size_t m = 0; m < kModes; ++m) {
      if (ok[m]) k.count[m] += cost;
      if (ok[m] && !ok[kExact]) ++r_[m].over;
      if (!ok[m] && ok[kExact]) ++r_[m].under;
      r_[m].exact_admitted += ok[kExact] ? 1 : 0;
    }
  }

  std::vector<DistributedResult> finish() {
    advance(last_t_);  // the ticks recur for ever: nothing after the last request decides
    for (KeyState& k : keys_) close_window(k);
    r_[kLease].bound = algo::lease_under_admission_bound(o_.instances, lease_);
    const auto per_s = [](int64_t units, int64_t span_us) {
      return static_cast<double>(units) * 1e6 / static_cast<double>(span_us);
    };
    r_[kAsync].bound = algo::async_over_admission_bound(
        o_.instances, per_s(peak_async_, o_.sync_interval.count() + max_rtt()), o_.sync_interval,
        Micros{max_rtt()}, exact_.limit());
    r_[kRegions].bound = regions_.bound();  // one region: 0, exact on its own store
    r_[kRegions].store_calls += regions_.reads();
    r_[kRegions].sync_messages = regions_.reads();
    std::vector<DistributedResult> out;
    for (size_t m = 0; m < kModes; ++m) {
      auto quantile = [&](double q) {
        const auto n = static_cast<double>(r_[m].decisions);
        int64_t seen = 0;
        for (const auto& [lat, count] : latencies_[m]) {
          seen += count;
          if (static_cast<double>(seen) >= q * n) return lat;
        }
        return int64_t{0};
      };
      r_[m].latency_p50_us = quantile(0.5);
      r_[m].latency_p99_us = quantile(0.99);
      r_[m].latency_max_us = latencies_[m].empty() ? 0 : latencies_[m].rbegin()->first;
      out.push_back(r_[m]);
    }
    return out;
  }

 private:
  int64_t rtt_of(int64_t instance) const {
    return instance % o_.regions == 0 ? o_.rtt.count() : o_.cross_rtt.count();
  }
  int64_t max_rtt() const { return o_.regions > 1 ? o_.cross_rtt.count() : o_.rtt.count(); }

  void record(size_t m, bool allowed, int64_t latency, int64_t calls) {
    ++r_[m].decisions;
    if (allowed) ++r_[m].admitted;
    r_[m].store_calls += calls;
    ++latencies_[m][latency];
  }

  void close_window(KeyState& k) {
    if (k.window < 0) return;
    for (size_t m = 0; m < kModes; ++m) {
      r_[m].worst_window_over = std::max(r_[m].worst_window_over, k.count[m] - exact_.limit());
      r_[m].worst_window_under = std::max(r_[m].worst_window_under, k.count[kExact] - k.count[m]);
    }
    k.count = {};
  }

  // The lease and async instances (distributed_instances.cc): the daemon's KeyState with the
  // store answering at once.
  bool lease(KeyState& k, uint32_t key, size_t idx, int64_t t, int64_t cost, int64_t rtt);
  bool slice_live(const InstanceKey& ik, int64_t t) const;
  Decision lease_local(const InstanceKey& ik, int64_t t, int64_t cost) const;
  void give_back(uint32_t key, size_t idx, uint64_t id);
  bool async(KeyState& k, uint32_t key, size_t idx, int64_t t, int64_t ws, int64_t cost,
             int64_t rtt);
  algo::SharedView push(KeyState& k, InstanceKey& ik, int64_t t);
  void schedule_push(uint32_t key, size_t idx);
  void async_tick(uint32_t key, size_t idx, int64_t planned, int64_t t);

  Policy exact_, lease_, async_;
  const DistributedOptions& o_;
  RegionsModel regions_;
  int64_t w_ = 1;
  std::array<DistributedResult, kModes> r_;
  std::array<std::map<int64_t, int64_t>, kModes> latencies_;
  std::vector<KeyState> keys_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t seq_ = 0, batch_ = 0;
  int64_t peak_async_ = 0;
  int64_t last_t_ = 0;
};

}  // namespace ratelimit::sim::model
