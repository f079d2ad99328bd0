// vectors_test.cc — MemoryStore gives the decisions of the pure functions (algo::decide):
//   1. the shared hand-worked vectors (tests/vectors/<algorithm>.json) replayed through the
//      store, each step also checked against algo::decide on a private state;
//   2. randomized sequences (every algorithm, count-denied mode, policy redefinition,
//      acquire_all, reset, long idle gaps) compared step by step with the pure functions,
//      on a store tuned to drop idle keys as eagerly as it can (sweep on every operation), so
//      dropping and re-creating entries is shown never to change a decision.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "ratelimit/algorithms.h"
#include "ratelimit/memory_store.h"
#include "vectors.h"

namespace ratelimit {
namespace {

std::string describe(const Decision& d) {
  std::ostringstream s;
  s << "{allowed " << d.allowed << ", reason " << decision_reason_name(d.reason) << ", limit "
    << d.limit << ", remaining " << d.remaining << ", reset_after " << d.reset_after.count()
    << ", retry_after " << d.retry_after.count() << ", delay " << d.delay.count() << "}";
  return s.str();
}

struct StoreSetup {
  const char* label;
  size_t shards;
  size_t sweep_every;
  size_t sweep_batch;
};

constexpr StoreSetup kSetups[] = {
    {"default", 64, 16, 2},
    {"eager_sweep_one_shard", 1, 1, 4},
};

class MemoryStoreVectors
    : public ::testing::TestWithParam<std::tuple<Algorithm, size_t /* setup index */>> {};

TEST_P(MemoryStoreVectors, StoreMatchesVectorsAndPureFunctions) {
  const auto [algorithm, setup_index] = GetParam();
  const StoreSetup& setup = kSetups[setup_index];
  auto file = vectors::load_file(std::string(RATELIMIT_VECTORS_DIR) + "/" +
                                 algorithm_name(algorithm) + ".json");
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  ASSERT_FALSE(file->cases.empty());

  ManualClock clock;
  MemoryStoreOptions o;
  o.clock = &clock;
  o.shards = setup.shards;
  o.sweep_every = setup.sweep_every;
  o.sweep_batch = setup.sweep_batch;
  MemoryStore store(o);

  std::map<std::string, algo::AlgorithmState> pure;  // policy name + '\n' + key
  auto decide = [&](const Policy& policy, const std::string& key,
                    const vectors::Step& step) -> Result<Decision> {
    clock.set(Micros{step.t_us});
    Result<Decision> got = vectors::store_step(store, policy, key, step);
    // Leases: the store draws its own ids, which the pure model cannot share; the expectations
    // (run_file) hold both to the same answers.
    if (policy.is_concurrency()) return got;
    auto& state =
        pure.try_emplace(policy.name() + "\n" + key, algo::fresh_state(policy)).first->second;
    const Decision want = algo::decide(policy, state, step.t_us, step.cost, vectors::algo_op(step.op));
    if (got.ok() && *got != want) {
      return Status::internal("store " + describe(*got) + " != pure " + describe(want));
    }
    return got;
  };
  auto reset = [&](const Policy& policy, const std::string& key) {
    pure.erase(policy.name() + "\n" + key);
    return store.reset(policy, key);
  };
  auto failures = vectors::run_file(*file, vectors::unique_run_prefix(), decide, reset);
  EXPECT_TRUE(failures.empty()) << vectors::format_failures(failures);

  // The plain runner (as every store uses it) agrees too.
  auto plain = vectors::run_vectors(store, clock, *file);
  EXPECT_TRUE(plain.empty()) << vectors::format_failures(plain);
}

INSTANTIATE_TEST_SUITE_P(
    AllAlgorithms, MemoryStoreVectors,
    ::testing::Combine(::testing::ValuesIn(vectors::kAllAlgorithms),
                       ::testing::Range<size_t>(0, std::size(kSetups))),
    [](const auto& param_info) {
      return std::string(algorithm_name(std::get<0>(param_info.param))) + "_" +
             kSetups[std::get<1>(param_info.param)].label;
    });

// ---- randomized differential test ----

Policy random_policy(Algorithm a, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> limit(1, 12);
  std::uniform_int_distribution<int64_t> window_ms(1, 2000);
  std::uniform_real_distribution<double> rate(0.5, 200.0);
  const Micros window{window_ms(rng) * 1000};
  switch (a) {
    case Algorithm::kFixedWindow: return Policy::fixed_window(limit(rng), window).value();
    case Algorithm::kSlidingWindowLog: return Policy::sliding_window_log(limit(rng), window).value();
    case Algorithm::kSlidingWindowCounter:
      return Policy::sliding_window_counter(limit(rng), window).value();
    case Algorithm::kTokenBucket: return Policy::token_bucket(rate(rng), limit(rng)).value();
    case Algorithm::kLeakyBucket:
      return Policy::leaky_bucket(rate(rng), limit(rng),
                                  rng() % 2 == 0 ? LeakyMode::kPolice : LeakyMode::kShape)
          .value();
    case Algorithm::kConcurrency: break;  // not in the differential: leases carry store-drawn ids
  }
  return Policy::fixed_window(1, window).value();
}

// The rate algorithms: the differential replays acquire/peek/reset, which is all they have.
constexpr Algorithm kRateAlgorithms[] = {Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog,
                                         Algorithm::kSlidingWindowCounter,
                                         Algorithm::kTokenBucket, Algorithm::kLeakyBucket};

// One randomized run: `redefine` switches the algorithm behind the policy names at random.
void differential_run(uint64_t seed, Algorithm algorithm, bool redefine) {
  std::mt19937_64 rng(seed);
  ManualClock clock(Micros{1'000'000});
  MemoryStoreOptions o;
  o.clock = &clock;
  o.shards = 2;
  o.sweep_every = 1;
  o.sweep_batch = 3;
  MemoryStore store(o);
  const bool count_denied = rng() % 2 == 0;
  auto make = [&](Algorithm a, const char* name) {
    return random_policy(a, rng).with_count_denied(count_denied).with_name(name).value();
  };
  std::vector<Policy> policies = {make(algorithm, "p"), make(algorithm, "q")};
  std::map<std::string, algo::AlgorithmState> pure;
  auto state_of = [&](const Policy& p, const std::string& key) -> algo::AlgorithmState& {
    return pure.try_emplace(p.name() + "\n" + key, algo::fresh_state(p)).first->second;
  };
  int64_t now = 1'000'000;
  for (int step = 0; step < 3000; ++step) {
    // Time moves forward (never back: a store that saw a later time may already have dropped
    // a key the pure model still holds) by nothing, a little, or past every window.
    const uint64_t dice = rng() % 100;
    if (dice < 30) {
    } else if (dice < 90) {
      now += static_cast<int64_t>(rng() % 50'000);
    } else {
      now += static_cast<int64_t>(rng() % 5'000'000);
    }
    clock.set(Micros{now});
    if (redefine && rng() % 200 == 0) {
      // Redefined under another algorithm, once every state is idle (a state of another
      // meaning that still lives is a policy conflict instead: memory_store_test): both sides
      // start that policy's keys afresh. (With the same algorithm and new parameters the store
      // may drop an entry at the idle time computed under the old parameters, which the pure
      // model cannot know: documented.)
      now += 100'000'000;  // past every window and drain time random_policy can give
      clock.set(Micros{now});
      const size_t which = rng() % 2;
      const auto current = static_cast<size_t>(policies[which].algorithm());
      const Algorithm next = kRateAlgorithms[(current + 1 + rng() % 4) % 5];
      policies[which] = make(next, which == 0 ? "p" : "q");
    }
    const std::string key = "k" + std::to_string(rng() % 6);
    const Policy& policy = policies[rng() % 2];
    const int64_t cost = 1 + static_cast<int64_t>(rng() % 100 < 90 ? rng() % 3 : rng() % 15);
    const uint64_t op = rng() % 100;
    const std::string where = "seed " + std::to_string(seed) + " step " + std::to_string(step);
    if (op < 55 || op >= 65 + 15) {
      const bool peek = op >= 80;
      auto got = peek ? store.peek(policy, key, cost) : store.acquire(policy, key, cost);
      ASSERT_TRUE(got.ok()) << where;
      const Decision want = algo::decide(policy, state_of(policy, key), now, cost,
                                         peek ? algo::Op::kPeek : algo::Op::kAcquire);
      ASSERT_EQ(*got, want) << where << ": store " << describe(*got) << " pure " << describe(want);
    } else if (op < 65) {
      ASSERT_TRUE(store.reset(policy, key).is_ok());
      pure.erase(policy.name() + "\n" + key);
    } else {
      auto got = store.acquire_all(policies, key, cost);
      ASSERT_TRUE(got.ok()) << where;
      const algo::Limit limits[] = {{&policies[0], &state_of(policies[0], key)},
                                    {&policies[1], &state_of(policies[1], key)}};
      std::vector<Decision> want;
      // Whether all admitted is in `want` too (one decision per limit), which is compared.
      (void)algo::decide_all(limits, now, cost, algo::Op::kAcquire, want);
      ASSERT_EQ(got->size(), 2U);
      for (size_t i = 0; i < 2; ++i) {
        ASSERT_EQ((*got)[i], want[i]) << where << " policy " << i << ": store "
                                      << describe((*got)[i]) << " pure " << describe(want[i]);
      }
    }
  }
  // Nothing the store holds is idle for long: after a sweep past every window, it is empty.
  clock.set(Micros{now + 100'000'000});
  store.sweep();
  EXPECT_EQ(store.key_count(), 0U);
}

class Differential : public ::testing::TestWithParam<Algorithm> {};

TEST_P(Differential, StoreDecisionsEqualPureFunctions) {
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    differential_run(seed * 7919 + static_cast<uint64_t>(GetParam()), GetParam(), false);
    if (HasFatalFailure()) return;
  }
}

TEST_P(Differential, StoreDecisionsEqualPureFunctionsWhilePoliciesAreRedefined) {
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    differential_run(seed * 104729 + static_cast<uint64_t>(GetParam()), GetParam(), true);
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, Differential, ::testing::ValuesIn(kRateAlgorithms),
                         [](const auto& param_info) { return std::string(algorithm_name(param_info.param)); });

}  // namespace
}  // namespace ratelimit
