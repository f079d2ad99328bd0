// capacity_test.cc — the backend-with-a-capacity model (src/sim/capacity.h): below capacity a
// limit above the workers changes nothing (goodput = offered, round trip = service time); above
// it, a limit above the workers turns the excess into a queue (round trip ≈ limit / workers ×
// service) while a limit below them caps goodput at limit / service; halving the workers doubles
// a fixed limit's queueing; the requests in flight never exceed the limit; deterministic; bad
// scenarios refused; Gradient2 at 3x capacity keeps p99 within 2x the unloaded p99 with 85 % of
// the capacity as goodput (issue 30's bound, in the model); with priority classes at 2x, every
// refusal falls on the lower class.
#include <gtest/gtest.h>

#include <algorithm>

#include "capacity.h"

namespace ratelimit::sim {
namespace {

CapacityRun run(const CapacityScenario& s, int64_t limit) {
  auto source = fixed_limit(limit);
  auto r = run_capacity(s, *source);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : CapacityRun{};
}

TEST(Capacity, BelowCapacityALimitAboveTheWorkersChangesNothing) {
  const CapacityRun r = run(capacity_load_steps(), 100);
  ASSERT_EQ(r.phases.size(), 4u);
  const CapacityPhaseResult& half = r.phases[0];  // 500/s offered to 1000/s
  EXPECT_EQ(half.refused, 0);
  EXPECT_NEAR(half.goodput_rps, 500, 25);
  EXPECT_NEAR(static_cast<double>(half.p50_us), 20'000, 1'000);
  EXPECT_LE(half.p99_us, r.unloaded_p99_us + 500);
}

TEST(Capacity, AboveCapacityAHighLimitQueuesAndALowOneRefuses) {
  const CapacityRun high = run(capacity_load_steps(), 100);
  const CapacityRun low = run(capacity_load_steps(), 10);
  const CapacityPhaseResult& h = high.phases[2];  // 2x capacity
  const CapacityPhaseResult& l = low.phases[2];
  // 100 in flight on 20 workers: 80 queued ahead, about 5 service times per round trip.
  EXPECT_NEAR(static_cast<double>(h.p50_us), 100'000, 5'000);
  EXPECT_GE(h.p99_us, 4 * high.unloaded_p99_us);
  EXPECT_NEAR(h.goodput_rps, 1000, 30);  // the backend is busy, and answers come within 1 s
  // 10 in flight never queue, but serve at most 10 / 20 ms = 500/s of the 1000 the backend has.
  EXPECT_LE(l.p99_us, low.unloaded_p99_us + 500);
  EXPECT_NEAR(l.goodput_rps, 500, 25);
  EXPECT_GT(l.refused, h.refused);
}

TEST(Capacity, HalvingTheWorkersDoublesAFixedLimitsQueueing) {
  const CapacityRun r = run(capacity_halved_at_3x(), 100);
  ASSERT_EQ(r.phases.size(), 2u);
  EXPECT_EQ(r.phases[1].workers, 10);
  EXPECT_NEAR(static_cast<double>(r.phases[0].p50_us), 100'000, 5'000);
  EXPECT_NEAR(static_cast<double>(r.phases[1].p50_us), 200'000, 10'000);
  EXPECT_NEAR(r.phases[1].goodput_rps, 500, 25);
}

// A limit source that checks the model never has more in flight than it allows.
class Watching final : public LimitSource {
 public:
  std::string name() const override { return "watching 30"; }
  int64_t limit() const override { return 30; }
  void sample(int64_t, int64_t rtt_us, int64_t inflight, bool) override {
    most = std::max(most, inflight);  // at its admission, itself included
    EXPECT_GT(rtt_us, 0);
  }
  int64_t most = 0;
};

TEST(Capacity, InFlightNeverExceedsTheLimit) {
  Watching w;
  auto r = run_capacity(capacity_halved_at_3x(), w);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(w.most, 30);
}

TEST(Capacity, Gradient2AtThreeTimesCapacityKeepsLatencyAndGoodput) {
  adaptive::AdaptiveConfig c;  // gradient2, min 1, initial 20, max 200, 1 s windows
  auto source = adaptive_limit(c);
  ASSERT_TRUE(source.ok());
  auto r = run_capacity(capacity_halved_at_3x(), **source);
  ASSERT_TRUE(r.ok());
  const CapacityPhaseResult& full = r->phases[0];
  EXPECT_LE(full.p99_us, 2 * r->unloaded_p99_us);
  EXPECT_GE(full.goodput_rps, 0.85 * full.capacity_rps);
  EXPECT_GT(full.limit_max, 20);  // it learned: not the initial limit held still
  adaptive::AdaptiveConfig bad;
  bad.min_limit = 0;
  EXPECT_FALSE(adaptive_limit(bad).ok());
}

TEST(Capacity, SameSeedSameTable) {
  const CapacityScenario s = capacity_load_steps();
  EXPECT_EQ(render_capacity(s, {run(s, 40)}), render_capacity(s, {run(s, 40)}));
}

TEST(Capacity, BadScenariosAreRefused) {
  auto source = fixed_limit(10);
  CapacityScenario s = capacity_load_steps();
  s.workers = 0;
  EXPECT_FALSE(run_capacity(s, *source).ok());
  s = capacity_load_steps();
  s.phases.clear();
  EXPECT_FALSE(run_capacity(s, *source).ok());
  s = capacity_load_steps();
  s.phases[0].load = -1;
  EXPECT_FALSE(run_capacity(s, *source).ok());
  s = capacity_load_steps();
  s.jitter = 1;
  EXPECT_FALSE(run_capacity(s, *source).ok());
  s = capacity_load_steps();
  s.service = Micros{0};
  EXPECT_FALSE(run_capacity(s, *source).ok());
  auto zero = fixed_limit(0);
  EXPECT_FALSE(run_capacity(capacity_load_steps(), *zero).ok());
  s = capacity_classes_at_2x();
  s.shares = {0.5, 0.6};
  EXPECT_FALSE(run_capacity(s, *source).ok()) << "shares must sum to 1";
  s.shares = {1.0};
  EXPECT_FALSE(run_capacity(s, *source).ok()) << "one share per class";
}

// Issue 30's classes in the model: critical and sheddable at 50 % each, 2x capacity, limit 20 =
// the workers. Critical is never refused and waits at most max_wait (its p99 wait far below);
// sheddable takes every refusal; without classes the refusals fall on both alike. The limit
// holds either way, and goodput stays at the capacity.
TEST(Capacity, ClassesPutEveryRefusalOnTheLowerClass) {
  const CapacityScenario s = capacity_classes_at_2x();
  const CapacityRun r = run(s, 20);
  ASSERT_EQ(r.phases.size(), 1u);
  const CapacityPhaseResult& p = r.phases[0];
  ASSERT_EQ(p.classes.size(), 2u);
  const auto& critical = p.classes[0];
  const auto& sheddable = p.classes[1];
  EXPECT_NEAR(static_cast<double>(critical.offered), 20'000, 600);  // 1,000/s for 20 s
  EXPECT_EQ(critical.refused, 0);
  EXPECT_GT(critical.waited, 0) << "at 2x, critical requests do find the limit reached";
  EXPECT_LT(critical.wait_max_us, 1'000'000);
  EXPECT_EQ(sheddable.refused, p.refused) << "every refusal is sheddable's";
  EXPECT_EQ(sheddable.waited, 0) << "a class with headroom never waits";
  EXPECT_NEAR(p.goodput_rps, 1'000, 50);
  CapacityScenario plain = s;
  plain.classes.clear();
  plain.shares.clear();
  const CapacityPhaseResult q = run(plain, 20).phases[0];
  EXPECT_NEAR(static_cast<double>(q.refused), static_cast<double>(p.refused), 0.1 * static_cast<double>(p.refused))
      << "the same load refused, only spread over both classes";
}

}  // namespace
}  // namespace ratelimit::sim
