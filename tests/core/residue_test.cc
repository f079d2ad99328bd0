// residue_test.cc — algo::residue_of / state_from_residue (what the memory store keeps of a key
// it evicted before the key was idle, issue 23): the rebuilt state never admits what the
// forgotten one would refuse, whatever is merged into the residue; it is exact where the
// header says so; and it is fresh once the residue's idle time has passed.
// Randomized over every algorithm (count-denied mode included) with fixed seeds; a failure
// prints the seed.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <type_traits>

#include "core_test_util.h"
#include "ratelimit/algorithms.h"

namespace ratelimit {
namespace {

using algo::AlgorithmState;
using algo::Op;
using algo::Residue;

constexpr Algorithm kAlgorithms[] = {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog,
                                     Algorithm::kSlidingWindowCounter, Algorithm::kTokenBucket,
                                     Algorithm::kLeakyBucket};

Policy make_policy(Algorithm a, std::mt19937_64& rng) {
  auto pick = [&](auto... v) {
    const int64_t items[] = {v...};
    return items[rng() % sizeof...(v)];
  };
  const bool count_denied = rng() % 4 == 0;
  const int64_t limit = pick(1, 2, 5, 10, 37, 100);
  if (a == Algorithm::kTokenBucket || a == Algorithm::kLeakyBucket) {
    const double rates[] = {1e-3, 0.7, 1.0, 3.0, 1000.0, 1e6};
    const double rate = rates[rng() % 6];
    const LeakyMode mode = rng() % 2 == 0 ? LeakyMode::kShape : LeakyMode::kPolice;
    Result<Policy> p = a == Algorithm::kTokenBucket ? Policy::token_bucket(rate, limit)
                                                    : Policy::leaky_bucket(rate, limit, mode);
    return testing::must(std::move(p)).with_count_denied(count_denied);
  }
  const int64_t window = pick(1000, 999983, 1'000'000, 60'000'000);
  return testing::window_policy(a, limit, window).with_count_denied(count_denied);
}

// Cost-1 acquires admitted back to back at `t` (at most limit + 1 tried).
int64_t greedy(const Policy& p, AlgorithmState s, int64_t t) {
  int64_t n = 0;
  for (int64_t k = 0; k <= p.limit(); ++k) {
    if (algo::decide(p, s, t, 1, Op::kAcquire).allowed) ++n;
  }
  return n;
}

std::string show(const AlgorithmState& s) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, algo::TokenBucketState>) {
          return "{taken " + std::to_string(v.taken_u) + ", last " + std::to_string(v.last_us) + "}";
        } else if constexpr (std::is_same_v<T, algo::LeakyBucketState>) {
          return "{level " + std::to_string(v.level_u) + ", last " + std::to_string(v.last_us) + "}";
        } else if constexpr (std::is_same_v<T, algo::FixedWindowState>) {
          return "{start " + std::to_string(v.window_start_us) + ", count " + std::to_string(v.count) + "}";
        } else if constexpr (std::is_same_v<T, algo::SlidingWindowCounterState>) {
          return "{start " + std::to_string(v.window_start_us) + ", prev " + std::to_string(v.prev) +
                 ", curr " + std::to_string(v.curr) + "}";
        } else if constexpr (std::is_same_v<T, algo::ConcurrencyState>) {
          return "{leases " + std::to_string(v.leases.size()) + "}";
        } else {
          return "{log units " + std::to_string(v.units) + ", entries " + std::to_string(v.entries.size()) + "}";
        }
      },
      s);
}

bool admits(const Policy& p, const AlgorithmState& s, int64_t t, int64_t cost) {
  AlgorithmState copy = s;
  return algo::decide(p, copy, t, cost, Op::kPeek).allowed;
}

