// mirror_test.cc — a DenialCache in front of a MemoryStore answers what the MemoryStore alone
// answers, step for step:
//   1. the shared vectors (tests/vectors/*.json), each step also replayed on a second, uncached
//      MemoryStore with the same history and compared field by field;
//   2. randomized sequences (every algorithm and mode, costs 1 ... limit + 1, acquires, peeks,
//      resets, time moving forward by random steps and sometimes back) against an uncached
//      mirror store, with a long and a short max_ttl.
// "The same answer": every field equal for cost 1. For cost > 1 a cached answer (a hit) carries
// the remaining of its denial, and this test's own traffic at other costs may have moved the
// store's instants later since (denial_cache.h): it must still deny, with retry_after and
// reset_after no longer than the store's, and remaining within 0 ... limit.
// Both stores and the cache read one ManualClock.
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>

#include "core_test_util.h"
#include "ratelimit/denial_cache.h"
#include "ratelimit/memory_store.h"
#include "ratelimit/redis_store.h"
#include "redis_server.h"
#include "vectors.h"

namespace ratelimit {
namespace {

using testing::describe;

// Empty when `cached` is the answer `uncached` allows (see the top of this file). With
// `stepped_back` (the clock went back since the denial was remembered) a store clamps time to
// its state's last update, which the cache cannot see: a hit must then still deny, with a
// retry_after and reset_after no longer than the store's (it expires no later), never longer.
std::string mismatch(const Decision& cached, const Decision& uncached, int64_t cost, bool hit,
                     bool stepped_back) {
  Decision c = cached;
  if (hit && cost > 1) {
    if (c.remaining < 0 || c.remaining > c.limit) return "remaining out of range";
    c.remaining = uncached.remaining;
  }
  if (hit && (stepped_back || cost > 1) && !uncached.allowed &&
      c.retry_after <= uncached.retry_after && c.reset_after <= uncached.reset_after &&
      c.retry_after.count() > 0) {
    c.retry_after = uncached.retry_after;
    c.reset_after = uncached.reset_after;
  }
  if (c == uncached) return {};
  return "cached " + describe(cached) + " != store " + describe(uncached) +
         (hit ? " (a hit)" : " (from the store)");
}

struct Pair {
  // `behind_on`: the store behind the cache, built on this pair's clock (nullptr: a MemoryStore).
  explicit Pair(Micros max_ttl,
                const std::function<std::shared_ptr<Store>(const ManualClock&)>& behind_on = {}) {
    MemoryStoreOptions mo;
    mo.clock = &clock;
    // No incremental sweep. The cache answers hits itself, so the store behind it runs fewer
    // operations per shard than the mirror and would sweep at other moments (and which entries
    // share a shard follows each store's random hash seed). Dropping an idle entry is invisible
    // while time moves forward, but once the clock steps back below that entry's idle time the
    // dropped key starts fresh while a kept one is decided from its state at its last update
    // (time clamped there): the two stores would then differ for reasons that are not the
    // cache's. Drop-on-touch stays, and is the same for both (a hit is on a key that is not idle).
    mo.sweep_every = 0;
    behind = behind_on ? behind_on(clock) : std::make_shared<MemoryStore>(mo);
    mirror = std::make_shared<MemoryStore>(mo);
    DenialCacheOptions o;
    o.clock = &clock;
    o.max_ttl = max_ttl;
    cache = DenialCache::wrap(behind, o).value();
  }
  ManualClock clock;
  std::shared_ptr<Store> behind;        // the store behind the cache
  std::shared_ptr<MemoryStore> mirror;  // the same history, no cache
  std::shared_ptr<DenialCache> cache;

