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

struct KeyEntry {
  std::array<algo::AlgorithmState, kAlgorithms> states;
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
  return std::array<Policy, kAlgorithms>{*fw, *log, *swc, *tb, *lb};
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

void RateBins::add(int64_t t_us, bool allowed) {
  if (admitted.empty()) origin_us = t_us;
  auto index = static_cast<size_t>((t_us - origin_us) / width_us);
  while (index >= kMaxBins) {
    // Merge neighbours: same counts, half as many intervals, twice as wide.
    const size_t half = (admitted.size() + 1) / 2;
    for (size_t i = 0; i < half; ++i) {
      const size_t a = 2 * i;
      const size_t b = a + 1;
      admitted[i] = admitted[a] + (b < admitted.size() ? admitted[b] : 0);
      denied[i] = denied[a] + (b < denied.size() ? denied[b] : 0);
    }
    admitted.resize(half);
    denied.resize(half);
    width_us *= 2;
    index = static_cast<size_t>((t_us - origin_us) / width_us);
  }
  if (index >= admitted.size()) {
    admitted.resize(index + 1, 0);
    denied.resize(index + 1, 0);
  }
  ++(allowed ? admitted : denied)[index];
}

struct Replay::Impl {
  explicit Impl(ReplayOptions o) : options(std::move(o)) {}
  ReplayOptions options;
  std::unordered_map<std::string, KeyEntry, StringHash, std::equal_to<>> keys;
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

  // Drops keys whose every state is back to fresh (see the invariants in replay.h).
  void sweep(int64_t now_us) {
    std::erase_if(keys, [&](const auto& kv) {
      for (size_t i = 0; i < kAlgorithms; ++i) {
        if (algo::idle_at_us(options.policies[i], kv.second.states[i]) > now_us) return false;
      }
      return true;
    });
    next_sweep = std::max(kMinSweep, 2 * keys.size());
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
    lane.bins.add(t_us, d.allowed);
    if (!d.allowed) {
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
    if (marked) ++r.marked_admitted;
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
      if (chart.complete) lane.departures_us.push_back(departs);
    }
  }
  return {};
}

size_t Replay::live_keys() const { return impl_->keys.size(); }

Report Replay::report() const { return impl_->report; }

}  // namespace ratelimit::sim
