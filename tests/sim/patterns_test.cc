// patterns_test.cc — each built-in pattern's request stream: count, first and last time,
// order, and which requests are the attack (C). A's values come from Python (see
// py_random_test.cc); B's and C's from the formulas of the issue, worked out by hand.
#include "patterns.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace ratelimit::sim {
namespace {

bool sorted(const Pattern& p) {
  return std::is_sorted(p.requests.begin(), p.requests.end(),
                        [](const auto& a, const auto& b) { return a.t_us < b.t_us; });
}

TEST(Patterns, A_PoissonStream) {
  auto p = make_pattern('A', PatternParams{});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->requests.size(), 184U);
  EXPECT_EQ(p->requests.front().t_us, 170'010);
  EXPECT_EQ(p->requests.back().t_us, 29'976'404);
  EXPECT_TRUE(sorted(*p));
  EXPECT_FALSE(p->token_starts_empty);
  EXPECT_TRUE(std::none_of(p->requests.begin(), p->requests.end(), [](auto& r) { return r.marked; }));
  // Another seed, another stream; a higher rate, more requests.
  PatternParams other;
  other.seed = 7;
  EXPECT_NE(make_pattern('A', other)->requests.front().t_us, 170'010);
  other.poisson_rate = 60;
  EXPECT_GT(make_pattern('A', other)->requests.size(), 1500U);
}

TEST(Patterns, B_Burst) {
  auto p = make_pattern('b', PatternParams{});
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->requests.size(), 30U);
  // 5.0 + i * 0.02 / 30: i = 0 -> 5 s; i = 29 -> 5.019333... s -> 5019333 µs.
  EXPECT_EQ(p->requests.front().t_us, 5'000'000);
  EXPECT_EQ(p->requests[1].t_us, 5'000'667);
  EXPECT_EQ(p->requests.back().t_us, 5'019'333);
  EXPECT_TRUE(sorted(*p));
  PatternParams bigger;
  bigger.burst_size = 100;
  EXPECT_EQ(make_pattern('B', bigger)->requests.size(), 100U);
}

TEST(Patterns, C_BoundaryAttack) {
  auto p = make_pattern('C', PatternParams{});
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->requests.size(), 50U);
  EXPECT_EQ(p->requests.front().t_us, 0);
  EXPECT_EQ(p->requests[29].t_us, 2'900'000);  // last steady request: 2 + 9/10
  EXPECT_EQ(p->requests[30].t_us, 3'900'000);  // first attack request
  EXPECT_EQ(p->requests[39].t_us, 3'990'000);
  EXPECT_EQ(p->requests[40].t_us, 4'000'000);
  EXPECT_EQ(p->requests.back().t_us, 4'090'000);
  EXPECT_TRUE(sorted(*p));
  EXPECT_TRUE(p->token_starts_empty);
  for (size_t i = 0; i < p->requests.size(); ++i) EXPECT_EQ(p->requests[i].marked, i >= 30) << i;
}

TEST(Patterns, RejectsImpossibleParameters) {
  auto check = [](PatternParams p, const char* flag) {
    auto r = make_pattern('A', p);
    ASSERT_FALSE(r.ok()) << flag;
    EXPECT_NE(r.status().message().find(flag), std::string::npos) << r.status().message();
  };
  PatternParams p;
  p.poisson_rate = 0;
  check(p, "--poisson-rate");
  p = {};
  p.poisson_rate = -3;
  check(p, "--poisson-rate");
  p = {};
  p.poisson_duration_s = 0;
  check(p, "--poisson-duration");
  p = {};
  p.poisson_rate = 1e6;
  p.poisson_duration_s = 1e6;
  check(p, "--poisson-rate x --poisson-duration");
  p = {};
  p.burst_size = 0;
  check(p, "--burst-size");
  p = {};
  p.burst_start_s = -1;
  check(p, "--burst-start");
  p = {};
  p.burst_span_s = std::numeric_limits<double>::quiet_NaN();
  check(p, "--burst-span");
  EXPECT_FALSE(make_pattern('D', PatternParams{}).ok());
}

}  // namespace
}  // namespace ratelimit::sim
