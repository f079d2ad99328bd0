// adaptive_limit_test.cc — the estimators of adaptive concurrency limits
// (include/ratelimit/adaptive_limit.h): the shared vectors tests/vectors/adaptive_limit.json,
// then the stated bounds on random samples (min_limit <= limit <= max_limit; one sample moves
// gradient2/aimd down by at most 10 % and up by at most 0.8 / 1 unit, vegas by at most lg /
// beta), and the behaviour the policy relies on: rising latency brings the limit down, a return
// to the unloaded latency brings it back up, drops alone take it to min_limit.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "ratelimit/adaptive_limit.h"

namespace ratelimit::adaptive {
namespace {

using json = nlohmann::json;

json vectors() {
  std::ifstream in(std::string(RATELIMIT_VECTORS_DIR) + "/adaptive_limit.json");
  return json::parse(in);
}

AdaptiveConfig config_of(const json& j) {
  AdaptiveConfig c;
  c.estimator = *estimator_from_name(j.value("estimator", std::string("gradient2")));
  c.min_limit = j["min_limit"];
  c.initial_limit = j["initial_limit"];
  c.max_limit = j["max_limit"];
  c.window_us = j.value("window_us", int64_t{0});
  return c;
}

TEST(AdaptiveLimitVectors, Sequences) {
  const json v = vectors();  // held: a range-for over a temporary's member dangles
  ASSERT_FALSE(v["sequences"].empty());
  for (const json& seq : v["sequences"]) {
    SCOPED_TRACE(seq["name"].get<std::string>());
    const AdaptiveConfig c = config_of(seq["config"]);
    ASSERT_TRUE(validate(c).is_ok());
    AdaptiveState s = initial_state(c);
    if (seq.contains("state")) {
      const json& st = seq["state"];
      s.limit_m = st["limit_m"];
      s.long_rtt_ns = st["long_rtt_ns"];
      s.samples = st["samples"];
      s.noload_rtt_us = st["noload_rtt_us"];
      s.probe_count = st["probe_count"];
    }
    int step = 0;
    for (const json& x : seq["steps"]) {
      SCOPED_TRACE("step " + std::to_string(++step));
      const Sample sample{x["rtt_us"], x["inflight"], x["dropped"]};
      const int64_t got = x.contains("now_us") ? update_at(c, s, sample, x["now_us"]) : update(c, s, sample);
      const json& e = x["expect"];
      EXPECT_EQ(s.limit_m, e["limit_m"].get<int64_t>());
      EXPECT_EQ(got, e["limit_m"].get<int64_t>() / kMilli);
      if (e.contains("long_rtt_ns")) {
        EXPECT_EQ(s.long_rtt_ns, e["long_rtt_ns"].get<int64_t>());
      }
      if (e.contains("samples")) {
        EXPECT_EQ(s.samples, e["samples"].get<int64_t>());
      }
      if (e.contains("noload_rtt_us")) {
        EXPECT_EQ(s.noload_rtt_us, e["noload_rtt_us"].get<int64_t>());
      }
      if (e.contains("window_count")) {
        EXPECT_EQ(s.window_count, e["window_count"].get<int64_t>());
      }
      if (e.contains("window_end_us")) {
        EXPECT_EQ(s.window_end_us, e["window_end_us"].get<int64_t>());
      }
      if (e.contains("probe_count")) {
        EXPECT_EQ(s.probe_count, e["probe_count"].get<int64_t>());
      }
    }
  }
}

TEST(AdaptiveLimitVectors, Configs) {
  const json v = vectors();
  ASSERT_FALSE(v["configs"].empty());
  for (const json& j : v["configs"]) {
    SCOPED_TRACE(j.dump());
    const Status st = validate(config_of(j));
    const std::string want = j["expect"];
    if (want == "ok") {
      EXPECT_TRUE(st.is_ok()) << st.to_string();
    } else {
      ASSERT_FALSE(st.is_ok());
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
      EXPECT_EQ(st.message().rfind(want, 0), 0u) << st.message();
    }
  }
}

TEST(AdaptiveLimitVectors, Latencies) {
  const json v = vectors();
  ASSERT_FALSE(v["latencies"].empty());
  for (const json& j : v["latencies"]) {
    SCOPED_TRACE(j.dump());
    EXPECT_EQ(validate_latency_us(j["latency_us"]).is_ok(), j["ok"].get<bool>());
  }
}

TEST(AdaptiveLimit, EstimatorNames) {
  for (Estimator e : {Estimator::kGradient2, Estimator::kAimd, Estimator::kVegas}) {
    EXPECT_EQ(estimator_from_name(estimator_name(e)), e);
  }
  EXPECT_FALSE(estimator_from_name("Gradient2").has_value());
  EXPECT_FALSE(estimator_from_name("").has_value());
}

int64_t lg_of(int64_t limit_m) {
  int64_t lg = 0;
  for (int64_t n = limit_m / kMilli; n >= 10; n /= 10) ++lg;
  return std::max<int64_t>(1, lg);
}

// The header's bounds, on random samples (rtt 0 ... 1 s, inflight 0 ... 2·max, 10 % drops).
TEST(AdaptiveLimitProperties, BoundsHoldOnRandomSamples) {
  std::mt19937_64 rng(30);
  for (Estimator e : {Estimator::kGradient2, Estimator::kAimd, Estimator::kVegas}) {
    SCOPED_TRACE(std::string(estimator_name(e)));
    for (int run = 0; run < 200; ++run) {
      AdaptiveConfig c;
      c.estimator = e;
      c.min_limit = std::uniform_int_distribution<int64_t>(1, 50)(rng);
      c.max_limit = c.min_limit + std::uniform_int_distribution<int64_t>(0, 2000)(rng);
      c.initial_limit = std::uniform_int_distribution<int64_t>(c.min_limit, c.max_limit)(rng);
      ASSERT_TRUE(validate(c).is_ok());
      AdaptiveState s = initial_state(c);
      for (int i = 0; i < 500; ++i) {
        const Sample x{std::uniform_int_distribution<int64_t>(0, 1'000'000)(rng),
                       std::uniform_int_distribution<int64_t>(0, 2 * c.max_limit)(rng),
                       std::uniform_int_distribution<int>(0, 9)(rng) == 0};
        const int64_t before = s.limit_m;
        const int64_t lg = lg_of(before);
        update(c, s, x);
        ASSERT_GE(s.limit_m, c.min_limit * kMilli);
        ASSERT_LE(s.limit_m, c.max_limit * kMilli);
        const int64_t up = e == Estimator::kGradient2 ? 800 : e == Estimator::kAimd ? kMilli : 6 * lg * kMilli;
        ASSERT_LE(s.limit_m - before, up);
        if (e == Estimator::kVegas) {
          ASSERT_LE(before - s.limit_m, lg * kMilli);
        } else {
          ASSERT_GE(s.limit_m, std::min(before, before * 9 / 10));
        }
        if (x.dropped) {
          ASSERT_LE(s.limit_m, before);
        }
      }
    }
  }
}

// Latency rising under load brings the limit down; back to the unloaded latency, it recovers.
// A closed loop, one sample per step: the resource serves `capacity` at once in 20 ms; more in
// flight queue, so the round trip is 20 ms · max(1, inflight / capacity) (Little's law), and
// the client always fills the limit. Pure math: the figures are exact, not timings.
TEST(AdaptiveLimitProperties, FollowsTheResourcesConcurrency) {
  for (Estimator e : {Estimator::kGradient2, Estimator::kVegas, Estimator::kAimd}) {
    SCOPED_TRACE(std::string(estimator_name(e)));
    const AdaptiveConfig c{e, 1, 100, 200, 0};
    AdaptiveState s = initial_state(c);
    auto run = [&](int64_t capacity, int rounds) {
      int64_t lowest = limit(s);
      for (int i = 0; i < rounds; ++i) {
        const int64_t inflight = limit(s);
        const int64_t rtt = 20'000 * std::max(inflight, capacity) / capacity;
        // AIMD learns from drops only: the resource drops what waited over twice its service time.
        update(c, s, {rtt, inflight, e == Estimator::kAimd && rtt > 40'000});
        lowest = std::min(lowest, limit(s));
      }
      return lowest;
    };
    run(1000, 300);
    EXPECT_EQ(limit(s), 200) << "unloaded: the limit grows to max_limit";
    const int64_t lowest = run(20, 300);
    std::printf("%s: lowest %lld, after 300 overloaded samples %lld\n", std::string(estimator_name(e)).c_str(),
                static_cast<long long>(lowest), static_cast<long long>(limit(s)));
    // Gradient2 tolerates 1.5× the long-term round trip and adds 4: it settles near 1.5·20 + 4
    // units before its long-term average (per sample, here) starts following the overload.
    EXPECT_LE(lowest, 50) << "never came near the resource's 20 once latency rose";
    EXPECT_LE(limit(s), 100) << "climbed back within 300 overloaded samples";
    EXPECT_GE(lowest, 8);
    run(1000, 300);
    EXPECT_EQ(limit(s), 200) << "unloaded again: back to max_limit";
  }
}

TEST(AdaptiveLimitProperties, DropsAloneReachMinLimit) {
  for (Estimator e : {Estimator::kGradient2, Estimator::kAimd, Estimator::kVegas}) {
    const AdaptiveConfig c{e, 3, 150, 200};
    AdaptiveState s = initial_state(c);
    for (int i = 0; i < 200; ++i) update(c, s, {1000, 150, true});
    EXPECT_EQ(limit(s), 3) << estimator_name(e);
  }
}

}  // namespace
}  // namespace ratelimit::adaptive