  // One step on both; an error Status describes a mismatch.
  // `report`: usage reported after the fact (the cache passes it through and forgets the key).
  Result<Decision> step(const Policy& p, const std::string& key, int64_t cost, bool peek,
                        bool stepped_back = false, bool report = false) {
    const uint64_t hits = cache->counters().hits;
    auto got = report ? cache->report(p, key, cost) : peek ? cache->peek(p, key, cost) : cache->acquire(p, key, cost);
    auto want = report ? mirror->report(p, key, cost) : peek ? mirror->peek(p, key, cost) : mirror->acquire(p, key, cost);
    if (got.ok() != want.ok()) return Status::internal("one failed, the other did not");
    if (!got.ok()) return got;
    const bool hit = cache->counters().hits != hits;
    if (auto m = mismatch(*got, *want, cost, hit, stepped_back); !m.empty()) {
      return Status::internal(m);
    }
    return want;
  }
  Status reset(const Policy& p, const std::string& key) {
    if (Status s = cache->reset(p, key); !s.is_ok()) return s;
    return mirror->reset(p, key);
  }
};

void replay_vectors(const std::function<std::shared_ptr<Store>(const ManualClock&)>& behind_on) {
  auto files = vectors::load_all(RATELIMIT_VECTORS_DIR);
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  for (Micros ttl : {Micros{366LL * 24 * 3600 * 1'000'000}, Micros{1000}}) {
    Pair pair(ttl, behind_on);
    uint64_t steps = 0;
    for (const auto& f : *files) {
      // The cache passes concurrency policies straight through (their denials end at a release):
      // nothing to mirror.
      if (f.algorithm == Algorithm::kConcurrency) continue;
      auto failures = vectors::run_file(
          f, vectors::unique_run_prefix(),
          [&](const Policy& policy, const std::string& key, const vectors::Step& s) {
            pair.clock.set(Micros{s.t_us});
            ++steps;
            return pair.step(policy, key, s.cost, s.op == vectors::StepOp::kPeek, false,
                             s.op == vectors::StepOp::kReport);
          },
          [&](const Policy& policy, const std::string& key) { return pair.reset(policy, key); });
      EXPECT_TRUE(failures.empty()) << vectors::format_failures(failures);
    }
    EXPECT_GT(steps, 100u);
    EXPECT_GT(pair.cache->counters().hits, 0u) << "the vectors never exercised the cache";
  }
}

TEST(DenialCacheMirror, SharedVectorsGiveTheUncachedStoresDecisions) { replay_vectors({}); }

// The same in front of a real RedisStore whose scripts take the pair's clock (test mode).
TEST(DenialCacheMirror, SharedVectorsThroughRedisGiveTheUncachedStoresDecisions) {
  auto url = testing::shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().to_string();
  replay_vectors([&](const ManualClock& clock) -> std::shared_ptr<Store> {
    RedisStoreOptions o;
    o.url = *url;
    o.connections = 2;
    o.command_timeout = std::chrono::milliseconds(5000);
    o.test_clock = &clock;
    o.on_failure = FailurePolicy::kClosed;
    auto s = RedisStore::connect(o);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return s.ok() ? std::shared_ptr<Store>(*s) : std::make_shared<MemoryStore>();
  });
}

std::vector<Policy> random_policies(std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> limit(1, 12);
  std::uniform_int_distribution<int64_t> window_ms(1, 400);
  std::uniform_real_distribution<double> rate(0.5, 40.0);
  std::vector<Policy> out;
  out.push_back(Policy::fixed_window(limit(rng), Micros{window_ms(rng) * 1000}).value());
  out.push_back(Policy::sliding_window_log(limit(rng), Micros{window_ms(rng) * 1000}).value());
  out.push_back(Policy::sliding_window_counter(limit(rng), Micros{window_ms(rng) * 1000}).value());
  out.push_back(Policy::token_bucket(rate(rng), limit(rng)).value());
  out.push_back(Policy::leaky_bucket(rate(rng), limit(rng), LeakyMode::kPolice).value());
  out.push_back(Policy::leaky_bucket(rate(rng), limit(rng), LeakyMode::kShape).value());
  out.push_back(Policy::fixed_window(limit(rng), Micros{window_ms(rng) * 1000})
                    .value()
                    .with_count_denied());
  out.push_back(Policy::token_bucket(rate(rng), limit(rng)).value().with_count_denied());
  return out;
}

class DenialCacheRandomized : public ::testing::TestWithParam<int /* seed */> {};

TEST_P(DenialCacheRandomized, EveryStepMatchesTheUncachedStore) {
  std::mt19937_64 rng(static_cast<uint64_t>(GetParam()));
  const Micros ttl = GetParam() % 4 < 2 ? Micros{3'600'000'000} : Micros{20'000};
  Pair pair(ttl);
  const auto policies = random_policies(rng);
  const char* keys[] = {"a", "b", "c"};
  // Even seeds keep time monotonic (every field must match); odd ones also step it back.
  const bool steps_back = GetParam() % 2 == 1;
  int64_t now = 1'000'000'000;
  int64_t last_step_back = 0;  // when time last went back (in the stepped-back timeline)
  int64_t high = now;
  pair.clock.set(Micros{now});
  std::uniform_int_distribution<int> pick_policy(0, static_cast<int>(policies.size()) - 1);
  std::uniform_int_distribution<int> pick_key(0, 2);
  std::uniform_int_distribution<int> pct(0, 99);
  std::uniform_int_distribution<int64_t> small_step(0, 3'000);
  std::uniform_int_distribution<int64_t> big_step(0, 300'000);
  for (int i = 0; i < 20'000; ++i) {
    const Policy& p = policies[static_cast<size_t>(pick_policy(rng))];
    const std::string key = keys[pick_key(rng)];
    const int roll = pct(rng);
    if (roll < 1) {
      ASSERT_TRUE(pair.reset(p, key).is_ok());
      continue;
    }
    const int move = pct(rng);
    if (move < 60) now += small_step(rng);
    else if (move < 68) now += big_step(rng);
    else if (move < 70 && steps_back) now -= small_step(rng);  // a clock stepping back
    if (now < high) last_step_back = i;
    high = std::max(high, now);
    pair.clock.set(Micros{now});
    // Mostly cost 1 (the usual request), sometimes anything up to just above capacity.
    const int64_t cost =
        pct(rng) < 70 ? 1 : std::uniform_int_distribution<int64_t>(1, p.limit() + 1)(rng);
    // A remembered denial lives at most max_ttl or 5 s of this test's time: 10,000 steps.
    const bool recently_back = last_step_back > 0 && i - last_step_back < 10'000;
    auto r = pair.step(p, key, cost, roll < 15, recently_back);
    ASSERT_TRUE(r.ok()) << "step " << i << " " << algorithm_name(p.algorithm()) << " key " << key
                        << " cost " << cost << " t " << now << ": " << r.status().message();
  }
  const auto c = pair.cache->counters();
  EXPECT_GT(c.hits, 50u);
  EXPECT_GT(c.bypassed, 500u);
  RecordProperty("hits", std::to_string(c.hits));
}

INSTANTIATE_TEST_SUITE_P(Seeds, DenialCacheRandomized, ::testing::Range(1, 9));

}  // namespace
}  // namespace ratelimit
