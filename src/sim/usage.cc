// usage.cc — the usage-known-after-the-fact model (see usage.h): Poisson arrivals with costs
// from a mixture, each strategy run on its own copy of one key's state, events in time order
// (completions due, then debt samples, then the arrival at one instant).
#include "usage.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <queue>

#include "py_random.h"
#include "ratelimit/algorithms.h"

namespace ratelimit::sim {
namespace {

struct Arrival {
  int64_t t_us;
  int64_t cost;  // actual, known at the end
};

struct Completion {
  int64_t t_us;
  int64_t report;  // what is reported then (actual - reserved)
  int64_t actual;
  int64_t request;
  // Ties in arrival order: a deterministic order a replay can follow.
  bool operator>(const Completion& o) const { return t_us != o.t_us ? t_us > o.t_us : request > o.request; }
};

Status validate(const Policy& policy, const UsageOptions& o) {
  if (policy.is_concurrency()) return Status::invalid_argument("usage: the policy must be a rate policy");
  if (!(o.rate > 0) || !std::isfinite(o.rate)) return Status::invalid_argument("usage: rate must be > 0");
  if (!(o.duration_s > 0) || o.duration_s > 86'400) {
    return Status::invalid_argument("usage: duration must be > 0 and at most a day");
  }
  if (o.hold < Micros{0}) return Status::invalid_argument("usage: hold must be >= 0");
  if (o.tick < Micros{0} || o.tick > Micros{3'600'000'000}) {
    return Status::invalid_argument("usage: tick must be >= 0 and at most an hour");
  }
  if (o.costs.empty()) return Status::invalid_argument("usage: the cost mixture is empty");
  for (const CostRange& c : o.costs) {
    if (!(c.weight > 0) || c.lo < 1 || c.hi < c.lo || c.hi > kMaxCost) {
      return Status::invalid_argument("usage: each cost range needs a weight > 0 and 1 <= lo <= hi <= " +
                                      std::to_string(kMaxCost));
    }
  }
  return {};
}

std::vector<Arrival> arrivals(const UsageOptions& o) {
  PyRandom rng(o.seed);
  double total = 0;
  for (const CostRange& c : o.costs) total += c.weight;
  std::vector<Arrival> out;
  for (double t = rng.expovariate(o.rate); t < o.duration_s; t += rng.expovariate(o.rate)) {
    double u = rng.random() * total;
    const CostRange* r = &o.costs.back();
    for (const CostRange& c : o.costs) {
      if (u < c.weight) {
        r = &c;
        break;
      }
      u -= c.weight;
    }
    const int64_t span = r->hi - r->lo + 1;
    const int64_t cost = std::min(r->hi, r->lo + static_cast<int64_t>(rng.random() * static_cast<double>(span)));
    int64_t t_us = static_cast<int64_t>(std::llround(t * 1e6));
    if (o.tick.count() > 0) t_us = (t_us + o.tick.count() - 1) / o.tick.count() * o.tick.count();
    out.push_back({t_us, cost});
  }
  return out;
}

class Run {
 public:
  Run(const Policy& policy, const UsageOptions& o, Strategy s, int64_t reserved, int64_t sample_us)
      : policy_(policy), o_(o), state_(algo::fresh_state(policy)), sample_us_(sample_us) {
    r_.strategy = s;
    r_.reserved = reserved;
  }

  // Everything due at or before t: completions, then samples.
  void advance_to(int64_t t) {
    while (!due_.empty() && due_.top().t_us <= t) {
      const Completion c = due_.top();
      due_.pop();
      complete(c);
    }
    for (; next_sample_ <= t; next_sample_ += sample_us_) sample(next_sample_);
  }

  void arrive(const Arrival& a) {
    const int64_t request = r_.requests++;
    const bool peek = r_.strategy == Strategy::kReportOnly;
    const int64_t cost = peek ? 1 : r_.reserved;
    const Decision d = algo::decide(policy_, state_, a.t_us, cost, peek ? algo::Op::kPeek : algo::Op::kAcquire);
    note({a.t_us, request, peek ? UsageEvent::Op::kPeek : UsageEvent::Op::kAcquire, cost, d.allowed, d.remaining});
    if (!d.allowed) {
      ++r_.refused;
      return;
    }
    ++r_.admitted;
    r_.recorded += r_.reserved;
    due_.push({a.t_us + o_.hold.count(), a.cost - r_.reserved, a.cost, request});
    r_.max_in_flight = std::max<int64_t>(r_.max_in_flight, static_cast<int64_t>(due_.size()));
    note_held(a.t_us);
  }

  StrategyResult finish(int64_t end_us) {
    advance_to(end_us);
    while (!due_.empty()) advance_to(due_.top().t_us);
    r_.over_limit = std::max<int64_t>(0, r_.max_held - policy_.limit());
    r_.debt_fraction = samples_ == 0 ? 0 : static_cast<double>(in_debt_) / static_cast<double>(samples_);
    return r_;
  }

 private:
  void note(const UsageEvent& e) {
    if (o_.record_events) r_.events.push_back(e);
  }

  void complete(const Completion& c) {
    const Decision d = algo::decide(policy_, state_, c.t_us, c.report, algo::Op::kReport);
    note({c.t_us, c.request, UsageEvent::Op::kReport, c.report, d.allowed, d.remaining});
    r_.recorded += c.report;
    r_.served += c.actual;
    // Units used in (t - W, t], each request's at its end.
    used_.push_back({c.t_us, c.actual});
    in_window_ += c.actual;
    while (used_.front().first <= c.t_us - policy_.window().count()) {
      in_window_ -= used_.front().second;
      used_.pop_front();
    }
    r_.max_in_window = std::max(r_.max_in_window, in_window_);
    note_held(c.t_us);
  }

  void note_held(int64_t t) {
    r_.max_held = std::max(r_.max_held, algo::residue_of(policy_, state_, t).used);
  }

  void sample(int64_t t) {
    ++samples_;
    r_.held.emplace_back(t, algo::residue_of(policy_, state_, t).used);
    // A cost-0 peek is refused exactly when the key holds more than its limit (in debt).
    if (!algo::decide(policy_, state_, t, 0, algo::Op::kPeek).allowed) ++in_debt_;
  }

  const Policy& policy_;
  const UsageOptions& o_;
  algo::AlgorithmState state_;
  StrategyResult r_;
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> due_;
  std::deque<std::pair<int64_t, int64_t>> used_;
  int64_t in_window_ = 0;
  int64_t sample_us_;
  int64_t next_sample_ = 0;
  int64_t samples_ = 0;
  int64_t in_debt_ = 0;
};

}  // namespace

std::vector<CostRange> llm_token_mix() {
  return {{0.60, 50, 500}, {0.30, 500, 2000}, {0.08, 2000, 8000}, {0.02, 8000, 32000}};
}

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::kReserveMax: return "reserve_max";
    case Strategy::kReserveMean: return "reserve_mean";
    case Strategy::kReportOnly: return "report_only";
  }
  return "?";
}

