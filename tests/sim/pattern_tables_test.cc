// pattern_tables_test.cc — the tables of patterns A, B and C, for every algorithm, against
// values derived independently of the C++ code: by hand for B and C (derivations below), and
// for A by tests/sim/textbook_algorithms.py, a short Python reference with exact rationals
// that shares no code with the library (run live, so it cannot go stale; python3 is a
// dependency of the project, see scripts/deps.sh). The same script cross-checks B and C.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "run.h"
#include "sim_test_util.h"

namespace ratelimit::sim {
namespace {

using testing::read_file;
using testing::run_command;
using testing::ScratchDir;

Report run_pattern(char name, TokenFill fill = {}, uint64_t seed = 42) {
  RunOptions o;
  o.patterns = {name};
  o.token_fill = fill;
  o.pattern.seed = seed;
  auto r = simulate(o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r->front() : Report{};
}

const AlgorithmResult& alg(const Report& r, const std::string& name) {
  for (const AlgorithmResult& a : r.algorithms) {
    if (name == algorithm_name(a.policy.algorithm())) return a;
  }
  ADD_FAILURE() << "no row for " << name;
  return r.algorithms.front();
}

struct Row {
  int64_t admitted;
  int64_t denied;
  int64_t clients_limited;
  int64_t peak;  // peak admitted in the policy's window (1 s; buckets: 20 / 10/s = 2 s)
  int64_t attack_admitted;
};

void expect_row(const Report& r, const std::string& name, const Row& want) {
  SCOPED_TRACE(r.title + " " + name);
  const AlgorithmResult& a = alg(r, name);
  EXPECT_EQ(a.requests, r.requests);
  EXPECT_EQ(a.admitted, want.admitted);
  EXPECT_EQ(a.denied, want.denied);
  EXPECT_EQ(a.clients_limited, want.clients_limited);
  EXPECT_EQ(a.peak_admitted, want.peak);
  EXPECT_EQ(a.marked_admitted, want.attack_admitted);
  EXPECT_EQ(a.peak_window, a.policy.is_bucket() ? Micros{2'000'000} : Micros{1'000'000});
}

// Pattern B: 30 requests at t_i = 5 + i * 0.02 / 30 s, i = 0..29 (0.667 ms apart; the whole
// burst lies in [5, 5.02), inside the one window [5 s, 6 s)). One client.
//  - fixed_window (10 per 1 s): the window [5, 6) is empty before the burst: requests 0..9
//    are admitted, 10..29 denied. 10 admitted, 20 denied, peak 10.
//  - sliding_window_log: nothing in (t - 1 s, t] before the burst: the first 10 are admitted,
//    then 10 entries stay in the log for the rest of the burst (they expire from 6 s on).
//    10 / 20, peak 10.
//  - sliding_window_counter: window [4, 5) had no requests (prev = 0), so est = curr: the
//    first 10 admitted, the rest see est = 10. 10 / 20, peak 10.
//  - token_bucket (10/s, burst 20, starts full): tokens before request i, all earlier
//    admitted, are 20 - i + 10 * (t_i - 5) = 20 - i + i/150 (t_i - 5 = i/1500 s). Admitted
//    while >= 1: i = 19 has 1 + 19/150 >= 1; i = 20 has 20/150 < 1. Later requests only see
//    the refill 10 * (t_i - t_19) < 1 (t_29 - t_19 = 6.7 ms -> 0.067 tokens... plus the
//    0.127 left: under 0.2). 20 admitted, 10 denied, peak 20.
//  - leaky_bucket (10/s, burst 20, starts empty): level before request i, all earlier
//    admitted, is i - 10 * (t_i - 5) = i - i/150 = 149 i / 150. Admitted while
//    floor(level) + 1 <= 20, i.e. level < 20: i = 20 has 19.87 (admitted, level 20.87 after);
//    i = 21 sees 20.87 - 0.0067 > 20 and every later one more than 20.8. 21 admitted, 9
//    denied, peak 21.
//    Departures t_i + level_after / 10 = 5 + i/1500 + (i + 1 - i/150) / 10 = 5 + (i + 1)/10:
//    5.1, 5.2, ..., 7.1 s — 21 departures spanning 2 s: the burst leaves at the leak rate.
TEST(PatternTables, B_ByHand) {
  const Report r = run_pattern('B');
  ASSERT_EQ(r.requests, 30);
  expect_row(r, "fixed_window", {10, 20, 1, 10, 0});
  expect_row(r, "sliding_window_log", {10, 20, 1, 10, 0});
  expect_row(r, "sliding_window_counter", {10, 20, 1, 10, 0});
  expect_row(r, "token_bucket", {20, 10, 1, 20, 0});
  expect_row(r, "leaky_bucket", {21, 9, 1, 21, 0});
  const AlgorithmResult& leaky = alg(r, "leaky_bucket");
  ASSERT_EQ(leaky.departures, 21);
  ASSERT_EQ(leaky.departure_list_us.size(), 21U);
  for (int i = 0; i < 21; ++i) {
    EXPECT_EQ(leaky.departure_list_us[static_cast<size_t>(i)], 5'000'000 + (i + 1) * 100'000) << i;
  }
  EXPECT_EQ(leaky.first_departure_us, 5'100'000);
  EXPECT_EQ(leaky.last_departure_us, 7'100'000);
}

// Pattern C: steady 10/s at w + i/10 (w = 0, 1, 2; i = 0..9), then the attack: 10 requests at
// 3.90, 3.91, ..., 3.99 and 10 at 4.00, ..., 4.09. One client. 50 requests, 20 of them attack.
//  - fixed_window: windows [0,1), [1,2), [2,3) get exactly 10 each; [3,4) gets the 10 at
//    3.9x, [4,5) the 10 at 4.0x. All 50 admitted; attack 20 of 20; peak 20 in [3.9, 4.9).
//  - sliding_window_log: the steady requests never have 10 others in (t - 1, t] (the one at
//    t - 1 s has just left), so all 30 pass. At 3.90 the log is empty (2.9 <= 3.9 - 1 left):
//    3.90..3.99 admitted; at 4.00..4.09 the log holds those 10 (all > t - 1): denied.
//    40 admitted, 10 denied; attack 10 of 20; peak 10.
//  - sliding_window_counter: window 0 admits 10. At 1.0: prev = 10, elapsed 0, est = 10 ->
//    denied; at 1.0 + i/10 (i >= 1) est = curr + floor(10 (1 - i/10)) = (i - 1) + 10 - i = 9
//    -> admitted: window 1 admits 9. Window 2: prev = 9, est = (i) + floor(9 (1 - i/10)) =
//    i + floor(9 - 0.9 i) = 9 for i = 0..9 -> all 10 admitted. At 3.9 + k/100: prev = 10,
//    est = k + floor(10 (0.1 - k/100)) = k + 1 (k = 0) or k (k >= 1) <= 9 -> all 10 admitted.
//    At 4.00: prev = 10, est = 10 -> denied; 4.01: est = 0 + floor(10 * 0.99) = 9 ->
//    admitted (curr = 1); 4.02..4.09: 1 + floor(10 (1 - k/100)) = 1 + 9 = 10 -> denied.
//    Admitted 10 + 9 + 10 + 10 + 1 = 40, denied 10; attack 11 of 20; peak 11 in [3.9, 4.9).
//  - token_bucket (10/s, burst 20, starts EMPTY at t = 0): the request at 0 finds 0 tokens ->
//    denied; each later steady request finds exactly the 1 token refilled in 0.1 s -> 29
//    admitted, bucket empty after 2.9. At 3.9 it holds 10 tokens (1 s of refill); request
//    3.9 + k/100 finds 10 - k + k/10 = 10 - 0.9 k tokens (>= 1 up to k = 10): 3.90..3.99 and
//    4.00 admitted (4.00 finds exactly 1), then 4.01..4.09 find 0.1..0.9 -> denied.
//    40 admitted, 10 denied; attack 11 of 20; peak in 2 s: [2.1, 4.1) holds the 9 steady
//    admissions 2.1..2.9 and the 11 attack ones: 20 (no 2 s interval holds more).
//  - leaky_bucket (starts empty): steady traffic leaves level 1 after each request and
//    drains 1 per 0.1 s: all 30 admitted. At 3.9 the level is 0; request 3.9 + k/100 finds
//    0.9 k (each adds 1, 0.01 s leaks 0.1), below 20 for k <= 22: all 20 attack requests are
//    admitted. 50 admitted; attack 20 of 20; peak in 2 s: [2.1, 4.1) = 9 + 20 = 29.
TEST(PatternTables, C_ByHand) {
  const Report r = run_pattern('C');
  ASSERT_EQ(r.requests, 50);
  EXPECT_EQ(r.token_fill, std::optional<double>(0.0));
  expect_row(r, "fixed_window", {50, 0, 0, 20, 20});
  expect_row(r, "sliding_window_log", {40, 10, 1, 10, 10});
  expect_row(r, "sliding_window_counter", {40, 10, 1, 11, 11});
  expect_row(r, "token_bucket", {40, 10, 1, 20, 11});
  expect_row(r, "leaky_bucket", {50, 0, 0, 29, 20});
  for (const AlgorithmResult& a : r.algorithms) EXPECT_EQ(a.marked_requests, 20);
}

// Pattern C with the token bucket full (--token-fill full): the steady traffic keeps it at
// 19..20 (each 0.1 s refills the token just taken, capped at 20), so at 3.9 it holds 20
// tokens and request 3.9 + k/100 finds 20 - 0.9 k >= 1 for every k <= 19: 50 admitted,
// attack 20 of 20, peak in 2 s [2.1, 4.1) = 9 + 20 = 29.
TEST(PatternTables, C_TokenBucketStartingFullAdmitsTheWholeAttack) {
  const Report r = run_pattern('C', TokenFill{TokenFill::Mode::kFull, 0});
  EXPECT_EQ(r.token_fill, std::nullopt);
  expect_row(r, "token_bucket", {50, 0, 0, 29, 20});
}

// Runs the independent Python reference and compares every figure with the engine's.
void compare_with_reference(char pattern, const std::string& extra_args, const Report& r) {
  ScratchDir dir;
  const std::string out = dir.file("expected.json");
  const std::string cmd = std::string("python3 ") + SIM_TEST_DIR "/textbook_algorithms.py " +
                          pattern + " " + extra_args + " > " + out;
  ASSERT_EQ(run_command(cmd), 0) << cmd;
  const auto want = nlohmann::json::parse(read_file(out));
  SCOPED_TRACE(std::string("pattern ") + pattern + " " + extra_args);
  EXPECT_EQ(r.requests, want["requests"].get<int64_t>());
  EXPECT_EQ(r.first_us, want["first_us"].get<int64_t>());
  EXPECT_EQ(r.last_us, want["last_us"].get<int64_t>());
  ASSERT_EQ(want["algorithms"].size(), r.algorithms.size());
  for (const AlgorithmResult& a : r.algorithms) {
    const std::string name = algorithm_name(a.policy.algorithm());
    SCOPED_TRACE(name);
    const auto& w = want["algorithms"][name];
    EXPECT_EQ(a.requests, w["requests"].get<int64_t>());
    EXPECT_EQ(a.admitted, w["admitted"].get<int64_t>());
    EXPECT_EQ(a.denied, w["denied"].get<int64_t>());
    EXPECT_EQ(a.clients_limited, w["clients_limited"].get<int64_t>());
    EXPECT_EQ(a.peak_admitted, w["peak_admitted"].get<int64_t>());
    EXPECT_EQ(a.marked_requests, w["attack_requests"].get<int64_t>());
    EXPECT_EQ(a.marked_admitted, w["attack_admitted"].get<int64_t>());
    if (name == "leaky_bucket") {
      EXPECT_EQ(a.departure_list_us, w["departures_us"].get<std::vector<int64_t>>());
    }
  }
}

TEST(PatternTables, A_AgainstIndependentPythonReference) {
  const Report r = run_pattern('A');
  ASSERT_EQ(r.requests, 184);
  compare_with_reference('A', "", r);
  // The Poisson stream does hit the window limits (so the comparison is not all-admitted).
  EXPECT_GT(alg(r, "sliding_window_log").denied, 0);
}

TEST(PatternTables, A_OtherSeedAndEmptyTokenBucketAgainstReference) {
  const Report r = run_pattern('A', TokenFill{TokenFill::Mode::kTokens, 0}, 7);
  compare_with_reference('A', "--seed 7 --token-fill 0", r);
}

TEST(PatternTables, B_And_C_AgreeWithThePythonReferenceToo) {
  compare_with_reference('B', "", run_pattern('B'));
  compare_with_reference('C', "", run_pattern('C'));
}

}  // namespace
}  // namespace ratelimit::sim
