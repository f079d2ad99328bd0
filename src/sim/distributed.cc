// distributed.cc — the distributed model (see distributed.h): per algorithm, the four modes
// side by side on one request stream, driven by an event queue of sync ticks and views coming
// back; the regions mode is RegionsModel's (distributed_regions.h), on the same queue.
#include "distributed.h"

#include <algorithm>
#include <functional>
#include <map>
#include <queue>
#include <unordered_map>

#include "distributed_regions.h"
#include "recent_count.h"
#include "ratelimit/algorithms.h"
#include "ratelimit/consistency.h"

namespace ratelimit::sim {
namespace {

enum Mode : size_t { kExact = 0, kLease = 1, kAsync = 2, kRegions = 3, kModes = 4 };
const char* const kModeNames[kModes] = {"exact", "lease", "async", "regions"};

struct Batch {
  uint64_t id = 0;
  algo::LocalUnits units;
};

// One instance's knowledge of one key.
struct InstanceKey {
  int64_t slice_window = -1, slice_units = 0, slice_expires = 0;  // lease
  RecentCount demand;                                               // lease: the last second
  algo::SharedView view{};                                          // async
  std::vector<algo::LocalUnits> pending;                            // async: not yet pushed
  std::vector<Batch> in_flight;                                     // async: pushed, no view yet
  RecentCount staleness;  // async: admissions within sync + rtt (for the bound)
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

  void start(int64_t t0) {
    // An instance pushes twice per sync_interval, as ratelimitd does (docs/distributed.md).
    const int64_t sync = std::max<int64_t>(1, o_.sync_interval.count() / 2);
    for (int64_t i = 0; i < o_.instances; ++i) {
      const int64_t first = t0 - t0 % sync + sync + i * sync / o_.instances;
      schedule(first, [this, i, first] { instance_tick(i, first); });
    }
    regions_.start(t0);
  }

