// concurrency_test.cc — MemoryStore under many threads: exact admission counts on one hot key
// for every algorithm, acquire_all atomicity while threads race on overlapping limits, and a
// mixed workload (evictions, sweeps, resets) that the tsan build must run clean.
// Threads start together on a std::latch; the clock is a ManualClock, so counts are exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "ratelimit/memory_store.h"
#include "test_policies.h"

namespace ratelimit {
namespace {

using testing_memory::all_algorithms;

// Runs `body(thread_index)` on `n` threads released together.
template <typename Body>
void run_together(int n, Body body) {
  std::latch start(n);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&start, &body, t] {
      start.arrive_and_wait();
      body(t);
    });
  }
  for (auto& th : threads) th.join();
}

struct ExactCase {
  size_t algorithm;
  bool count_denied;
  size_t shards;
};

class ExactUnderConcurrency : public ::testing::TestWithParam<ExactCase> {};

// 200 acquires on one key from 50 threads, limit (burst) 10: exactly 10 admitted.
TEST_P(ExactUnderConcurrency, TwoHundredAcquiresFromFiftyThreadsAdmitExactlyTen) {
  const ExactCase c = GetParam();
  ManualClock clock(Micros{1'000'000});
  MemoryStoreOptions o;
  o.clock = &clock;
  o.shards = c.shards;
  MemoryStore store(o);
  const Policy policy = all_algorithms(10)[c.algorithm].policy.with_count_denied(c.count_denied);
  for (int round = 0; round < 3; ++round) {
    const std::string key = "hot-" + std::to_string(round);
    std::atomic<int> admitted{0};
    std::atomic<int> errors{0};
    run_together(50, [&](int) {
      for (int i = 0; i < 4; ++i) {
        auto d = store.acquire(policy, key);
        if (!d.ok()) {
          errors.fetch_add(1);
        } else if (d->allowed) {
          admitted.fetch_add(1);
        }
      }
    });
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(admitted.load(), 10) << "round " << round;
    EXPECT_FALSE(store.peek(policy, key)->allowed);
  }
}

std::vector<ExactCase> exact_cases() {
  std::vector<ExactCase> cases;
  for (size_t a = 0; a < all_algorithms(10).size(); ++a) {
    for (bool count_denied : {false, true}) cases.push_back({a, count_denied, 64});
    cases.push_back({a, false, 1});
  }
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EveryAlgorithm, ExactUnderConcurrency, ::testing::ValuesIn(exact_cases()),
                         [](const auto& param_info) {
                           return all_algorithms(1)[param_info.param.algorithm].label +
                                  (param_info.param.count_denied ? "_count_denied" : "") + "_shards" +
                                  std::to_string(param_info.param.shards);
                         });

TEST(MemoryStoreConcurrency, DistinctKeysEachGetTheirOwnLimit) {
  ManualClock clock(Micros{1'000'000});
  MemoryStoreOptions o;
  o.clock = &clock;
  MemoryStore store(o);
  const Policy p = Policy::token_bucket(1e-3, 10).value();
  std::vector<int> admitted(16, 0);
  run_together(16, [&](int t) {
    const std::string key = "user:" + std::to_string(t);
    for (int i = 0; i < 50; ++i) admitted[static_cast<size_t>(t)] += store.acquire(p, key)->allowed ? 1 : 0;
  });
  for (int a : admitted) EXPECT_EQ(a, 10);
  EXPECT_EQ(store.key_count(), 16U);
}

class AcquireAllAtomicity : public ::testing::TestWithParam<size_t> {};

// Threads race with acquire_all over {A, B} (in both orders) and with plain acquires on B.
// Neither limit is exceeded, and a denied acquire_all consumes nothing: the final states hold
// exactly what the admitted calls took.
TEST_P(AcquireAllAtomicity, NeitherLimitExceededAndDeniedCallsConsumeNothing) {
  ManualClock clock(Micros{1'000'000});
  MemoryStoreOptions o;
  o.clock = &clock;
  o.shards = GetParam();
  MemoryStore store(o);
  const Policy a = Policy::fixed_window(10, Micros{60'000'000}).value().with_name("A").value();
  const Policy b = Policy::token_bucket(1e-3, 15).value().with_name("B").value();
  const Policy ab[] = {a, b};
  const Policy ba[] = {b, a};
  for (int round = 0; round < 4; ++round) {
    const std::string key = "client-" + std::to_string(round);
    std::atomic<int> all_admitted{0};
    std::atomic<int> b_admitted{0};
    std::atomic<int> inconsistent{0};
    run_together(16, [&](int t) {
      for (int i = 0; i < 20; ++i) {
        if (t % 2 == 0) {
          auto r = store.acquire_all(t % 4 == 0 ? std::span<const Policy>(ab) : ba, key);
          if (!r.ok() || r->size() != 2) {
            inconsistent.fetch_add(1);
            continue;
          }
          if ((*r)[0].allowed && (*r)[1].allowed) all_admitted.fetch_add(1);
        } else if (store.acquire(b, key)->allowed) {
          b_admitted.fetch_add(1);
        }
      }
    });
    EXPECT_EQ(inconsistent.load(), 0);
    EXPECT_LE(all_admitted.load(), 10);
    // Demand far exceeds B's 15, so B ends exactly full; A holds only the joint admissions.
    EXPECT_EQ(all_admitted.load() + b_admitted.load(), 15);
    // peek answers for one more unit: 10 - used - 1, or 0 when A is full.
    EXPECT_EQ(store.peek(a, key)->remaining, std::max(0, 9 - all_admitted.load()));
    EXPECT_EQ(store.peek(b, key)->remaining, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Shards, AcquireAllAtomicity, ::testing::Values(size_t{1}, size_t{64}),
                         [](const auto& param_info) { return "shards" + std::to_string(param_info.param); });

// Every operation at once over a small key space with a small bound: evictions, incremental
// sweeps, sweep(), resets and a moving clock. Checks the bound and that nothing fails; its
// main use is under -fsanitize=thread.
TEST(MemoryStoreConcurrency, MixedOperationsKeepTheBound) {
  ManualClock clock(Micros{1'000'000});
  MemoryStoreOptions o;
  o.clock = &clock;
  o.max_keys = 64;
  o.shards = 4;
  o.sweep_every = 2;
  MemoryStore store(o);
  const auto policies = all_algorithms(5);
  std::atomic<int> errors{0};
  std::atomic<bool> over_bound{false};
  run_together(6, [&](int t) {
    for (int i = 0; i < 3000; ++i) {
      const Policy& p = policies[static_cast<size_t>(i + t) % policies.size()].policy;
      const std::string key = "k" + std::to_string((i * 7 + t) % 200);
      bool ok = true;
      switch ((i + t) % 6) {
        case 0: ok = store.peek(p, key).ok(); break;
        case 1: ok = store.reset(p, key).is_ok(); break;
        case 2: {
          const Policy two[] = {p.with_name("x").value(), p.with_name("y").value()};
          ok = store.acquire_all(two, key).ok();
          break;
        }
        case 3:
          if (t == 0) {
            clock.advance(Micros{50'000});
            store.sweep();
          }
          break;
        default: ok = store.acquire(p, key, 1 + i % 3).ok(); break;
      }
      if (!ok) errors.fetch_add(1);
      if (store.key_count() > store.capacity()) over_bound.store(true);
    }
  });
  EXPECT_EQ(errors.load(), 0);
  EXPECT_FALSE(over_bound.load());
  EXPECT_LE(store.key_count(), 64U);
  EXPECT_GT(store.evictions(), 0U);
}

}  // namespace
}  // namespace ratelimit