TEST(Residue, TheRebuiltStateNeverAdmitsWhatTheForgottenOneWouldRefuse) {
  for (uint64_t seed = 1; seed <= 3000; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const Algorithm a = kAlgorithms[seed % 5];
    const Policy p = make_policy(a, rng);
    const int64_t span = std::max<int64_t>(p.window().count(), 1000);
    // A history of random acquires.
    AlgorithmState s = algo::fresh_state(p);
    int64_t t = 5'000'000'000 + static_cast<int64_t>(rng() % 1000);
    const int steps = static_cast<int>(rng() % 40);
    for (int k = 0; k < steps; ++k) {
      t += static_cast<int64_t>(rng() % static_cast<uint64_t>(span / 4 + 1));
      const int64_t cost = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(p.limit()));
      algo::decide(p, s, t, cost, Op::kAcquire);
    }
    // Evicted now or a little later; remembered as is, or merged with another key's residue.
    const int64_t t0 = t + (rng() % 2 == 0 ? 0 : static_cast<int64_t>(rng() % static_cast<uint64_t>(span)));
    const Residue own = algo::residue_of(p, s, t0);
    const bool merged = rng() % 3 == 0;
    Residue r = own;
    if (merged) {
      const Residue other{t0 + static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * span)),
                          static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * p.limit())), 0};
      r = algo::merge(own, other);
    }
    const int64_t now = t0 + (rng() % 2 == 0 ? 0 : static_cast<int64_t>(rng() % static_cast<uint64_t>(span)));
    const AlgorithmState rebuilt = algo::state_from_residue(p, r, now);
    SCOPED_TRACE(std::string(algorithm_name(a)) + " limit " + std::to_string(p.limit()) + " rate " +
                 std::to_string(p.rate()) + " count_denied " + std::to_string(p.count_denied()) +
                 (merged ? " merged" : " own") + " residue {" + std::to_string(r.idle_at_us) + ", " +
                 std::to_string(r.used) + ", " + std::to_string(r.level_u) + "} t0 " +
                 std::to_string(t0) + " now " + std::to_string(now) + " state " + show(s) +
                 " rebuilt " + show(rebuilt));
    if (r.idle_at_us <= now) {
      EXPECT_TRUE(testing::same_state(p, rebuilt, algo::fresh_state(p), now));
    }
    // Pointwise: whatever it admits at any later time, the forgotten state admits too.
    for (int64_t dt : {int64_t{0}, int64_t{1}, span / 7, span / 2, span - 1, span, 2 * span}) {
      for (int64_t cost : {int64_t{1}, p.limit() / 2 + 1, p.limit()}) {
        if (admits(p, rebuilt, now + dt, cost)) {
          EXPECT_TRUE(admits(p, s, now + dt, cost)) << "dt " << dt << " cost " << cost;
        }
      }
      EXPECT_LE(greedy(p, rebuilt, now + dt), greedy(p, s, now + dt)) << "dt " << dt;
    }
    // Exact where the header says so: its own residue, read back at once, loses nothing.
    if (!merged && now == t0) {
      EXPECT_EQ(greedy(p, rebuilt, now), greedy(p, s, now)) << algorithm_name(a);
    }
    // Exact at any later time for the fixed window and the buckets.
    if (!merged && a != Algorithm::kSlidingWindowLog && a != Algorithm::kSlidingWindowCounter) {
      for (int64_t dt : {int64_t{0}, span / 3, span}) {
        EXPECT_EQ(greedy(p, rebuilt, now + dt), greedy(p, s, now + dt)) << "dt " << dt;
      }
    }
  }
}

TEST(Residue, OfAnIdleStateIsEmpty) {
  const Policy p = testing::window_policy(Algorithm::kFixedWindow, 10, 1'000'000);
  AlgorithmState s = algo::fresh_state(p);
  algo::decide(p, s, 500'000, 3, Op::kAcquire);
  EXPECT_EQ(algo::residue_of(p, s, 999'999).used, 3);
  EXPECT_EQ(algo::residue_of(p, s, 999'999).idle_at_us, 1'000'000);
  EXPECT_EQ(algo::residue_of(p, s, 1'000'000).idle_at_us, 0);
}

}  // namespace
}  // namespace ratelimit
