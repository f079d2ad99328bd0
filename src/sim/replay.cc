// replay.cc — the replay engine (see replay.h). Every admission decision below is
// algo::decide() from src/core; this file only keeps states per key and counts.
#include "replay.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "timestamps.h"

namespace ratelimit::sim {
namespace {

constexpr size_t kTokenBucket = 3;
constexpr size_t kLeakyBucket = 4;
// Below this many live keys the engine does not bother sweeping idle ones.
constexpr size_t kMinSweep = 4096;

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

// A key's admissions within the peak window, oldest first: a vector with a moving head
// (compacted when half of it is spent), cheaper per key than a deque.
struct RecentTimes {
  std::vector<int64_t> times;
  size_t head = 0;
  // Adds t after dropping times <= t - window; returns how many remain (t included).
  int64_t push(int64_t t, int64_t window) {
    while (head < times.size() && times[head] <= t - window) ++head;
    if (head > 0 && head * 2 >= times.size()) {
      times.erase(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(head));
      head = 0;
    }
    times.push_back(t);
    return static_cast<int64_t>(times.size() - head);
  }
  // True while some admission is still inside the window at `now`.
  bool live(int64_t now, int64_t window) const {
    return head < times.size() && times.back() > now - window;
  }
};

struct KeyTally {
  int64_t offered = 0;
  std::array<int64_t, kAlgorithms> admitted{};
  std::array<int64_t, kAlgorithms> peak{};
};

struct KeyEntry {
  std::array<algo::AlgorithmState, kAlgorithms> states;
  // This key's tally (elements of an unordered_map keep their address); null until looked
  // up, and again when the tally is pruned.
  KeyTally* tally = nullptr;
  std::array<RecentTimes, kAlgorithms> recent;  // for the per-key peak
  uint8_t limited = 0;  // bit i: algorithm i denied this key at least once (since it was created)
};


Status with_flag(const Status& s, const char* flag) {
  return Status::invalid_argument(std::string(flag) + ": " + s.message());
}

}  // namespace

Result<std::array<Policy, kAlgorithms>> make_policies(const PolicyParams& p) {
  auto fw = Policy::fixed_window(p.window_limit, p.window);
  if (!fw) return with_flag(fw.status(), "--limit/--window");
  auto log = Policy::sliding_window_log(p.window_limit, p.window);
  if (!log) return with_flag(log.status(), "--limit/--window");
  auto swc = Policy::sliding_window_counter(p.window_limit, p.window);
  if (!swc) return with_flag(swc.status(), "--limit/--window");
  auto tb = Policy::token_bucket(p.token_rate, p.token_burst);
  if (!tb) return with_flag(tb.status(), "--token-rate/--token-burst");
  auto lb = Policy::leaky_bucket(p.leaky_rate, p.leaky_burst, p.leaky_mode);
  if (!lb) return with_flag(lb.status(), "--leaky-rate/--leaky-burst");
  std::array<Policy, kAlgorithms> out{*fw, *log, *swc, *tb, *lb};
  for (size_t i = 0; i < kAlgorithms; ++i) {  // a new rate row in the table needs a policy here
    if (algorithm_index(out[i].algorithm()) != i) {
      return Status::internal("make_policies: lane " + std::to_string(i) + " holds " +
                              algorithm_name(out[i].algorithm()) + ", not " +
                              kAlgorithmTable[i].name);
    }
  }
  return out;
}

std::string describe_policy(const Policy& policy) {
  if (!policy.is_bucket()) {
    return std::to_string(policy.limit()) + " per " + format_duration(policy.window());
  }
  std::string s = num(policy.rate()) + "/s burst " + std::to_string(policy.limit());
  if (policy.algorithm() == Algorithm::kLeakyBucket && policy.leaky_mode() == LeakyMode::kShape) {
    s += " shape";
  }
  return s;
}

size_t RateBins::index_for(int64_t t_us) {
  if (!has_origin_) set_origin(t_us);
  auto index = static_cast<size_t>((t_us - origin_us) / width_us);
  while (index >= kMaxBins) {
    // Merge neighbours: same totals, fewer and wider intervals. 1 x 10^k grows to 2 x 10^k
    // (pairs), 2 x 10^k to 10^(k+1) (fives), so every width stays 1 or 2 x 10^k.
    int64_t lead = width_us;
    while (lead % 10 == 0) lead /= 10;
    const size_t factor = lead == 2 ? 5 : 2;
    const size_t merged = (admitted.size() + factor - 1) / factor;
    auto merge = [&](std::vector<int64_t>& v, bool maximum) {
      for (size_t i = 0; i < merged; ++i) {
        int64_t acc = 0;
        for (size_t k = i * factor; k < std::min(v.size(), (i + 1) * factor); ++k) {
          acc = maximum ? std::max(acc, v[k]) : acc + v[k];
        }
        v[i] = acc;
      }
      v.resize(merged);
    };
    merge(admitted, false);
    merge(denied, false);
    merge(departed, false);
    merge(key_peak, true);
    width_us *= static_cast<int64_t>(factor);
    index = static_cast<size_t>((t_us - origin_us) / width_us);
  }
  if (index >= admitted.size()) {
    admitted.resize(index + 1, 0);
    denied.resize(index + 1, 0);
    departed.resize(index + 1, 0);
    key_peak.resize(index + 1, 0);
  }
  return index;
}

void RateBins::add(int64_t t_us, bool allowed, int64_t key_window_count) {
  const size_t i = index_for(t_us);
  ++(allowed ? admitted : denied)[i];
  key_peak[i] = std::max(key_peak[i], key_window_count);
}

void RateBins::add_departure(int64_t t_us) { ++departed[index_for(t_us)]; }

struct Replay::Impl {
  explicit Impl(ReplayOptions o) : options(std::move(o)) {}
  ReplayOptions options;
  std::unordered_map<std::string, KeyEntry, StringHash, std::equal_to<>> keys;
  std::unordered_map<std::string, KeyTally, StringHash, std::equal_to<>> tallies;
  int64_t tally_error = 0;
  std::array<std::unordered_set<uint64_t>, kAlgorithms> limited_keys;  // 64-bit key hashes
  std::array<std::deque<int64_t>, kAlgorithms> recent_admitted;        // within the peak window
  std::array<int64_t, kAlgorithms> peak_window_us{};
  int64_t token_taken_at_start_u = 0;
  size_t next_sweep = kMinSweep;
  bool started = false;
  int64_t last_us = 0;
  Report report;

