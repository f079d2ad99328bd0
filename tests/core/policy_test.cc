// policy_test.cc — bad input gives an error value, never a crash or a half-valid Policy:
// limits, windows, rates, bursts, overflow of limit x window, the sliding log's cap, costs,
// names, keys, acquire_all preconditions and durations. Also the parameter-derived values a
// user sees (default names, a bucket's window).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <string>

#include "core_test_util.h"
#include "ratelimit/algorithms.h"
#include "ratelimit/policy.h"
#include "ratelimit/store.h"

namespace ratelimit {
namespace {

using testing::must;

constexpr Micros kSecond{1'000'000};
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void expect_invalid(const Result<Policy>& r, const std::string& mentions) {
  ASSERT_FALSE(r.ok()) << "accepted: " << r->name();
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(mentions), std::string::npos) << r.status().message();
}

using WindowFactory = Result<Policy> (*)(int64_t, Micros);
constexpr WindowFactory kWindowFactories[] = {&Policy::fixed_window, &Policy::sliding_window_log,
                                              &Policy::sliding_window_counter};

TEST(PolicyValidation, LimitMustBeBetweenOneAndTheMaximum) {
  for (WindowFactory make : kWindowFactories) {
    expect_invalid(make(0, kSecond), "limit");
    expect_invalid(make(-1, kSecond), "limit");
    expect_invalid(make(std::numeric_limits<int64_t>::min(), kSecond), "limit");
    expect_invalid(make(kMaxLimit + 1, kSecond), "limit");
    expect_invalid(make(std::numeric_limits<int64_t>::max(), kSecond), "limit");
    EXPECT_TRUE(make(1, kSecond).ok());
  }
  EXPECT_TRUE(Policy::fixed_window(kMaxLimit, Micros{1000}).ok());
  EXPECT_TRUE(Policy::sliding_window_counter(kMaxLimit, Micros{1000}).ok());
}

TEST(PolicyValidation, WindowMustBeAtLeastOneMillisecondAndAtMost366Days) {
  for (WindowFactory make : kWindowFactories) {
    expect_invalid(make(10, Micros{999}), "window");
    expect_invalid(make(10, Micros{0}), "window");
    expect_invalid(make(10, Micros{-1'000'000}), "window");
    expect_invalid(make(1, kMaxWindow + Micros{1}), "window");
    EXPECT_TRUE(make(10, kMinWindow).ok());
    EXPECT_TRUE(make(1, kMaxWindow).ok());
  }
}

TEST(PolicyValidation, CounterLimitTimesWindowMustStayExactInADouble) {
  // Only the sliding counter multiplies counts by window lengths: (limit + 1) * window_us <=
  // 2^53, so 100,000 per day fits and a billion per day does not. The fixed window and the
  // log never multiply, so they take the largest limits and windows.
  const Micros day{86'400'000'000};
  EXPECT_TRUE(Policy::sliding_window_counter(100'000, day).ok());
  expect_invalid(Policy::sliding_window_counter(100'000, Micros{366LL * 86'400'000'000}),
                 "overflows");
  expect_invalid(Policy::sliding_window_counter(kMaxLimit, day), "overflows");
  EXPECT_TRUE(Policy::fixed_window(kMaxLimit, kMaxWindow).ok());
  EXPECT_TRUE(Policy::sliding_window_log(kMaxSlidingLogLimit, kMaxWindow).ok());
  // 2^53 / 86,400,000,000 = 104,249.99...: (104,248 + 1) * day fits, (104,249 + 1) * day not.
  EXPECT_TRUE(Policy::sliding_window_counter(104'248, day).ok());
  expect_invalid(Policy::sliding_window_counter(104'249, day), "overflows");
}

TEST(PolicyValidation, SlidingLogLimitIsCapped) {
  EXPECT_TRUE(Policy::sliding_window_log(kMaxSlidingLogLimit, kSecond).ok());
  expect_invalid(Policy::sliding_window_log(kMaxSlidingLogLimit + 1, kSecond),
                 "sliding_window_counter");  // the message suggests the alternative
  // The other window algorithms take the same limit.
  EXPECT_TRUE(Policy::sliding_window_counter(kMaxSlidingLogLimit + 1, kSecond).ok());
}

using BucketFactory = Result<Policy> (*)(double, int64_t);
Result<Policy> leaky_police(double r, int64_t b) { return Policy::leaky_bucket(r, b); }
Result<Policy> leaky_shape(double r, int64_t b) {
  return Policy::leaky_bucket(r, b, LeakyMode::kShape);
}
constexpr BucketFactory kBucketFactories[] = {&Policy::token_bucket, &leaky_police, &leaky_shape};

TEST(PolicyValidation, RateMustBeFiniteAndInRange) {
  for (BucketFactory make : kBucketFactories) {
    expect_invalid(make(0, 10), "rate");
    expect_invalid(make(-1, 10), "rate");
    expect_invalid(make(-0.0, 10), "rate");
    expect_invalid(make(kNaN, 10), "rate");
    expect_invalid(make(kInf, 10), "rate");
    expect_invalid(make(-kInf, 10), "rate");
    expect_invalid(make(kMinRate / 2, 1), "rate");
    expect_invalid(make(kMaxRate * 1.5, 1), "rate");
    expect_invalid(make(std::numeric_limits<double>::denorm_min(), 1), "rate");
    EXPECT_TRUE(make(kMinRate, 1).ok());
    EXPECT_TRUE(make(kMaxRate, kMaxLimit).ok());
    EXPECT_TRUE(make(0.7, 3).ok());
  }
}

TEST(PolicyValidation, BurstMustBeBetweenOneAndTheMaximum) {
  for (BucketFactory make : kBucketFactories) {
    expect_invalid(make(10, 0), "burst");
    expect_invalid(make(10, -5), "burst");
    expect_invalid(make(10, kMaxLimit + 1), "burst");
    EXPECT_TRUE(make(10, 1).ok());
  }
}

TEST(PolicyValidation, DrainTimeOfTheBucketMustFit) {
  // burst / rate over ~140 years cannot be expressed exactly in microseconds.
  for (BucketFactory make : kBucketFactories) {
    expect_invalid(make(kMinRate, kMaxLimit), "too long");
    expect_invalid(make(1e-3, 10'000'000), "too long");
    EXPECT_TRUE(make(1e-3, 1'000'000).ok());
  }
}

TEST(PolicyValidation, BadInputInNamesAndAlgorithms) {
  Policy p = must(Policy::token_bucket(10, 20));
  EXPECT_FALSE(p.with_name("").ok());
  EXPECT_FALSE(p.with_name(std::string(kMaxPolicyNameLength + 1, 'a')).ok());
  EXPECT_TRUE(p.with_name(std::string(kMaxPolicyNameLength, 'a')).ok());
  for (const char* bad : {"a b", "a/b", "a\nb", "caf\xc3\xa9", "a{b}", "*"}) {
    EXPECT_FALSE(p.with_name(bad).ok()) << bad;
  }
  EXPECT_FALSE(p.with_name(std::string("a\0b", 3)).ok());
  Result<Policy> named = p.with_name("api:v1.login-attempts_2");
  ASSERT_TRUE(named.ok());
  EXPECT_EQ(named->name(), "api:v1.login-attempts_2");
  EXPECT_EQ(named->rate(), 10);  // renaming keeps the parameters

  for (Algorithm a : {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog,
                      Algorithm::kSlidingWindowCounter, Algorithm::kTokenBucket,
                      Algorithm::kLeakyBucket}) {
    Result<Algorithm> back = parse_algorithm(algorithm_name(a));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, a);
  }
  for (const char* bad : {"", "Fixed_Window", "fixed-window", "gcra", "token_bucket "}) {
    Result<Algorithm> r = parse_algorithm(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  }
}

TEST(PolicyValidation, DefaultNamesDifferWheneverParametersDiffer) {
  const std::vector<Policy> all = {
      must(Policy::fixed_window(10, kSecond)),
      must(Policy::fixed_window(10, Micros{1'000'001})),
      must(Policy::fixed_window(11, kSecond)),
      must(Policy::sliding_window_log(10, kSecond)),
      must(Policy::sliding_window_counter(10, kSecond)),
      must(Policy::token_bucket(10, 20)),
      must(Policy::token_bucket(10.5, 20)),
      must(Policy::token_bucket(10, 21)),
      must(Policy::leaky_bucket(10, 20)),
      must(Policy::leaky_bucket(10, 20, LeakyMode::kShape)),
      must(Policy::token_bucket(0.1, 20)),
      must(Policy::token_bucket(0.1000000001, 20)),
  };
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_TRUE(validate_policy_name(all[i].name()).is_ok()) << all[i].name();
    for (size_t j = 0; j < i; ++j) EXPECT_NE(all[i].name(), all[j].name());
  }
}

TEST(PolicyValidation, BucketWindowIsTheTimeToDrainAFullBucket) {
  EXPECT_EQ(must(Policy::token_bucket(10, 20)).window(), Micros{2'000'000});
  EXPECT_EQ(must(Policy::token_bucket(3, 1)).window(), Micros{333'334});
  EXPECT_EQ(must(Policy::leaky_bucket(0.7, 1)).window(), Micros{1'428'572});
  EXPECT_EQ(must(Policy::fixed_window(5, kSecond)).rate(), 0);
}

TEST(PolicyValidation, CountDeniedIsACopyFlag) {
  Policy p = must(Policy::fixed_window(5, kSecond));
  Policy q = p.with_count_denied();
  EXPECT_FALSE(p.count_denied());
  EXPECT_TRUE(q.count_denied());
  EXPECT_FALSE(q.with_count_denied(false).count_denied());
  EXPECT_EQ(q.with_count_denied(false), p);
}

TEST(CostValidation, CostMustBeBetweenOneAndTheMaximum) {
  for (int64_t bad : {int64_t{0}, int64_t{-1}, kMaxCost + 1, std::numeric_limits<int64_t>::max(),
                      std::numeric_limits<int64_t>::min()}) {
    Status s = validate_cost(bad);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("cost"), std::string::npos);
  }
  EXPECT_TRUE(validate_cost(1).is_ok());
  EXPECT_TRUE(validate_cost(kMaxCost).is_ok());
}

TEST(CostValidation, TheLargestCostAgainstTheLargestPoliciesIsExact) {
  // kMaxCost against every algorithm at its largest capacity: no overflow in cost * 1e6 etc.
  const std::vector<Policy> big = {
      must(Policy::fixed_window(kMaxLimit, Micros{1000})),
      must(Policy::sliding_window_counter(kMaxLimit, Micros{1000})),
      must(Policy::token_bucket(kMaxRate, kMaxLimit)),
      must(Policy::leaky_bucket(kMaxRate, kMaxLimit, LeakyMode::kShape)),
      must(Policy::token_bucket(kMinRate, 1)),
  };
  for (const Policy& p : big) {
    algo::AlgorithmState s = algo::fresh_state(p);
    Decision d = algo::decide(p, s, 1'700'000'000'000'000, kMaxCost, algo::Op::kAcquire);
    testing::expect_decision_invariants(p, kMaxCost, d);
    EXPECT_EQ(d.allowed, p.limit() >= kMaxCost) << p.name();
    Decision again = algo::decide(p, s, 1'700'000'000'000'000, kMaxCost, algo::Op::kAcquire);
    testing::expect_decision_invariants(p, kMaxCost, again);
    EXPECT_FALSE(again.allowed);
  }
}

TEST(KeyValidation, KeysAreOneTo512BytesOfAnything) {
  EXPECT_FALSE(validate_key("").is_ok());
  EXPECT_TRUE(validate_key(std::string(kMaxKeyLength, 'k')).is_ok());
  EXPECT_FALSE(validate_key(std::string(kMaxKeyLength + 1, 'k')).is_ok());
  EXPECT_TRUE(validate_key(std::string("\0\xff{tag}:*", 9)).is_ok());
}

TEST(KeyValidation, AcquireAllPreconditions) {
  Policy a = must(must(Policy::fixed_window(5, kSecond)).with_name("a"));
  Policy b = must(must(Policy::token_bucket(1, 5)).with_name("b"));
  std::vector<Policy> ok = {a, b};
  EXPECT_TRUE(validate_acquire_all(ok, "k", 1).is_ok());
  EXPECT_FALSE(validate_acquire_all({}, "k", 1).is_ok());
  std::vector<Policy> twice = {a, b, a};
  Status dup = validate_acquire_all(twice, "k", 1);
  EXPECT_FALSE(dup.is_ok());
  EXPECT_NE(dup.message().find("'a'"), std::string::npos);
  std::vector<Policy> many;
  for (size_t i = 0; i <= kMaxPoliciesPerCall; ++i) {
    many.push_back(must(a.with_name("p" + std::to_string(i))));
  }
  EXPECT_FALSE(validate_acquire_all(many, "k", 1).is_ok());
  many.pop_back();
  EXPECT_TRUE(validate_acquire_all(many, "k", 1).is_ok());
  EXPECT_FALSE(validate_acquire_all(ok, "", 1).is_ok());
  EXPECT_FALSE(validate_acquire_all(ok, "k", 0).is_ok());
}

struct DurationCase {
  const char* text;
  int64_t us;  // -1: must be refused
};

TEST(ParseDuration, AcceptsAWholeNumberAndAUnit) {
  const DurationCase cases[] = {
      {"250us", 250},
      {"500ms", 500'000},
      {"1s", 1'000'000},
      {"60s", 60'000'000},
      {"1m", 60'000'000},
      {"1h", 3'600'000'000},
      {"2d", 172'800'000'000},
      {"0001s", 1'000'000},
      {"9223372036854775807us", std::numeric_limits<int64_t>::max()},
  };
  for (const auto& c : cases) {
    Result<Micros> r = parse_duration(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.status().to_string();
    EXPECT_EQ(r->count(), c.us) << c.text;
  }
}

TEST(ParseDuration, RefusesEverythingElseNamingTheText) {
  for (const char* bad : {"", "s", "ms", "10", "0s", "0ms", "-1s", "+1s", " 1s", "1s ", "1 s",
                          "1.5s", "1e3ms", "1S", "1sec", "1min", "1w", "1y", "1ns", "0x10s",
                          "106751992d", "99999999999999999999s", "1h30m", "1sms"}) {
    Result<Micros> r = parse_duration(bad);
    ASSERT_FALSE(r.ok()) << "accepted '" << bad << "' as " << r->count() << "us";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(std::string("'") + bad + "'"), std::string::npos)
        << r.status().message();
  }
}

TEST(Names, DecisionReasonsAndStatusCodesHaveStableNames) {
  EXPECT_STREQ(decision_reason_name(DecisionReason::kWithinLimit), "within_limit");
  EXPECT_STREQ(decision_reason_name(DecisionReason::kOverLimit), "over_limit");
  EXPECT_STREQ(decision_reason_name(DecisionReason::kExceedsCapacity), "exceeds_capacity");
  EXPECT_STREQ(decision_reason_name(DecisionReason::kStoreFailedOpen), "failed_open");
  EXPECT_STREQ(decision_reason_name(DecisionReason::kStoreFailedClosed), "failed_closed");
  EXPECT_EQ(Status::invalid_argument("limit must be >= 1").to_string(),
            "invalid_argument: limit must be >= 1");
  EXPECT_EQ(Status().to_string(), "ok");
}


// A caller's own limit (ratelimitd's per-request `limit`): the same policy with another
// capacity keeps the name (so the same keys) and the state's meaning, so a key keeps its count
// when its limit is raised mid-window, and its idle time does not move.
TEST(PolicyWithLimit, KeepsEverythingButTheCapacity) {
  using namespace std::chrono_literals;
  const Policy base = Policy::sliding_window_counter(10, 60s)->with_name("tenant").value().with_count_denied();
  auto raised = base.with_limit(1000);
  ASSERT_TRUE(raised.ok()) << raised.status().to_string();
  EXPECT_EQ(raised->limit(), 1000);
  EXPECT_EQ(raised->name(), "tenant");
  EXPECT_EQ(raised->name_hash(), base.name_hash());
  EXPECT_EQ(raised->window(), base.window());
  EXPECT_TRUE(raised->count_denied());
  EXPECT_EQ(raised->algorithm(), Algorithm::kSlidingWindowCounter);

  const Policy bucket = Policy::leaky_bucket(5, 10, LeakyMode::kShape)->with_name("b").value();
  auto bigger = bucket.with_limit(20);
  ASSERT_TRUE(bigger.ok());
  EXPECT_EQ(bigger->limit(), 20);
  EXPECT_EQ(bigger->rate(), 5);
  EXPECT_EQ(bigger->leaky_mode(), LeakyMode::kShape);
  EXPECT_EQ(bigger->name(), "b");
}

TEST(PolicyWithLimit, RaisingMidWindowKeepsTheCount) {
  using namespace std::chrono_literals;
  const int64_t t0 = 1'700'000'000'000'000;
  for (auto make : {Policy::fixed_window, Policy::sliding_window_log, Policy::sliding_window_counter}) {
    const Policy small = make(3, 60s)->with_name("tenant").value();
    const Policy large = small.with_limit(5).value();
    algo::AlgorithmState s = algo::fresh_state(small);
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(algo::decide(small, s, t0 + i, 1, algo::Op::kAcquire).allowed);
    EXPECT_FALSE(algo::decide(small, s, t0 + 3, 1, algo::Op::kAcquire).allowed);
    EXPECT_EQ(algo::idle_at_us(small, s), algo::idle_at_us(large, s));
    // The plan grows to 5: the 3 already counted stay counted, 2 more pass.
    Decision d = algo::decide(large, s, t0 + 4, 1, algo::Op::kAcquire);
    EXPECT_TRUE(d.allowed);
    EXPECT_EQ(d.limit, 5);
    EXPECT_EQ(d.remaining, 1);
    EXPECT_TRUE(algo::decide(large, s, t0 + 5, 1, algo::Op::kAcquire).allowed);
    EXPECT_FALSE(algo::decide(large, s, t0 + 6, 1, algo::Op::kAcquire).allowed);
  }
  const Policy tb = Policy::token_bucket(1, 2)->with_name("tb").value();
  algo::AlgorithmState s = algo::fresh_state(tb);
  EXPECT_TRUE(algo::decide(tb, s, t0, 2, algo::Op::kAcquire).allowed);
  const Policy tb4 = tb.with_limit(4).value();
  EXPECT_EQ(algo::idle_at_us(tb, s), algo::idle_at_us(tb4, s));
  Decision d = algo::decide(tb4, s, t0, 2, algo::Op::kAcquire);  // 2 taken of 4: 2 more fit
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.remaining, 0);
}

TEST(PolicyWithLimit, RefusesWhatTheFactoriesRefuse) {
  using namespace std::chrono_literals;
  const Policy log = Policy::sliding_window_log(10, 60s)->with_name("log").value();
  EXPECT_FALSE(log.with_limit(0).ok());
  EXPECT_FALSE(log.with_limit(kMaxSlidingLogLimit + 1).ok());
  EXPECT_FALSE(Policy::token_bucket(1, 2)->with_limit(kMaxLimit + 1).ok());
  const Policy day = Policy::sliding_window_counter(10, 24h)->with_name("day").value();
  EXPECT_FALSE(day.with_limit(200'000).ok());  // (L + 1) * W above 2^53 us
  // Consistency settings are kept, and checked against the new capacity (lease_max <= limit).
  ConsistencyOptions lease;
  lease.mode = Consistency::kLease;
  lease.lease_max = 50;
  const Policy leased = Policy::fixed_window(100, 1s)->with_name("leased")->with_consistency(lease).value();
  auto more = leased.with_limit(200);
  ASSERT_TRUE(more.ok()) << more.status().to_string();
  EXPECT_EQ(more->consistency(), lease);
  EXPECT_FALSE(leased.with_limit(10).ok());
}

}  // namespace
}  // namespace ratelimit

namespace ratelimit {
namespace {

std::string message_of(const Result<Policy>& r) { return r.ok() ? "accepted" : r.status().message(); }

// The exact range messages: config files, the envoyproxy/ratelimit loader and their tests show
// them to users verbatim, so one table in policy.cc must keep every word.
TEST(PolicyValidation, RangeMessagesAreExact) {
  EXPECT_EQ(message_of(Policy::fixed_window(0, kSecond)),
            "limit must be between 1 and 1000000000, got 0");
  EXPECT_EQ(message_of(Policy::token_bucket(1, 1'000'000'001)),
            "burst must be between 1 and 1000000000, got 1000000001");
  EXPECT_EQ(message_of(Policy::fixed_window_every_hit(-1, kSecond)),
            "limit must be between 0 and 4294967295, got -1");
  EXPECT_EQ(message_of(Policy::sliding_window_counter(5, Micros{999})),
            "window must be between 1ms and 366d, got 999us");
  EXPECT_EQ(message_of(Policy::fixed_window_every_hit(5, kMaxWindow + Micros{1})),
            "window must be between 1ms and 366d, got 31622400000001us");
  EXPECT_EQ(message_of(Policy::concurrency(5, Micros{25LL * 3600 * 1'000'000})),
            "lease_ttl must be between 1ms and 1d, got 90000000000us");
  const Policy fw = must(Policy::fixed_window(100, kSecond));
  ConsistencyOptions o;
  o.mode = Consistency::kLease;
  o.sync_interval = Micros{61'000'000};
  EXPECT_EQ(message_of(fw.with_consistency(o)),
            "sync_interval must be between 1ms and 1m, got 61000000us");
  o.sync_interval = Micros{100'000};
  o.lease_ttl = Micros{500};
  EXPECT_EQ(message_of(fw.with_consistency(o)),
            "lease_ttl must be between 1ms and 1h, got 500us");
  o.lease_ttl = Micros{1'000'000};
  o.lease_max = 101;
  EXPECT_EQ(message_of(fw.with_consistency(o)),
            "lease_max must be between 0 (default: limit / 20) and the limit (100), got 101");
  EXPECT_EQ(validate_cost(0).message(), "cost must be between 1 and 1000000000, got 0");
  EXPECT_EQ(message_of(Policy::concurrency(100'001, kSecond)),
            "a concurrency policy keeps one entry per lease held, so its limit is capped at "
            "100000 (got 100001)");
}

}  // namespace
}  // namespace ratelimit
