// concurrency_test.cc — DenialCache under threads (run under ThreadSanitizer by scripts/test's
// tsan stage): many threads deciding on shared keys through the cache, with resets through it
// at the same time, never admit more than the store would — exactly the limit per key — and
// the counters add up. The inner store is a real MemoryStore on the system clock.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "ratelimit/denial_cache.h"
#include "ratelimit/memory_store.h"

namespace ratelimit {
namespace {

TEST(DenialCacheConcurrency, ThreadsOnSharedKeysAdmitExactlyTheLimit) {
  constexpr int kThreads = 4;
  constexpr int kKeys = 64;
  constexpr int kLimit = 10;
  constexpr int kPerThread = 4000;
  auto memory = std::make_shared<MemoryStore>();
  DenialCacheOptions o;
  o.max_entries = 32;  // fewer than the keys: evictions run concurrently too
  o.shards = 4;
  o.max_ttl = Micros{3'600'000'000};
  auto cache = DenialCache::wrap(memory, o).value();
  // Buckets that do not refill within the test (one token per 10^6 s), and a long log.
  const std::vector<Policy> policies = {
      Policy::token_bucket(1e-6, kLimit).value().with_name("tb").value(),
      Policy::sliding_window_log(kLimit, Micros{3'600'000'000}).value().with_name("log").value()};
  std::vector<std::atomic<int>> admitted(policies.size() * kKeys);
  std::atomic<uint64_t> calls{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) + 1);
      for (int i = 0; i < kPerThread; ++i) {
        const size_t pi = rng() % policies.size();
        const int k = static_cast<int>(rng() % kKeys);
        const std::string key = "k" + std::to_string(k);
        Result<Decision> d = (i % 3 == 0)
            ? [&] {
                Result<Decision> out = Status::internal("not called");
                cache->acquire_async(policies[pi], key, 1,
                                     [&](Result<Decision> r) { out = std::move(r); });
                return out;  // MemoryStore completes inline
              }()
            : cache->acquire(policies[pi], key, 1);
        ASSERT_TRUE(d.ok());
        if (d->allowed) admitted[pi * kKeys + static_cast<size_t>(k)].fetch_add(1);
        calls.fetch_add(1);
      }
    });
  }
  // Meanwhile, resets through the cache of keys nobody else uses, each followed by a check that
  // the reset is honoured at once (no stale denial answers after it).
  threads.emplace_back([&] {
    const Policy& p = policies[0];
    for (int i = 0; i < 500; ++i) {
      const std::string key = "reset" + std::to_string(i % 8);
      for (int j = 0; j < kLimit; ++j) (void)cache->acquire(p, key);
      ASSERT_FALSE(cache->acquire(p, key)->allowed);
      ASSERT_TRUE(cache->reset(p, key).is_ok());
      ASSERT_TRUE(cache->acquire(p, key)->allowed) << "a stale denial answered after a reset";
      ASSERT_TRUE(cache->reset(p, key).is_ok());
    }
  });
  for (auto& th : threads) th.join();
  for (size_t i = 0; i < admitted.size(); ++i) {
    EXPECT_EQ(admitted[i].load(), kLimit) << "policy " << i / kKeys << " key " << i % kKeys;
  }
  const auto c = cache->counters();
  EXPECT_GT(c.hits, 0u);
  EXPECT_GT(c.evictions, 0u);
  EXPECT_LE(c.entries, 32u);
  EXPECT_GE(c.hits + c.misses, calls.load());
}

}  // namespace
}  // namespace ratelimit