  KeyEntry& entry(std::string_view key) {
    auto it = keys.find(key);
    if (it != keys.end()) return it->second;
    KeyEntry e;
    for (size_t i = 0; i < kAlgorithms; ++i) e.states[i] = algo::fresh_state(options.policies[i]);
    if (token_taken_at_start_u > 0) {
      e.states[kTokenBucket] = algo::TokenBucketState{token_taken_at_start_u, report.start_us};
    }
    return keys.emplace(std::string(key), std::move(e)).first->second;
  }

  // Drops keys whose every state is back to fresh and whose admissions have left the peak
  // window (see the invariants in replay.h).
  void sweep(int64_t now_us) {
    std::erase_if(keys, [&](const auto& kv) {
      for (size_t i = 0; i < kAlgorithms; ++i) {
        if (algo::idle_at_us(options.policies[i], kv.second.states[i]) > now_us) return false;
        if (kv.second.recent[i].live(now_us, peak_window_us[i])) return false;
      }
      return true;
    });
    next_sweep = std::max(kMinSweep, 2 * keys.size());
  }

  KeyTally& tally(std::string_view key) {
    auto it = tallies.find(key);
    if (it != tallies.end()) return it->second;
    if (tallies.size() >= 2 * std::max<size_t>(1, options.max_tracked_keys)) prune_tallies();
    return tallies.emplace(std::string(key), KeyTally{}).first->second;
  }

