// property_test.cc — randomized properties of the five decision functions (algo::decide).
//
// Why: the hand-worked vectors pin down chosen cases; these sequences (random policies with
// fractional rates and millisecond windows, random times and costs, acquire and peek, with and
// without count-denied mode) check the contracts on every decision they meet:
//   - Decision invariants (decision.h);
//   - retry_after is exact: with no other traffic, a peek at now + retry_after admits the same
//     request and a peek 1 us earlier does not; a cost above capacity says exceeds_capacity;
//   - reset_after is exact: at now + reset_after a cost-1 peek sees remaining == limit, and 1 us
//     earlier it does not (leaky bucket: the queue is empty at now + reset_after and not 1 us
//     earlier, see leaky_bucket_reset_is_when_the_queue_empties below);
//   - remaining is exact: exactly `remaining` cost-1 requests are admitted right after;
//   - peek changes nothing and answers what acquire answers; a denied acquire changes nothing
//     (outside count-denied mode);
//   - idle_at_us: from then on the state decides exactly like a fresh one;
//   - state stays bounded (count-denied mode included);
//   - a clock stepping back decides as at the state's latest time; state never moves back.
// Deterministic: fixed seeds; a failure prints the seed, the policy and the step.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core_test_util.h"
#include "ratelimit/algorithms.h"

