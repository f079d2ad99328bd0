// rlqs_test.cc — the RLQS fleet model (src/sim/rlqs.h) on issue 29's scenario: with a 1 s report
// interval the assignments reach their max-min shares (10/100/190, then 10/270/20) within five
// reports and a leaver's share is redistributed within its TTL plus two reports; the limit is
// used whole and fairly in steady state; what a fleet admits above the limit in one second is
// at most the fresh buckets' bursts (each at most its share: under the limit again); longer
// intervals converge proportionally later; bad scenarios and options are refused.
#include <gtest/gtest.h>

#include "rlqs.h"

namespace ratelimit::sim {
namespace {

std::vector<RlqsRun> run(const RlqsOptions& o) {
  auto r = run_rlqs(rlqs_three_clients(), o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? *r : std::vector<RlqsRun>{};
}

TEST(Rlqs, OneSecondReportsReachTheSharesWithinFiveReports) {
  for (bool allow : {true, false}) {
    SCOPED_TRACE(allow ? "no assignment: allow" : "no assignment: deny");
    RlqsOptions o;
    o.intervals_s = {1};
    o.no_assignment_allows = allow;
    const auto runs = run(o);
    ASSERT_EQ(runs.size(), 1u);
    const RlqsRun& r = runs[0];
    EXPECT_EQ(r.ttl_s, 2);
    ASSERT_EQ(r.phases.size(), 3u);
    EXPECT_EQ(r.phases[0].target_rps, (std::vector<int64_t>{10, 100, 190}));
    EXPECT_EQ(r.phases[1].target_rps, (std::vector<int64_t>{10, 270, 20}));
    EXPECT_EQ(r.phases[2].target_rps, (std::vector<int64_t>{10, 290, 0}));
    for (size_t k = 0; k < 2; ++k) {
      ASSERT_TRUE(r.phases[k].converged_s) << k;
      EXPECT_LE(*r.phases[k].converged_s, 5.0) << k;  // five reports
    }
    // The leaver (last report just before 120 s) keeps its share for its TTL (2 s); the next
    // report of each other client then divides it: TTL + two reports at most.
    ASSERT_TRUE(r.phases[2].settled_s);
    EXPECT_LE(*r.phases[2].settled_s, 2.0 + 2.0);
    for (const RlqsPhase& p : r.phases) {
      EXPECT_GE(p.utilisation, 0.99);
      EXPECT_LE(p.utilisation, 1.0);
      EXPECT_GE(p.jain, 0.99);
    }
    // Every new assignment is a full bucket (Envoy's), so a second in which shares change
    // admits up to the new buckets' depth on top of the limit — never more than the limit again.
    EXPECT_GT(r.worst_second_over, 0);
    EXPECT_LE(r.worst_second_over, 300);
  }
}

TEST(Rlqs, LongerIntervalsConvergeLaterInProportion) {
  RlqsOptions o;
  o.intervals_s = {1, 2, 10};
  o.no_assignment_allows = false;
  const auto runs = run(o);
  ASSERT_EQ(runs.size(), 3u);
  for (const RlqsRun& r : runs) {
    SCOPED_TRACE(r.interval_s);
    ASSERT_TRUE(r.phases[1].converged_s);
    // A demand change is seen by the next report and acted on by the one after (plus the
    // clients' few-ms arrival offsets and one 10 ms sample).
    EXPECT_LE(*r.phases[1].converged_s, 2.0 * static_cast<double>(r.interval_s) + 0.02);
    EXPECT_GE(*r.phases[1].converged_s, static_cast<double>(r.interval_s));
    EXPECT_EQ(r.reports, runs[0].reports / r.interval_s);
  }
  EXPECT_LT(*runs[0].phases[1].converged_s, *runs[2].phases[1].converged_s);
}

// With the server's reporting_interval set to the Envoys' (rlqs.reporting_interval), a first
// assignment outlives the wait for the second report at every interval: no fallback to
// ALLOW_ALL, so the worst second is the bucket refills' alone — as at 1 s. Left at 1 s, the
// 5 s and 10 s runs let the 1,000-rps client through whole between its first two reports.
TEST(Rlqs, AConfiguredReportingIntervalKeepsTheFirstAssignmentUntilTheSecondReport) {
  RlqsOptions o;
  o.intervals_s = {1, 5, 10};
  o.server_interval_s = 0;  // each run's own
  const auto matched = run(o);
  ASSERT_EQ(matched.size(), 3u);
  for (const RlqsRun& r : matched) EXPECT_EQ(r.worst_second_over, matched[0].worst_second_over) << r.interval_s;
  o.server_interval_s = 1;
  const auto unset = run(o);
  ASSERT_EQ(unset.size(), 3u);
  EXPECT_GT(unset[1].worst_second_over, matched[1].worst_second_over + 300);
  EXPECT_GT(unset[2].worst_second_over, matched[2].worst_second_over + 300);
  o.server_interval_s = -1;
  EXPECT_FALSE(run_rlqs(rlqs_three_clients(), o).ok());
}

TEST(Rlqs, SameScenarioSameTable) {
  RlqsOptions o;
  auto a = run_rlqs(rlqs_three_clients(), o);
  auto b = run_rlqs(rlqs_three_clients(), o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(render_rlqs(rlqs_three_clients(), *a), render_rlqs(rlqs_three_clients(), *b));
}

TEST(Rlqs, BadScenariosAndOptionsAreRefused) {
  RlqsOptions o;
  RlqsScenario s = rlqs_three_clients();
  s.capacity_rps = 0;
  EXPECT_FALSE(run_rlqs(s, o).ok());
  s = rlqs_three_clients();
  s.clients[0].demand = {{1, 10}};  // no demand from 0 s
  EXPECT_FALSE(run_rlqs(s, o).ok());
  s = rlqs_three_clients();
  s.clients[1].demand = {{0, 10}, {0, 20}};  // times must ascend
  EXPECT_FALSE(run_rlqs(s, o).ok());
  s = rlqs_three_clients();
  s.clients[2].demand = {{0, -1}};
  EXPECT_FALSE(run_rlqs(s, o).ok());
  s = rlqs_three_clients();
  s.phases_s = {120, 60};
  EXPECT_FALSE(run_rlqs(s, o).ok());
  s = rlqs_three_clients();
  s.clients.clear();
  EXPECT_FALSE(run_rlqs(s, o).ok());
  o.intervals_s = {0};
  EXPECT_FALSE(run_rlqs(rlqs_three_clients(), o).ok());
  o.intervals_s = {};
  EXPECT_FALSE(run_rlqs(rlqs_three_clients(), o).ok());
  o = RlqsOptions{};
  o.tolerance = 1.5;
  EXPECT_FALSE(run_rlqs(rlqs_three_clients(), o).ok());
}

}  // namespace
}  // namespace ratelimit::sim
