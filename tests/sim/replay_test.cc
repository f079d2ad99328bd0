// replay_test.cc — the replay engine's bookkeeping: input checks, independent keys, distinct
// limited clients, idle-key expiry that bounds memory without changing any decision, the
// token bucket's starting fill, peak windows, departures and chart data bounds.
#include "replay.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <numeric>

#include "py_random.h"

namespace ratelimit::sim {
namespace {

std::array<Policy, kAlgorithms> default_policies() { return *make_policies(PolicyParams{}); }

Replay make(std::optional<double> fill = std::nullopt, std::optional<int64_t> start = std::nullopt) {
  ReplayOptions o(default_policies());
  o.token_fill = fill;
  o.start_us = start;
  auto r = Replay::create(std::move(o));
  EXPECT_TRUE(r.ok()) << r.status().message();
  return std::move(*r);
}

TEST(Replay, RefusesTimeGoingBackwardsAndRecordsNothing) {
  Replay r = make();
  ASSERT_TRUE(r.add(10'000'000, "a").is_ok());
  const Status s = r.add(9'500'000, "a");
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("backwards"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("9.5"), std::string::npos) << s.message();
  EXPECT_EQ(r.report().requests, 1);
  EXPECT_TRUE(r.add(10'000'000, "a").is_ok());  // equal times are fine
}

TEST(Replay, RefusesInvalidRequests) {
  Replay r = make();
  EXPECT_FALSE(r.add(0, "").is_ok());
  EXPECT_FALSE(r.add(0, "a", 0).is_ok());
  EXPECT_FALSE(r.add(0, "a", kMaxCost + 1).is_ok());
  EXPECT_FALSE(r.add(-1, "a").is_ok());
  EXPECT_EQ(r.report().requests, 0);
}

TEST(Replay, KeysAreLimitedIndependently) {
  Replay r = make();
  for (int i = 0; i < 11; ++i) {
    ASSERT_TRUE(r.add(i * 1'000, "a").is_ok());
    ASSERT_TRUE(r.add(i * 1'000, "b").is_ok());
  }
  ASSERT_TRUE(r.add(20'000, "c").is_ok());
  const Report rep = r.report();
  const AlgorithmResult& fw = rep.algorithms[0];
  EXPECT_EQ(fw.requests, 23);
  EXPECT_EQ(fw.admitted, 21);  // 10 each for a and b, and c
  EXPECT_EQ(fw.clients_limited, 2);
  EXPECT_EQ(fw.peak_admitted, 21);  // all keys together: what the backend sees
}

TEST(Replay, CostAboveCapacityIsDeniedWhole) {
  Replay r = make();
  ASSERT_TRUE(r.add(0, "a", 25).is_ok());
  ASSERT_TRUE(r.add(0, "a", 5).is_ok());
  const Report rep = r.report();
  for (const AlgorithmResult& a : rep.algorithms) {
    EXPECT_EQ(a.requests, 2);
    EXPECT_EQ(a.denied, 1) << algorithm_name(a.policy.algorithm());
    EXPECT_EQ(a.admitted, 1);
  }
}

TEST(Replay, ClientsLimitedCountsEachKeyOnceAndIdleKeysExpire) {
  Replay r = make();
  auto burst = [&](int64_t t) {
    for (int i = 0; i < 25; ++i) ASSERT_TRUE(r.add(t, "hot").is_ok());
  };
  burst(0);
  // 10000 one-off clients, 1 ms apart: each is idle (state equal to a fresh one) 2 s after
  // its request at the latest, so the engine may drop it.
  for (int i = 0; i < 10'000; ++i) {
    ASSERT_TRUE(r.add(1'000 + i * 1'000LL, "client-" + std::to_string(i)).is_ok());
  }
  burst(20'000'000);  // "hot" was dropped long ago and comes back, limited again
  const Report rep = r.report();
  for (const AlgorithmResult& a : rep.algorithms) {
    EXPECT_EQ(a.clients_limited, 1) << algorithm_name(a.policy.algorithm());
  }
  EXPECT_LE(rep.peak_live_keys, 4096);
  EXPECT_LE(r.live_keys(), 4096U);
}

// Expiry must not change a single decision. Reference: the library's own algo::decide on a
// map that never forgets a key, with the same starting states (this checks the engine's
// bookkeeping — eviction and re-creation — not the math, which both sides share).
TEST(Replay, ExpiryAndStartingFillGiveTheSameDecisionsAsNeverForgetting) {
  const auto policies = default_policies();
  for (std::optional<double> fill : {std::optional<double>(), std::optional<double>(0.0),
                                     std::optional<double>(7.5)}) {
    Replay r = make(fill, 0);
    std::map<std::string, std::array<algo::AlgorithmState, kAlgorithms>> states;
    std::array<int64_t, kAlgorithms> admitted{};
    PyRandom rng(1234);
    double t = 0;
    for (int i = 0; i < 60'000; ++i) {
      t += rng.expovariate(2'000);  // 2000 requests/s over 30 s
      // Few heavy keys and many light ones, so keys go idle and come back.
      const double pool = rng.random() < 0.5 ? 20 : 20'000;
      const auto k = static_cast<int>(rng.random() * pool);
      const std::string key = "k" + std::to_string(k);
      const int64_t now = std::llround(t * 1e6);
      const int64_t cost = rng.random() < 0.1 ? 3 : 1;
      ASSERT_TRUE(r.add(now, key, cost).is_ok());
      auto it = states.find(key);
      if (it == states.end()) {
        std::array<algo::AlgorithmState, kAlgorithms> s;
        for (size_t a = 0; a < kAlgorithms; ++a) s[a] = algo::fresh_state(policies[a]);
        if (fill) s[3] = algo::TokenBucketState{20 * algo::kUnit - std::llround(*fill * 1e6), 0};
        it = states.emplace(key, s).first;
      }
      for (size_t a = 0; a < kAlgorithms; ++a) {
        admitted[a] += algo::decide(policies[a], it->second[a], now, cost, algo::Op::kAcquire).allowed;
      }
    }
    const Report rep = r.report();
    EXPECT_LT(rep.peak_live_keys, static_cast<int64_t>(states.size()));  // expiry did happen
    for (size_t a = 0; a < kAlgorithms; ++a) {
      EXPECT_EQ(rep.algorithms[a].admitted, admitted[a])
          << algorithm_name(policies[a].algorithm()) << " fill " << fill.value_or(-1);
    }
  }
}

TEST(Replay, TokenFillIsValidated) {
  for (double bad : {-1.0, 20.5, std::numeric_limits<double>::infinity(),
                     std::numeric_limits<double>::quiet_NaN()}) {
    ReplayOptions o(default_policies());
    o.token_fill = bad;
    auto r = Replay::create(std::move(o));
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("--token-fill"), std::string::npos);
  }
  ReplayOptions o(default_policies());
  o.peak_window = Micros{0};
  EXPECT_FALSE(Replay::create(std::move(o)).ok());
}

TEST(Replay, TokenFillAppliesAtTheRunStartAndRefillsFromThere) {
  // Empty at 0; a request at 0.25 s finds 2.5 tokens: two admitted, the third denied.
  Replay r = make(0.0, 0);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(r.add(250'000, "a").is_ok());
  // A key first seen later has been refilling since the start too: full by 2 s.
  for (int i = 0; i < 21; ++i) ASSERT_TRUE(r.add(2'000'000, "b").is_ok());
  const Report rep = r.report();
  const AlgorithmResult& tb = rep.algorithms[3];
  EXPECT_EQ(tb.admitted, 2 + 20);
}

TEST(Replay, PeakWindowCanBeSetForEveryAlgorithm) {
  ReplayOptions o(default_policies());
  o.peak_window = Micros{100'000};
  auto r = Replay::create(std::move(o));
  ASSERT_TRUE(r.ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(r->add(i * 50'000, "a").is_ok());  // 0, 50, ..., 200 ms
  const Report rep = r->report();
  for (const AlgorithmResult& a : rep.algorithms) {
    EXPECT_EQ(a.peak_window, Micros{100'000});
    EXPECT_EQ(a.peak_admitted, 2);  // [s, s + 100 ms) holds two of them
  }
}

TEST(Replay, DeparturesListIsBoundedButTotalsStayExact) {
  ReplayOptions o(default_policies());
  o.max_departures = 3;
  o.max_chart_requests = 4;
  auto r = Replay::create(std::move(o));
  ASSERT_TRUE(r.ok());
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(r->add(i * 200'000, "a").is_ok());
  const Report rep = r->report();
  const AlgorithmResult& leaky = rep.algorithms[4];
  EXPECT_EQ(leaky.departures, 10);
  EXPECT_EQ(leaky.departure_list_us.size(), 3U);
  EXPECT_EQ(leaky.first_departure_us, 100'000);            // level 1 at 10/s: 0.1 s
  EXPECT_EQ(leaky.last_departure_us, 9 * 200'000 + 100'000);
  EXPECT_FALSE(rep.chart.complete);  // more requests than the chart keeps one by one
  for (const ChartLane& lane : rep.chart.lanes) {
    EXPECT_TRUE(lane.admitted_us.empty());
    const int64_t sum = std::accumulate(lane.bins.admitted.begin(), lane.bins.admitted.end(), 0LL) +
                        std::accumulate(lane.bins.denied.begin(), lane.bins.denied.end(), 0LL);
    EXPECT_EQ(sum, 10);
  }
}

TEST(RateBins, MergeKeepsCountsAndBoundsMemory) {
  RateBins b;
  int64_t total = 0;
  for (int64_t t = 0; t < 3'600'000'000LL; t += 7'000'000) {  // an hour, every 7 s
    b.add(t, t % 2 == 0);
    ++total;
  }
  EXPECT_LE(b.admitted.size(), RateBins::kMaxBins);
  const int64_t sum = std::accumulate(b.admitted.begin(), b.admitted.end(), 0LL) +
                      std::accumulate(b.denied.begin(), b.denied.end(), 0LL);
  EXPECT_EQ(sum, total);
  EXPECT_GE(b.width_us * static_cast<int64_t>(RateBins::kMaxBins), 3'600'000'000LL - 7'000'000);
}

// The simulator's lanes are the rate rows of the algorithm table, in its order.
TEST(Policies, OneLanePerRateAlgorithmInTableOrder) {
  static_assert(kAlgorithms == kRateAlgorithmCount);
  const auto p = default_policies();
  for (size_t i = 0; i < kAlgorithms; ++i) {
    EXPECT_EQ(algorithm_index(p[i].algorithm()), i);
    EXPECT_EQ(algorithm_info(p[i].algorithm()).kind, AlgorithmKind::kRate);
  }
}

TEST(Policies, DescribedAndValidated) {
  const auto p = default_policies();
  EXPECT_EQ(describe_policy(p[0]), "10 per 1s");
  EXPECT_EQ(describe_policy(p[3]), "10/s burst 20");
  PolicyParams bad;
  bad.window_limit = 0;
  auto r = make_policies(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--limit"), std::string::npos);
  bad = {};
  bad.token_rate = -1;
  EXPECT_NE(make_policies(bad).status().message().find("--token-rate"), std::string::npos);
  bad = {};
  bad.leaky_burst = 0;
  EXPECT_NE(make_policies(bad).status().message().find("--leaky-burst"), std::string::npos);
  bad = {};
  bad.window = Micros{10};
  EXPECT_FALSE(make_policies(bad).ok());
}

}  // namespace
}  // namespace ratelimit::sim