namespace ratelimit {
namespace {

using algo::AlgorithmState;
using algo::Op;
using testing::describe;
using testing::expect_decision_invariants;
using testing::same_state;

constexpr Algorithm kAlgorithms[] = {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog,
                                     Algorithm::kSlidingWindowCounter, Algorithm::kTokenBucket,
                                     Algorithm::kLeakyBucket};

class Gen {
 public:
  explicit Gen(uint64_t seed) : rng_(seed) {}
  int64_t between(int64_t lo, int64_t hi) {  // inclusive
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  double log_uniform(double lo, double hi) {
    return std::exp(std::uniform_real_distribution<double>(std::log(lo), std::log(hi))(rng_));
  }
  template <typename T, size_t N>
  T pick(const T (&items)[N]) {
    return items[static_cast<size_t>(between(0, static_cast<int64_t>(N) - 1))];
  }

 private:
  std::mt19937_64 rng_;
};

// The largest n in [1, hi] such that valid(n), for a monotone predicate with valid(1) true.
template <typename Valid>
int64_t largest_valid(int64_t hi, Valid valid) {
  int64_t lo = 1;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo + 1) / 2;
    if (valid(mid)) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

Policy random_policy(Algorithm a, Gen& g) {
  const bool count_denied = g.chance(0.3);
  const bool extreme = g.chance(0.15);  // the edges of the valid parameter ranges
  if (a == Algorithm::kTokenBucket || a == Algorithm::kLeakyBucket) {
    const double rates[] = {3.0, 0.7, 1e-3, 1.0, 2.5, 1000.0, 1e6, 7.0 / 3.0, 0.1};
    const double extreme_rates[] = {kMaxRate, kMinRate, 5e8, 3e-6, 0.999999};
    const int64_t bursts[] = {1, 2, 3, 5, 10, 64, 1000};
    const LeakyMode mode = g.chance(0.5) ? LeakyMode::kShape : LeakyMode::kPolice;
    auto make = [&](double r, int64_t b) {
      return a == Algorithm::kTokenBucket ? Policy::token_bucket(r, b)
                                          : Policy::leaky_bucket(r, b, mode);
    };
    double rate = extreme ? g.pick(extreme_rates)
                          : (g.chance(0.6) ? g.pick(rates) : g.log_uniform(1e-3, 1e7));
    int64_t burst = g.chance(0.7) ? g.pick(bursts) : g.between(1, 5000);
    if (extreme) {
      const int64_t most = largest_valid(kMaxLimit, [&](int64_t b) { return make(rate, b).ok(); });
      burst = g.chance(0.5) ? most : g.between(1, most);
    }
    Result<Policy> p = make(rate, burst);
    EXPECT_TRUE(p.ok()) << p.status().to_string();
    return p->with_count_denied(count_denied);
  }
  const int64_t limits[] = {1, 2, 3, 5, 10, 100};
  const int64_t windows[] = {1000, 1001, 1024, 999983, 1000000, 60000000};
  int64_t limit = g.chance(0.7) ? g.pick(limits) : g.between(1, 1000);
  int64_t window = g.chance(0.7) ? g.pick(windows) : g.between(1000, 10'000'000);
  if (extreme) {
    const int64_t extreme_windows[] = {kMaxWindow.count(), 86'400'000'000, 1000, 1001};
    window = g.pick(extreme_windows);
    // The log's state grows with the limit: keep it small enough to stay quick.
    const int64_t cap = a == Algorithm::kSlidingWindowLog ? 2000 : kMaxLimit;
    const int64_t most = largest_valid(cap, [&](int64_t l) {
      return testing::window_policy_result(a, l, window).ok();
    });
    limit = g.chance(0.5) ? most : g.between(1, most);
  }
  return testing::window_policy(a, limit, window).with_count_denied(count_denied);
}

int64_t state_excess(const Policy& p, const AlgorithmState& s) {
  // Returns 0 when the state is within its documented bounds, else a positive excess.
  const int64_t L = p.limit();
  if (auto* f = std::get_if<algo::FixedWindowState>(&s)) return std::max<int64_t>(0, f->count - L);
  if (auto* c = std::get_if<algo::SlidingWindowCounterState>(&s)) {
    return std::max<int64_t>({0, c->curr - L, c->prev - L});
  }
  if (auto* t = std::get_if<algo::TokenBucketState>(&s)) {
    return std::max<int64_t>({0, t->taken_u - 2 * L * algo::kUnit, -t->taken_u});
  }
  if (auto* l = std::get_if<algo::LeakyBucketState>(&s)) {
    return std::max<int64_t>({0, l->level_u - 2 * L * algo::kUnit, -l->level_u});
  }
  auto& log = std::get<algo::SlidingWindowLogState>(s);
  const auto live = static_cast<int64_t>(log.entries.size());
  return std::max<int64_t>({0, log.units - L, live - L,
                            static_cast<int64_t>(log.entries.capacity()) - 2 * live - 2});
}

Decision peek_at(const Policy& p, const AlgorithmState& s, int64_t t, int64_t cost) {
  AlgorithmState copy = s;
  return algo::decide(p, copy, t, cost, Op::kPeek);
}

struct Checker {
  const Policy& policy;
  Gen& g;

  // All checks on one decision `d` for (cost) at `now`; `post` is the state the decision
  // describes (after the acquire, or after the acquire the peek stands for).
  void check(const AlgorithmState& post, int64_t now, int64_t cost, const Decision& d) {
    expect_decision_invariants(policy, cost, d);
    check_retry(post, now, cost, d);
    check_reset(post, now, d);
    if (d.remaining <= 300 || (d.remaining <= 20'000 && g.chance(0.05))) {
      check_remaining(post, now, d);
    }
    check_idle(post, now);
    EXPECT_EQ(state_excess(policy, post), 0) << "state exceeds its bound";
  }

  void check_retry(const AlgorithmState& post, int64_t now, int64_t cost, const Decision& d) {
    if (d.reason != DecisionReason::kOverLimit) return;
    const int64_t at = now + d.retry_after.count();
    Decision later = peek_at(policy, post, at, cost);
    EXPECT_TRUE(later.allowed) << "not admitted at now + retry_after: " << describe(later);
    Decision early = peek_at(policy, post, at - 1, cost);
    EXPECT_FALSE(early.allowed) << "already admitted 1us before now + retry_after";
    EXPECT_EQ(early.reason, DecisionReason::kOverLimit);
  }

  // Fully available: a cost-1 request is admitted and leaves limit - 1 (remaining counts what
  // is left after the request it answers).
  bool fully_available(const AlgorithmState& s, int64_t t) {
    Decision x = peek_at(policy, s, t, 1);
    return x.allowed && x.remaining == policy.limit() - 1;
  }

  void check_reset(const AlgorithmState& post, int64_t now, const Decision& d) {
    const int64_t reset = d.reset_after.count();
    EXPECT_TRUE(fully_available(post, now + reset)) << "not fully available at now + reset_after";
    const int64_t idle = algo::idle_at_us(policy, post);
    if (reset == 0) {
      // The counter's idle_at is conservative: the previous window may still hold units whose
      // weight has already rounded down to 0.
      if (policy.algorithm() != Algorithm::kSlidingWindowCounter) {
        EXPECT_LE(idle, now) << "reset_after is 0 but the state is not idle";
      }
      return;
    }
    if (policy.algorithm() == Algorithm::kLeakyBucket) {
      // The queue empties (the last admitted request departs) exactly at now + reset_after.
      EXPECT_EQ(idle, now + reset);
    } else {
      EXPECT_FALSE(fully_available(post, now + reset - 1)) << "fully available 1us earlier";
    }
  }

  void check_remaining(const AlgorithmState& post, int64_t now, const Decision& d) {
    AlgorithmState copy = post;
    for (int64_t i = 0; i < d.remaining; ++i) {
      Decision x = algo::decide(policy, copy, now, 1, Op::kAcquire);
      ASSERT_TRUE(x.allowed) << "request " << i << " of remaining=" << d.remaining
                             << " denied: " << describe(x);
    }
    Decision extra = algo::decide(policy, copy, now, 1, Op::kAcquire);
    EXPECT_FALSE(extra.allowed) << "more than remaining=" << d.remaining << " admitted";
  }

  void check_idle(const AlgorithmState& post, int64_t now) {
    const int64_t idle = algo::idle_at_us(policy, post);
    const AlgorithmState fresh = algo::fresh_state(policy);
    for (int64_t t : {std::max(idle, now), std::max(idle, now) + g.between(0, 3'000'000)}) {
      for (int64_t cost : {int64_t{1}, policy.limit()}) {
        Decision a = peek_at(policy, post, t, cost);
        Decision b = peek_at(policy, fresh, t, cost);
        EXPECT_EQ(a, b) << "state at idle_at (" << idle << ") is not like a fresh one at " << t
                        << ": " << describe(a) << " vs fresh " << describe(b);
      }
    }
  }
};

// The latest time a state has seen (window start, newest log entry, last refill or leak).
int64_t state_time(const AlgorithmState& s) {
  if (auto* f = std::get_if<algo::FixedWindowState>(&s)) return f->window_start_us;
  if (auto* c = std::get_if<algo::SlidingWindowCounterState>(&s)) return c->window_start_us;
  if (auto* t = std::get_if<algo::TokenBucketState>(&s)) return t->last_us;
  if (auto* l = std::get_if<algo::LeakyBucketState>(&s)) return l->last_us;
  auto& log = std::get<algo::SlidingWindowLogState>(s);
  return !log.entries.empty() ? log.entries.back().at_us : 0;
}

// A clock that steps back to before the state's latest time decides exactly as at that time,
// and an acquire there never moves the state's time backwards.
void check_clock_step_back(const Policy& p, const AlgorithmState& s, Gen& g) {
  const int64_t latest = state_time(s);
  if (latest <= 0 || !g.chance(0.2)) return;
  const int64_t back = std::max<int64_t>(0, latest - g.between(1, p.window().count()));
  const int64_t cost = g.between(1, p.limit());
  EXPECT_EQ(peek_at(p, s, back, cost), peek_at(p, s, latest, cost))
      << "a time before the state's latest (" << latest << ") reopened the past at " << back;
  AlgorithmState copy = s;
  algo::decide(p, copy, back, cost, Op::kAcquire);
  EXPECT_GE(state_time(copy), latest) << "state moved back in time";
}

class PropertyTest : public ::testing::TestWithParam<Algorithm> {};

TEST_P(PropertyTest, RandomSequencesKeepEveryContract) {
  const Algorithm algorithm = GetParam();
  constexpr int kSequences = 300;
  constexpr int kSteps = 120;
  for (uint64_t seed = 1; seed <= kSequences; ++seed) {
    Gen g(seed * 7919 + static_cast<uint64_t>(algorithm));
    const Policy policy = random_policy(algorithm, g);
    SCOPED_TRACE("seed " + std::to_string(seed) + " policy " + policy.name() +
                 (policy.count_denied() ? " count_denied" : ""));
    Checker checker{policy, g};
    const int64_t window = policy.window().count();
    AlgorithmState state = algo::fresh_state(policy);
    // Start at 0 or at a realistic wall-clock time (2024, in us).
    int64_t now = g.chance(0.5) ? 0 : 1'700'000'000'000'000 + g.between(0, 10'000'000);
    Decision last;
    int64_t previous_now = now;
    for (int step = 0; step < kSteps; ++step) {
      // Next time: often the moments where an off-by-one would show.
      switch (g.between(0, 9)) {
        case 0: break;  // time not advancing
        case 1: now += g.between(1, 10); break;
        case 2: now += g.between(0, std::max<int64_t>(1, window / 10)); break;
        case 3: now += g.between(0, window); break;
        case 4: now += g.between(0, 3 * window); break;
        case 5: now += last.retry_after.count() + g.between(-1, 1); break;
        case 6: now += last.reset_after.count() + g.between(-1, 0); break;
        case 7: now += window - now % window + g.between(-1, 0); break;  // a window edge
        case 8: now += g.chance(0.1) ? 100 * window : g.between(0, 1000); break;
        default: now += g.between(0, 100'000); break;
      }
      // Time never steps back here (the vectors pin clock-back behaviour down separately):
      // every wait below is measured from `now`.
      now = std::max(now, previous_now);
      previous_now = now;
      const int64_t L = policy.limit();
      int64_t cost = 1;
      switch (g.between(0, 9)) {
        case 0: case 1: cost = g.between(1, L); break;
        case 2: cost = L; break;
        case 3: cost = std::min(kMaxCost, L + g.between(1, 3)); break;
        default: break;
      }
      const Op op = g.chance(0.25) ? Op::kPeek : Op::kAcquire;
      const AlgorithmState before = state;
      const Decision d = algo::decide(policy, state, now, cost, op);
      SCOPED_TRACE("step " + std::to_string(step) + " now " + std::to_string(now) + " " +
                   (op == Op::kPeek ? "peek" : "acquire") + " cost " +
                   std::to_string(cost) + " -> " + describe(d));

      // Peek changes nothing and answers what acquire would (count-denied denials aside).
      AlgorithmState acquired = before;
      const Decision as_acquire = algo::decide(policy, acquired, now, cost, Op::kAcquire);
      if (op == Op::kPeek) {
        EXPECT_TRUE(same_state(policy, before, state, now)) << "peek changed the state";
        if (d.allowed || !policy.count_denied()) {
          EXPECT_EQ(d, as_acquire);
        } else {
          EXPECT_FALSE(as_acquire.allowed);
        }
      } else if (!d.allowed && !policy.count_denied()) {
        EXPECT_TRUE(same_state(policy, before, state, now)) << "a denied acquire changed the state";
      } else if (!d.allowed && d.reason == DecisionReason::kExceedsCapacity) {
        EXPECT_TRUE(same_state(policy, before, state, now)) << "an impossible request changed the state";
      }
      const AlgorithmState& post = op == Op::kAcquire ? state : (d.allowed ? acquired : before);
      checker.check(post, now, cost, d);
      check_clock_step_back(policy, post, g);
      if (::testing::Test::HasFailure()) return;  // one readable failure, not thousands
      last = d;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, PropertyTest, ::testing::ValuesIn(kAlgorithms),
                         [](const auto& p) { return std::string(algorithm_name(p.param)); });

}  // namespace
}  // namespace ratelimit