  void add(int64_t t, uint32_t key_id, int64_t cost, int64_t instance) {
    advance(t);
    last_t_ = t;
    if (key_id >= keys_.size()) keys_.resize(key_id + 1);
    KeyState& k = keys_[key_id];
    if (k.inst.empty()) {
      k.inst.resize(static_cast<size_t>(o_.instances));
      active_.push_back(key_id);
    }
    last_seen_[key_id] = t;
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
    ok[kLease] = lease(k, k.inst[static_cast<size_t>(instance)], t, ws, cost, rtt);
    ok[kAsync] = async(k.inst[static_cast<size_t>(instance)], t, ws, cost);
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

  bool lease(KeyState& k, InstanceKey& ik, int64_t t, int64_t ws, int64_t cost, int64_t rtt) {
    ik.demand.drop(t, 1'000'000);
    if (ik.slice_window == ws && t < ik.slice_expires && ik.slice_units >= cost) {
      ik.slice_units -= cost;
      ik.demand.add(t, cost, 1'000'000);
      record(kLease, true, 0, 0);
      return true;
    }
    const int64_t life = std::min(o_.slice_ttl.count(), ws + w_ - t);
    const int64_t want = algo::slice_size(lease_, static_cast<double>(ik.demand.sum), life, cost);
    const algo::SharedView v = algo::reserve(lease_, k.store[kLease], t, ik.slice_window,
                                             ik.slice_window >= 0 ? ik.slice_units : 0, want);
    ik.slice_window = v.window_start_us;
    ik.slice_units = v.granted;
    ik.slice_expires = t + o_.slice_ttl.count();
    const bool ok = ik.slice_units >= cost;
    if (ok) {
      ik.slice_units -= cost;
      ik.demand.add(t, cost, 1'000'000);
    }
    record(kLease, ok, rtt, 1);
    return ok;
  }

  bool async(InstanceKey& ik, int64_t t, int64_t ws, int64_t cost) {
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
    record(kAsync, ok, 0, 0);
    return ok;
  }

  bool recently_active(uint32_t key, int64_t now) const {
    auto it = last_seen_.find(key);
    return it != last_seen_.end() && it->second > now - 2 * w_ - o_.slice_ttl.count();
  }

  void instance_tick(int64_t i, int64_t t) {
    const auto idx = static_cast<size_t>(i);
    const int64_t rtt = rtt_of(i);
    std::erase_if(active_, [&](uint32_t key) { return !recently_active(key, t); });
    for (uint32_t key : active_) {
      KeyState& k = keys_[key];
      InstanceKey& ik = k.inst[idx];
      // lease: give back a slice past its life.
      if (ik.slice_window >= 0 && ik.slice_units > 0 && ik.slice_expires <= t) {
        algo::reserve(lease_, k.store[kLease], t, ik.slice_window, ik.slice_units, 0);
        ik.slice_units = 0;
        ++r_[kLease].store_calls;
      }
      // async: push what is pending (or read), the view comes back a round trip later.
      algo::SharedView v{};
      const uint64_t batch = ++batch_;
      if (ik.pending.empty()) {
        v = algo::add_hits(async_, k.store[kAsync], t, t - t % w_, 0);
      }
      for (const algo::LocalUnits& u : ik.pending) {
        v = algo::add_hits(async_, k.store[kAsync], t, u.window_us, u.units);
        ik.in_flight.push_back({batch, u});
      }
      ik.pending.clear();
      ++r_[kAsync].store_calls;
      schedule(t + rtt, [this, key, idx, batch, v] {
        InstanceKey& target = keys_[key].inst[idx];
        target.view = v;
        std::erase_if(target.in_flight, [&](const Batch& b) { return b.id == batch; });
      });
    }
    const int64_t next = t + std::max<int64_t>(1, o_.sync_interval.count() / 2);
    schedule(next, [this, i, next] { instance_tick(i, next); });
  }

  Policy exact_, lease_, async_;
  const DistributedOptions& o_;
  RegionsModel regions_;
  int64_t w_ = 1;
  std::array<DistributedResult, kModes> r_;
  std::array<std::map<int64_t, int64_t>, kModes> latencies_;
  std::vector<KeyState> keys_;
  std::vector<uint32_t> active_;
  std::unordered_map<uint32_t, int64_t> last_seen_;
  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  uint64_t seq_ = 0, batch_ = 0;
  int64_t peak_async_ = 0;
  int64_t last_t_ = 0;
};

Result<Policy> with_mode(const Policy& p, Consistency mode, const DistributedOptions& o) {
  ConsistencyOptions c;
  c.mode = mode;
  c.sync_interval = o.sync_interval;
  c.lease_max = std::min(o.lease_max, p.limit());
  c.lease_ttl = o.slice_ttl;
  return p.with_consistency(c);
}

}  // namespace

Status validate(const DistributedOptions& o) {
  if (o.instances < 1 || o.instances > 1000) return Status::invalid_argument("--instances must be 1 ... 1000");
  if (o.regions < 1 || o.regions > o.instances) {
    return Status::invalid_argument("--regions must be 1 ... --instances (each region runs an instance)");
  }
  if (o.rtt.count() < 0 || o.cross_rtt.count() < 0) {
    return Status::invalid_argument("--rtt and --cross-rtt must not be negative");
  }
  if (o.sync_interval < kMinSyncInterval || o.sync_interval > kMaxSyncInterval) {
    return Status::invalid_argument("--sync-interval must be 1ms ... 1m");
  }
  if (o.slice_ttl < kMinLeaseTtl || o.slice_ttl > kMaxLeaseTtl) {
    return Status::invalid_argument("--slice-ttl must be 1ms ... 1h");
  }
  if (o.lease_max < 0) return Status::invalid_argument("--lease-max must not be negative");
  return {};
}

struct Distributed::Impl {
  DistributedOptions options;
  std::vector<AlgoSim> sims;
  std::unordered_map<std::string, uint32_t> ids;
  int64_t next_instance = 0;
  bool started = false;
};

Distributed::Distributed(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Distributed::Distributed(Distributed&&) noexcept = default;
Distributed& Distributed::operator=(Distributed&&) noexcept = default;
Distributed::~Distributed() = default;

Result<Distributed> Distributed::create(const Policy& fixed, const Policy& counter,
                                        DistributedOptions options) {
  if (auto s = validate(options); !s.is_ok()) return s;
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->sims.reserve(2);
  for (const Policy* p : {&fixed, &counter}) {
    auto lease = with_mode(*p, Consistency::kLease, impl->options);
    if (!lease) return lease.status();
    auto async = with_mode(*p, Consistency::kAsync, impl->options);
    if (!async) return async.status();
    impl->sims.emplace_back(*p, *lease, *async, impl->options);
  }
  return Distributed(std::move(impl));
}

void Distributed::add(int64_t t_us, std::string_view key, int64_t cost) {
  Impl& m = *impl_;
  if (!m.started) {
    m.started = true;
    for (AlgoSim& s : m.sims) s.start(t_us);
  }
  auto it = m.ids.find(std::string(key));
  if (it == m.ids.end()) it = m.ids.emplace(std::string(key), static_cast<uint32_t>(m.ids.size())).first;
  const int64_t instance = m.next_instance;
  m.next_instance = (m.next_instance + 1) % m.options.instances;
  for (AlgoSim& s : m.sims) s.add(t_us, it->second, cost, instance);
}

DistributedReport Distributed::finish() {
  DistributedReport out;
  out.options = impl_->options;
  for (AlgoSim& s : impl_->sims) {
    for (DistributedResult& r : s.finish()) out.results.push_back(std::move(r));
  }
  return out;
}

}  // namespace ratelimit::sim
