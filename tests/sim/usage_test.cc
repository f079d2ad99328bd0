// usage_test.cc — the usage-known-after-the-fact model (src/sim/usage.h): on the same arrivals,
// reserving the largest cost never goes over the limit, reconciling a mean estimate goes over by
// no more than docs/usage.md's bound, reporting only goes over by no more than its own; every
// strategy records exactly what it served; bad options are refused.
#include <gtest/gtest.h>

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
}

}  // namespace
}  // namespace ratelimit::sim
