// usage_test.cc — the usage-known-after-the-fact model (src/sim/usage.h): on the same arrivals,
// reserving the largest cost never goes over the limit, reconciling a mean estimate goes over by
// no more than docs/usage.md's bound, reporting only goes over by no more than its own; every
// strategy records exactly what it served; on a tick grid every decision falls on the grid and the
// event list replays the run (what tools/sim/compare_usage.py sends the daemon); bad options are
// refused.
#include <gtest/gtest.h>

#include <vector>

#include "usage.h"

namespace ratelimit::sim {
namespace {

UsageOptions options() {
  UsageOptions o;
  o.rate = 2;
  o.duration_s = 600;
  o.hold = Micros{5'000'000};
  return o;
}

TEST(Usage, StrategiesTradeRefusalsForOverAdmissionWithinTheirBounds) {
  for (Result<Policy> p : {Policy::sliding_window_log(100'000, Micros{60'000'000}),
                           Policy::fixed_window(100'000, Micros{60'000'000}),
                           Policy::token_bucket(100'000.0 / 60, 100'000)}) {
    ASSERT_TRUE(p.ok());
    SCOPED_TRACE(p->name());
    auto r = run_usage(*p, options());
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const StrategyResult& max = r->results[0];
    const StrategyResult& mean = r->results[1];
    const StrategyResult& only = r->results[2];
    EXPECT_GT(max.requests, 1000);
    for (const StrategyResult& s : r->results) {
      EXPECT_EQ(s.requests, max.requests);  // the same arrivals
      EXPECT_EQ(s.admitted + s.refused, s.requests);
      EXPECT_EQ(s.recorded, s.served) << strategy_name(s.strategy);  // nothing lost, nothing invented
    }
    // The demand (~160,000 tokens a minute) is above the limit: every strategy refuses some.
    EXPECT_GT(max.refused, 0);
    // Reserving the maximum never takes the count past the limit (its reports are refunds);
    // the others go past it by at most the requests in flight (measured) times what each may
    // exceed its reservation by (docs/usage.md).
    EXPECT_EQ(max.over_limit, 0);
    EXPECT_GT(mean.over_limit, 0);
    EXPECT_LE(mean.over_limit, mean.max_in_flight * (r->max_cost - r->mean_cost));
    EXPECT_LE(only.over_limit, only.max_in_flight * r->max_cost);
    // Reserving less admits more and serves more (report_only against reserve_mean is no law:
    // its deeper debts refuse longer).
    EXPECT_GT(mean.admitted, max.admitted);
    EXPECT_GT(mean.served, max.served);
    EXPECT_GT(only.debt_fraction, 0.0);
  }
}

TEST(Usage, SameSeedSameFigures) {
  const Policy p = Policy::sliding_window_log(100'000, Micros{60'000'000}).value();
  auto a = run_usage(p, options());
  auto b = run_usage(p, options());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(render_usage(*a), render_usage(*b));
}

// The events are the run: each strategy's acquires/peeks one per request, a report per admitted
// request after `hold`, every time on the tick grid, in time order, adding up to the table.
TEST(Usage, EventsOnATickGridAreTheRunInOrder) {
  const Policy p = Policy::sliding_window_log(100'000, Micros{3'050'000}).value();
  UsageOptions o;
  o.rate = 40;
  o.duration_s = 15;
  o.hold = Micros{300'000};
  o.tick = Micros{100'000};
  o.record_events = true;
  auto r = run_usage(p, o);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  for (const StrategyResult& s : r->results) {
    SCOPED_TRACE(strategy_name(s.strategy));
    int64_t decided = 0, admitted = 0, reported = 0, recorded = 0, last_t = 0;
    std::vector<int64_t> admitted_at(static_cast<size_t>(s.requests), -1);
    for (const UsageEvent& e : s.events) {
      EXPECT_EQ(e.t_us % 100'000, 0);
      EXPECT_GE(e.t_us, last_t);
      last_t = e.t_us;
      if (e.op == UsageEvent::Op::kReport) {
        ++reported;
        EXPECT_TRUE(e.allowed);  // a report is never refused
        EXPECT_EQ(e.t_us, admitted_at[static_cast<size_t>(e.request)] + 300'000);
        recorded += e.cost;
        continue;
      }
      EXPECT_EQ(e.request, decided++);
      EXPECT_EQ(e.op, s.strategy == Strategy::kReportOnly ? UsageEvent::Op::kPeek : UsageEvent::Op::kAcquire);
      if (e.allowed) {
        ++admitted;
        admitted_at[static_cast<size_t>(e.request)] = e.t_us;
        if (e.op == UsageEvent::Op::kAcquire) recorded += e.cost;
      }
    }
    EXPECT_EQ(decided, s.requests);
    EXPECT_EQ(admitted, s.admitted);
    EXPECT_EQ(reported, s.admitted);
    EXPECT_EQ(recorded, s.served);
  }
  // Without record_events, nothing is kept; the CSV lists every event under its header.
  o.record_events = false;
  auto quiet = run_usage(p, o);
  ASSERT_TRUE(quiet.ok());
  EXPECT_TRUE(quiet->results[0].events.empty());
  EXPECT_EQ(render_usage(*quiet), render_usage(*r));
  const std::string csv = render_usage_events(*r);
  size_t lines = 0;
  for (char c : csv) lines += c == '\n';
  EXPECT_EQ(lines, 1 + r->results[0].events.size() + r->results[1].events.size() + r->results[2].events.size());
  EXPECT_EQ(csv.rfind("strategy,request,t_us,op,cost,allowed,remaining\n", 0), 0u);
}

TEST(Usage, BadOptionsAreRefused) {
  const Policy p = Policy::sliding_window_log(100'000, Micros{60'000'000}).value();
  UsageOptions o = options();
  o.rate = 0;
  EXPECT_FALSE(run_usage(p, o).ok());
  // The largest cost of the default mixture is 32,000.
  auto r = run_usage(Policy::sliding_window_log(1000, Micros{60'000'000}).value(), options());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("above the limit"), std::string::npos);
  EXPECT_FALSE(run_usage(Policy::concurrency(5, Micros{1'000'000}).value(), options()).ok());
  o = options();
  o.costs = {{1.0, 0, 5}};
  EXPECT_FALSE(run_usage(p, o).ok());
  o = options();
  o.tick = Micros{-1};
  EXPECT_FALSE(run_usage(p, o).ok());
}

}  // namespace
}  // namespace ratelimit::sim