  // Keeps the max_tracked_keys busiest tallies; a dropped key that returns starts again from
  // zero, so its counts may miss up to the largest count dropped (summed over prunes).
  void prune_tallies() {
    std::vector<int64_t> offered;
    offered.reserve(tallies.size());
    for (const auto& kv : tallies) offered.push_back(kv.second.offered);
    const size_t keep = std::max<size_t>(1, options.max_tracked_keys);
    std::nth_element(offered.begin(), offered.begin() + static_cast<std::ptrdiff_t>(keep - 1),
                     offered.end(), std::greater<>());
    const int64_t threshold = offered[keep - 1];
    int64_t dropped_max = 0;
    size_t kept = 0;
    std::erase_if(tallies, [&](const auto& kv) {
      if (kv.second.offered > threshold || (kv.second.offered == threshold && kept < keep)) {
        ++kept;
        return false;
      }
      dropped_max = std::max(dropped_max, kv.second.offered);
      if (auto it = keys.find(kv.first); it != keys.end()) it->second.tally = nullptr;
      return true;
    });
    tally_error += dropped_max;
  }
};

Replay::Replay(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Replay::Replay(Replay&&) noexcept = default;
Replay& Replay::operator=(Replay&&) noexcept = default;
Replay::~Replay() = default;

Result<Replay> Replay::create(ReplayOptions options) {
  int64_t token_taken_at_start_u = 0;
  const Policy& token = options.policies[kTokenBucket];
  if (options.token_fill) {
    const double fill = *options.token_fill;
    const auto burst = static_cast<double>(token.limit());
    if (!std::isfinite(fill) || fill < 0 || fill > burst) {
      return Status::invalid_argument("--token-fill must be between 0 and the burst (" +
                                      std::to_string(token.limit()) + " tokens), got " +
                                      num(fill));
    }
    token_taken_at_start_u =
        token.limit() * algo::kUnit - std::llround(fill * static_cast<double>(algo::kUnit));
  }
  if (options.peak_window && options.peak_window->count() <= 0) {
    return Status::invalid_argument("--peak-window must be positive");
  }
  if (options.start_us && (*options.start_us < 0 || *options.start_us > kMaxTimestampUs)) {
    return Status::invalid_argument("start time out of range");
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  impl->token_taken_at_start_u = token_taken_at_start_u;
  for (size_t i = 0; i < kAlgorithms; ++i) {
    const Policy& p = impl->options.policies[i];
    impl->peak_window_us[i] = impl->options.peak_window.value_or(p.window()).count();
    AlgorithmResult r(p);
    r.peak_window = Micros{impl->peak_window_us[i]};
    impl->report.algorithms.push_back(std::move(r));
  }
  impl->report.token_fill = impl->options.token_fill;
  return Replay(std::move(impl));
}

Status Replay::add(int64_t t_us, std::string_view key, int64_t cost, bool marked) {
  Impl& m = *impl_;
  if (key.empty()) return Status::invalid_argument("empty client key");
  if (auto s = validate_cost(cost); !s.is_ok()) return s;
  if (t_us < 0 || t_us > kMaxTimestampUs) {
    return Status::invalid_argument("time " + std::to_string(t_us) + "us is out of range");
  }
  if (m.started && t_us < m.last_us) {
    return Status::invalid_argument("time goes backwards: " + format_seconds(t_us) +
                                    " s comes after " + format_seconds(m.last_us) + " s");
  }
  Report& rep = m.report;
  if (!m.started) {
    m.started = true;
    rep.first_us = t_us;
    rep.start_us = std::min(m.options.start_us.value_or(t_us), t_us);
    // Bins from the run's start, where the chart's axis and bars start too.
    for (ChartLane& lane : rep.chart.lanes) lane.bins.set_origin(rep.start_us);
  }
  m.last_us = t_us;
  rep.last_us = t_us;
  ++rep.requests;
  if (marked) {
    if (rep.marked_first_us < 0) rep.marked_first_us = t_us;
    rep.marked_last_us = t_us;
  }

  if (m.keys.size() >= m.next_sweep) m.sweep(t_us);
  KeyEntry& e = m.entry(key);
  if (e.tally == nullptr) e.tally = &m.tally(key);
  KeyTally& tally = *e.tally;
  ++tally.offered;
  rep.peak_live_keys = std::max(rep.peak_live_keys, static_cast<int64_t>(m.keys.size()));

  ChartData& chart = rep.chart;
  if (chart.complete && static_cast<size_t>(rep.requests) > m.options.max_chart_requests) {
    chart.complete = false;
    for (ChartLane& lane : chart.lanes) {
      lane.admitted_us = {};
      lane.denied_us = {};
      lane.departures_us = {};
    }
  }

  for (size_t i = 0; i < kAlgorithms; ++i) {
    const Policy& policy = m.options.policies[i];
    const Decision d = algo::decide(policy, e.states[i], t_us, cost, algo::Op::kAcquire);
    AlgorithmResult& r = rep.algorithms[i];
    ChartLane& lane = chart.lanes[i];
    ++r.requests;
    if (marked) ++r.marked_requests;
    if (!d.allowed) {
      lane.bins.add(t_us, false);
      ++r.denied;
      if ((e.limited & (1U << i)) == 0) {
        e.limited = static_cast<uint8_t>(e.limited | (1U << i));
        if (m.limited_keys[i].insert(std::hash<std::string_view>{}(key)).second) {
          ++r.clients_limited;
        }
      }
      if (chart.complete) lane.denied_us.push_back(t_us);
      continue;
    }
    ++r.admitted;
    ++tally.admitted[i];
    if (marked) ++r.marked_admitted;
    const int64_t key_count = e.recent[i].push(t_us, m.peak_window_us[i]);
    tally.peak[i] = std::max(tally.peak[i], key_count);
    r.peak_admitted_per_key = std::max(r.peak_admitted_per_key, key_count);
    lane.bins.add(t_us, true, key_count);
    if (chart.complete) lane.admitted_us.push_back(t_us);
    auto& recent = m.recent_admitted[i];
    while (!recent.empty() && recent.front() <= t_us - m.peak_window_us[i]) recent.pop_front();
    recent.push_back(t_us);
    r.peak_admitted = std::max(r.peak_admitted, static_cast<int64_t>(recent.size()));
    if (i == kLeakyBucket) {
      // The library's answer for an admitted request: reset_after = level after it / rate,
      // the time the virtual queue needs to drain it — its departure.
      const int64_t departs = t_us + d.reset_after.count();
      if (r.departures == 0) r.first_departure_us = departs;
      r.first_departure_us = std::min(r.first_departure_us, departs);
      r.last_departure_us = std::max(r.last_departure_us, departs);
      ++r.departures;
      if (r.departure_list_us.size() < m.options.max_departures) {
        r.departure_list_us.push_back(departs);
      }
      lane.bins.add_departure(departs);
      if (chart.complete) lane.departures_us.push_back(departs);
    }
  }
  return {};
}

size_t Replay::live_keys() const { return impl_->keys.size(); }

Report Replay::report() const {
  const Impl& m = *impl_;
  Report r = m.report;
  std::vector<const std::pair<const std::string, KeyTally>*> rows;
  rows.reserve(m.tallies.size());
  for (const auto& kv : m.tallies) rows.push_back(&kv);
  const size_t n = std::min(rows.size(), m.options.top_keys);
  // Most requests first; ties by key, so the table is the same on every run.
  auto busier = [](const auto* a, const auto* b) {
    return a->second.offered != b->second.offered ? a->second.offered > b->second.offered
                                                  : a->first < b->first;
  };
  std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(n), rows.end(), busier);
  for (size_t i = 0; i < n; ++i) {
    KeyRow row;
    row.key = rows[i]->first;
    row.offered = rows[i]->second.offered;
    row.admitted = rows[i]->second.admitted;
    row.peak = rows[i]->second.peak;
    r.top_keys.push_back(std::move(row));
  }
  r.top_keys_error = m.tally_error;
  return r;
}

}  // namespace ratelimit::sim
