// usage.h — usage known after the fact, in the simulator: requests whose cost (an LLM answer's
// tokens, a download's bytes) is known only when they finish, limited by a policy that learns it
// through reports (algo::report, docs/usage.md), under three reservation strategies:
//   - reserve_max:  acquire the largest possible cost, report actual - max (a refund) at the end;
//   - reserve_mean: acquire the mean cost, report actual - mean (either sign) at the end;
//   - report_only:  admit while the key is not over its limit (a cost-1 peek), report the
//                   actual cost at the end.
// Each run answers what each strategy admits, refuses, serves, how far the policy's count goes
// past the limit (over-admission: the deepest debt), the most units actually used in any
// window, and how long the key spends in debt.
//
// Why a model of its own: the replay decides at arrival only; here a request's two decisions
// (before and after its work) are apart by its duration, so strategies trade refusals against
// over-admission through the requests in flight — the figure docs/usage.md states as a bound.
// Invariants: every decision is src/core's (algo::decide, algo::report) on one key's state;
// arrivals are Poisson from PyRandom (Python's random.Random, so a seed is reproducible), costs
// from a mixture of uniform ranges (the default an LLM-like token mix: many short answers, a
// heavy tail of long ones); "used in a window" counts each admitted request's actual cost at
// its end, over every window [t - W, t] ending at an event. Deterministic; not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ratelimit/policy.h"
#include "ratelimit/status.h"

namespace ratelimit::sim {

// One range of the cost mixture: `weight` of the requests cost lo ... hi (uniform, whole).
struct CostRange {
  double weight;
  int64_t lo;
  int64_t hi;
};

// The default mixture: tokens of LLM answers — 60 % short (50 ... 500), 30 % medium
// (500 ... 2,000), 8 % long (2,000 ... 8,000), 2 % very long (8,000 ... 32,000).
std::vector<CostRange> llm_token_mix();

struct UsageOptions {
  double rate = 2;          // requests per second (Poisson)
  double duration_s = 600;  // of arrivals
  Micros hold{5'000'000};   // each request's work: its report comes this long after its admission
  uint64_t seed = 42;
  std::vector<CostRange> costs = llm_token_mix();
  // > 0: each arrival moves up to the next multiple of `tick` (a grid a real-time replay can
  // keep to: tools/sim/compare_usage.py checks the daemon against this model on one).
  Micros tick{0};
  bool record_events = false;  // fill StrategyResult::events
};

// One decision of a strategy's run, in the order the model made it (a replay must keep it:
// a refund takes the newest entries first, so a report's place among others at one instant
// matters). The debt samples (cost-0 peeks) are not listed: they change nothing.
struct UsageEvent {
  enum class Op : uint8_t { kAcquire, kPeek, kReport };
  int64_t t_us;
  int64_t request;  // index of the arrival (0, 1, ...)
  Op op;
  int64_t cost;     // acquired, peeked (report_only: 1) or reported (actual - reserved)
  bool allowed;
  int64_t remaining;
};

enum class Strategy : uint8_t { kReserveMax, kReserveMean, kReportOnly };
inline constexpr size_t kStrategies = 3;
const char* strategy_name(Strategy s);  // "reserve_max", "reserve_mean", "report_only"

struct StrategyResult {
  Strategy strategy;
  int64_t reserved = 0;         // units acquired per request before its work (report_only: 0)
  int64_t requests = 0;
  int64_t admitted = 0;
  int64_t refused = 0;
  int64_t served = 0;           // sum of the admitted requests' actual costs
  int64_t recorded = 0;         // units the policy was told of (acquired + reported): == served
  int64_t max_in_flight = 0;    // most admitted requests not yet ended, at once
  int64_t max_in_window = 0;    // most units used in any window (t - W, t], each at its end
  int64_t max_held = 0;         // most units the policy's count held (algo::residue_of)
  int64_t over_limit = 0;       // max(0, max_held - limit): the deepest debt
  double debt_fraction = 0;     // share of the run the key held more than its limit
  // The units the policy's count held at each debt sample (100 a window): the chart's line.
  std::vector<std::pair<int64_t, int64_t>> held;  // (t_us, used)
  std::vector<UsageEvent> events;                 // options.record_events only
};

struct UsageReport {
  int64_t limit = 0;
  Micros window{0};
  int64_t mean_cost = 0;  // the mixture's mean, rounded (reserve_mean's estimate)
  int64_t max_cost = 0;   // the mixture's largest cost (reserve_max's estimate)
  std::array<StrategyResult, kStrategies> results{};
};

// Runs `policy` (the limit, a rate policy: e.g. 100,000 tokens a minute) under `options`.
// Validates (a rate policy; rate > 0, duration > 0, hold >= 0, tick >= 0; a non-empty mixture
// of positive weights and 1 <= lo <= hi <= kMaxCost) and runs the three strategies on the same
// arrivals and costs.
Result<UsageReport> run_usage(const Policy& policy, const UsageOptions& options);

// The report as a text table (what ratelimit-sim usage prints).
std::string render_usage(const UsageReport& report);

// The decisions of every strategy as CSV, one line per UsageEvent in the model's order
// (strategy,request,t_us,op,cost,allowed,remaining): what compare_usage.py replays.
std::string render_usage_events(const UsageReport& report);

}  // namespace ratelimit::sim