Result<UsageReport> run_usage(const Policy& policy, const UsageOptions& o) {
  if (Status s = validate(policy, o); !s.is_ok()) return s;
  UsageReport report;
  report.limit = policy.limit();
  report.window = policy.window();
  double total = 0;
  double mean = 0;
  for (const CostRange& c : o.costs) {
    total += c.weight;
    mean += c.weight * static_cast<double>(c.lo + c.hi) / 2;
    report.max_cost = std::max(report.max_cost, c.hi);
  }
  report.mean_cost = std::max<int64_t>(1, std::llround(mean / total));
  if (report.max_cost > report.limit) {
    return Status::invalid_argument("usage: the largest cost (" + std::to_string(report.max_cost) +
                                    ") is above the limit: reserve_max could never admit it");
  }
  const std::vector<Arrival> in = arrivals(o);
  // The debt is sampled 100 times a window (at least every millisecond).
  const int64_t sample_us = std::max<int64_t>(1000, policy.window().count() / 100);
  const int64_t end_us = static_cast<int64_t>(std::llround(o.duration_s * 1e6));
  const std::array<std::pair<Strategy, int64_t>, kStrategies> plans = {
      std::pair{Strategy::kReserveMax, report.max_cost}, std::pair{Strategy::kReserveMean, report.mean_cost},
      std::pair{Strategy::kReportOnly, int64_t{0}}};
  for (size_t k = 0; k < kStrategies; ++k) {
    Run run(policy, o, plans[k].first, plans[k].second, sample_us);
    for (const Arrival& a : in) {
      run.advance_to(a.t_us);
      run.arrive(a);
    }
    report.results[k] = run.finish(end_us);
  }
  return report;
}

std::string render_usage(const UsageReport& r) {
  std::string out;
  char line[256];
  std::snprintf(line, sizeof line, "limit %lld per %.3g s; costs: mean %lld, largest %lld\n",
                static_cast<long long>(r.limit), static_cast<double>(r.window.count()) / 1e6,
                static_cast<long long>(r.mean_cost), static_cast<long long>(r.max_cost));
  out += line;
  std::snprintf(line, sizeof line, "%-13s %8s %8s %8s %8s %10s %12s %10s %8s\n", "strategy", "reserved",
                "requests", "admitted", "refused", "served", "most/window", "over", "in debt");
  out += line;
  for (const StrategyResult& s : r.results) {
    std::snprintf(line, sizeof line, "%-13s %8lld %8lld %8lld %8lld %10lld %12lld %9.1f%% %7.1f%%\n",
                  strategy_name(s.strategy), static_cast<long long>(s.reserved),
                  static_cast<long long>(s.requests), static_cast<long long>(s.admitted),
                  static_cast<long long>(s.refused), static_cast<long long>(s.served),
                  static_cast<long long>(s.max_in_window),
                  100.0 * static_cast<double>(s.over_limit) / static_cast<double>(r.limit),
                  100.0 * s.debt_fraction);
    out += line;
  }
  return out;
}

std::string render_usage_events(const UsageReport& r) {
  static constexpr const char* kOps[] = {"acquire", "peek", "report"};
  std::string out = "strategy,request,t_us,op,cost,allowed,remaining\n";
  char line[160];
  for (const StrategyResult& s : r.results) {
    for (const UsageEvent& e : s.events) {
      std::snprintf(line, sizeof line, "%s,%lld,%lld,%s,%lld,%d,%lld\n", strategy_name(s.strategy),
                    static_cast<long long>(e.request), static_cast<long long>(e.t_us),
                    kOps[static_cast<int>(e.op)], static_cast<long long>(e.cost), e.allowed ? 1 : 0,
                    static_cast<long long>(e.remaining));
      out += line;
    }
  }
  return out;
}

}  // namespace ratelimit::sim
