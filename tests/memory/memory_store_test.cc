// memory_store_test.cc — MemoryStore behaviour on one thread: input errors, peek, reset,
// policy namespacing, idle keys dropped (on touch, incrementally, by sweep()), the key bound
// with LRU eviction order, and the memory bound over 1,000,000 invented keys.
// Deterministic: every store here reads a ManualClock.
#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdio>
#include <string>
#include <vector>

#include "ratelimit/algorithms.h"
#include "ratelimit/memory_store.h"
#include "test_policies.h"

namespace ratelimit {
namespace {

using testing_memory::all_algorithms;
using testing_memory::manual;

const Micros kSecond{1'000'000};


Policy fixed(int64_t limit, std::string name = "fw") {
  return Policy::fixed_window(limit, Micros{60'000'000}).value().with_name(std::move(name)).value();
}

// ---- input errors ----

TEST(MemoryStoreErrors, BadKeyIsInvalidArgument) {
  ManualClock clock;
  MemoryStore store(manual(clock));
  const Policy p = fixed(10);
  EXPECT_EQ(store.acquire(p, "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.peek(p, "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.reset(p, "").code(), StatusCode::kInvalidArgument);
  const std::string too_long(kMaxKeyLength + 1, 'x');
  auto r = store.acquire(p, too_long);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("513"), std::string::npos) << r.status().message();
  EXPECT_TRUE(store.acquire(p, std::string(kMaxKeyLength, 'x')).ok());
  EXPECT_EQ(store.key_count(), 1U);
}

TEST(MemoryStoreErrors, BadCostIsInvalidArgumentAndConsumesNothing) {
  ManualClock clock;
  MemoryStore store(manual(clock));
  const Policy p = fixed(10);
  for (int64_t cost : {int64_t{0}, int64_t{-1}, kMaxCost + 1}) {
    EXPECT_EQ(store.acquire(p, "k", cost).status().code(), StatusCode::kInvalidArgument) << cost;
    // A peek of 0 is the state as it is (PeekOfCostZeroAnswersTheStateAsItIs), not an error.
    if (cost != 0) {
      EXPECT_EQ(store.peek(p, "k", cost).status().code(), StatusCode::kInvalidArgument) << cost;
    }
    const Policy ps[] = {p};
    EXPECT_EQ(store.acquire_all(ps, "k", cost).status().code(), StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(store.key_count(), 0U);
  // A cost above the capacity is valid input with its own reason, and creates no entry.
  auto d = store.acquire(p, "k", 11);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(d->reason, DecisionReason::kExceedsCapacity);
  EXPECT_EQ(store.key_count(), 0U);
}

// A peek of cost 0 (redis-cell's CL.THROTTLE quantity 0, state_peek.h) answers every rate
// algorithm's state as the pure function does — admitted, what is left now, until it is all
// back — records nothing and creates no entry; on a concurrency policy or one decided from a
// local slice (lease, async) it stays an error, as an acquire of 0 does everywhere.
TEST(MemoryStoreErrors, PeekOfCostZeroAnswersTheStateAsItIs) {
  ManualClock clock;
  MemoryStore store(manual(clock));
  for (const auto& [name, policy] : testing_memory::all_algorithms(5)) {
    const Policy p = policy.with_name(name).value();
    auto fresh = store.peek(p, "k", 0);
    ASSERT_TRUE(fresh.ok()) << name << ": " << fresh.status().message();
    EXPECT_TRUE(fresh->allowed) << name;
    EXPECT_EQ(fresh->remaining, 5) << name;
    EXPECT_EQ(store.key_count(), 0U) << name;
    algo::AlgorithmState state = algo::fresh_state(p);
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(store.acquire(p, "k")->allowed) << name;
      (void)algo::decide(p, state, clock.now().count(), 1, algo::Op::kAcquire);
    }
    clock.advance(kSecond);
    const Decision want = algo::decide(p, state, clock.now().count(), 0, algo::Op::kPeek);
    for (int i = 0; i < 2; ++i) {  // and again: the first peek recorded nothing
      auto got = store.peek(p, "k", 0);
      ASSERT_TRUE(got.ok()) << name;
      EXPECT_TRUE(got->allowed) << name;
      EXPECT_EQ(got->remaining, want.remaining) << name;
      EXPECT_LT(got->remaining, 5) << name;  // the acquires are seen
      EXPECT_EQ(got->reset_after, want.reset_after) << name;
    }
    EXPECT_EQ(store.acquire(p, "k", 0).status().code(), StatusCode::kInvalidArgument) << name;
    ASSERT_TRUE(store.reset(p, "k").is_ok());
  }
  const Policy c = Policy::concurrency(2, kSecond).value().with_name("c").value();
  EXPECT_EQ(store.peek(c, "k", 0).status().code(), StatusCode::kInvalidArgument);
  ConsistencyOptions lease;
  lease.mode = Consistency::kLease;
  const Policy sliced = fixed(10, "sliced").with_consistency(lease).value();
  EXPECT_EQ(store.peek(sliced, "k", 0).status().code(), StatusCode::kInvalidArgument);
}

TEST(MemoryStoreErrors, BadPolicyListIsInvalidArgument) {
  ManualClock clock;
  MemoryStore store(manual(clock));
  EXPECT_EQ(store.acquire_all({}, "k").status().code(), StatusCode::kInvalidArgument);
  std::vector<Policy> many;
  for (int i = 0; i < 17; ++i) many.push_back(fixed(5, "p" + std::to_string(i)));
  EXPECT_EQ(store.acquire_all(many, "k").status().code(), StatusCode::kInvalidArgument);
  const Policy twice[] = {fixed(5, "same"), fixed(7, "same")};
  EXPECT_EQ(store.acquire_all(twice, "k").status().code(), StatusCode::kInvalidArgument);
  const Policy ok[] = {fixed(5, "a")};
  EXPECT_EQ(store.acquire_all(ok, "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store.key_count(), 0U);
}

TEST(MemoryStoreAsync, CompletionsRunInlineExactlyOnce) {
  ManualClock clock;
  MemoryStore store(manual(clock));
  const Policy p = fixed(1);
  int calls = 0;
  store.acquire_async(p, "k", 1, [&](Result<Decision> r) {
    ++calls;
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->allowed);
  });
  EXPECT_EQ(calls, 1);
  store.peek_async(p, "k", 1, [&](Result<Decision> r) {
    ++calls;
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->allowed);
  });
  EXPECT_EQ(calls, 2);
  const Policy ps[] = {p};
  store.acquire_all_async(ps, "k", 1, [&](Result<std::vector<Decision>> r) {
    ++calls;
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r->size(), 1U);
    EXPECT_FALSE((*r)[0].allowed);
  });
  EXPECT_EQ(calls, 3);
  store.reset_async(p, "k", [&](Status s) {
    ++calls;
    EXPECT_TRUE(s.is_ok());
  });
  EXPECT_EQ(calls, 4);
  store.acquire_async(p, "", 1, [&](Result<Decision> r) {
    ++calls;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  });
  EXPECT_EQ(calls, 5);
  EXPECT_TRUE(store.acquire(p, "k")->allowed);  // the reset took effect
}

// ---- peek, reset, namespacing (every algorithm) ----

class EveryAlgorithm : public ::testing::TestWithParam<size_t> {
 protected:
  Policy policy(int64_t limit) const { return all_algorithms(limit)[GetParam()].policy; }
};

TEST_P(EveryAlgorithm, PeekDoesNotConsumeNorCreateEntries) {
  ManualClock clock(kSecond);
  MemoryStore store(manual(clock));
  const Policy p = policy(3);
  for (int i = 0; i < 10; ++i) {
    auto d = store.peek(p, "k");
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE(d->allowed);
    EXPECT_EQ(d->remaining, 2);
  }
  EXPECT_EQ(store.key_count(), 0U);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(store.acquire(p, "k")->allowed) << i;
  EXPECT_EQ(store.key_count(), 1U);
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(store.peek(p, "k")->allowed);
  EXPECT_FALSE(store.acquire(p, "k")->allowed);
}

TEST_P(EveryAlgorithm, ResetForgetsTheKey) {
  ManualClock clock(kSecond);
  MemoryStore store(manual(clock));
  const Policy p = policy(2);
  EXPECT_TRUE(store.acquire(p, "k")->allowed);
  EXPECT_TRUE(store.acquire(p, "k")->allowed);
  EXPECT_FALSE(store.acquire(p, "k")->allowed);
  EXPECT_TRUE(store.acquire(p, "other")->allowed);
  EXPECT_EQ(store.key_count(), 2U);
  EXPECT_TRUE(store.reset(p, "k").is_ok());
  EXPECT_EQ(store.key_count(), 1U);
  EXPECT_TRUE(store.reset(p, "never-seen").is_ok());
  EXPECT_TRUE(store.acquire(p, "k")->allowed);
  EXPECT_TRUE(store.acquire(p, "k")->allowed);
  EXPECT_FALSE(store.acquire(p, "k")->allowed);
  EXPECT_EQ(store.peek(p, "other")->remaining, 0);  // untouched by the reset of "k"
}

TEST_P(EveryAlgorithm, SameKeyUnderTwoPolicyNamesIsTwoStates) {
  ManualClock clock(kSecond);
  MemoryStore store(manual(clock));
  const Policy a = policy(1).with_name("a").value();
  const Policy b = policy(1).with_name("b").value();
  EXPECT_TRUE(store.acquire(a, "k")->allowed);
  EXPECT_FALSE(store.acquire(a, "k")->allowed);
  EXPECT_TRUE(store.acquire(b, "k")->allowed);
  EXPECT_EQ(store.key_count(), 2U);
  EXPECT_TRUE(store.reset(a, "k").is_ok());
  EXPECT_TRUE(store.acquire(a, "k")->allowed);
  EXPECT_FALSE(store.acquire(b, "k")->allowed);
}

INSTANTIATE_TEST_SUITE_P(MemoryStore, EveryAlgorithm,
                         ::testing::Range<size_t>(0, all_algorithms(1).size()),
                         [](const auto& param_info) { return all_algorithms(1)[param_info.param].label; });

TEST(MemoryStoreNamespacing, NameAndKeyBytesDoNotRunTogether) {
  ManualClock clock;
  MemoryStore store(manual(clock));
  // ("ab", "c") and ("a", "bc") share the byte string "abc"; keys may hold any byte, NUL too.
  EXPECT_TRUE(store.acquire(fixed(1, "ab"), "c")->allowed);
  EXPECT_TRUE(store.acquire(fixed(1, "a"), "bc")->allowed);
  EXPECT_TRUE(store.acquire(fixed(1, "a"), std::string("b\0c", 3))->allowed);
  EXPECT_TRUE(store.acquire(fixed(1, "a"), std::string("b\0", 2))->allowed);
  EXPECT_TRUE(store.acquire(fixed(1, "a"), "b")->allowed);
  // Long keys (stored off-slot) keep their identity too.
  const std::string long_key(300, 'z');
  EXPECT_TRUE(store.acquire(fixed(1, "a"), long_key)->allowed);
  EXPECT_TRUE(store.acquire(fixed(1, "a"), long_key + "!")->allowed);
  EXPECT_FALSE(store.acquire(fixed(1, "a"), long_key)->allowed);
  EXPECT_FALSE(store.acquire(fixed(1, "ab"), "c")->allowed);
  EXPECT_EQ(store.key_count(), 7U);
}

// Issue 31: two definitions of one name used to share one count (two clients on `api` with
// different algorithms admitted 21 against a limit of 10; in one process each call replaced the
// other's state, so both admitted everything). Another meaning is now refused while the key's
// state lives, and starts the key afresh once that state is idle.
TEST(MemoryStoreNamespacing, AnotherMeaningOfTheNameIsRefusedWhileTheStateLives) {
  ManualClock clock(kSecond);  // the window [0, 60 s) is 1 s in
  MemoryStore store(manual(clock));
  const Policy window = fixed(2, "api");
  const Policy bucket = Policy::token_bucket(1, 5).value().with_name("api").value();
  EXPECT_TRUE(store.acquire(window, "k")->allowed);
  EXPECT_TRUE(store.acquire(window, "k")->allowed);
  EXPECT_FALSE(store.acquire(window, "k")->allowed);
  auto d = store.acquire(bucket, "k");
  EXPECT_FALSE(d->allowed);
  EXPECT_EQ(d->reason, DecisionReason::kPolicyConflict);
  EXPECT_EQ(d->remaining, 0);
  EXPECT_EQ(d->limit, 5);
  EXPECT_EQ(d->retry_after, Micros{59'000'000});  // when the window's count ends
  EXPECT_EQ(d->reset_after, d->retry_after);
  EXPECT_EQ(store.peek(bucket, "k")->reason, DecisionReason::kPolicyConflict);
  // Nothing was counted: the window's own definition still sees its 2.
  EXPECT_EQ(store.peek(window, "k")->remaining, 0);
  // 1 µs before the state ends: still refused; at its end the bucket starts the key afresh.
  clock.set(Micros{60'000'000 - 1});
  EXPECT_EQ(store.acquire(bucket, "k")->reason, DecisionReason::kPolicyConflict);
  clock.set(Micros{60'000'000});
  d = store.acquire(bucket, "k");
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->remaining, 4);
  // Now the window is the other meaning, until the bucket's token is back (1 s).
  EXPECT_EQ(store.acquire(window, "k")->reason, DecisionReason::kPolicyConflict);
  EXPECT_EQ(store.acquire(window, "k")->retry_after, kSecond);
  EXPECT_EQ(store.key_count(), 1U);
  // A reset forgets the key under any meaning.
  ASSERT_TRUE(store.reset(window, "k").is_ok());
  EXPECT_TRUE(store.acquire(window, "k")->allowed);
}

TEST(MemoryStoreNamespacing, ALimitChangeKeepsTheCountAndAWindowOrCountingChangeConflicts) {
  ManualClock clock(kSecond);
  MemoryStore store(manual(clock));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store.acquire(fixed(3, "api"), "k")->allowed);
  // A new limit is the same meaning: it applies to the live count (a reload that raised it).
  auto d = store.acquire(fixed(5, "api"), "k");
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->remaining, 1);
  // Another window, the count-denied mode, every-hit counting: other meanings.
  const Policy hourly = Policy::fixed_window(5, Micros{3'600'000'000}).value().with_name("api").value();
  EXPECT_EQ(store.acquire(hourly, "k")->reason, DecisionReason::kPolicyConflict);
  EXPECT_EQ(store.acquire(fixed(5, "api").with_count_denied(), "k")->reason,
            DecisionReason::kPolicyConflict);
  const Policy every = Policy::fixed_window_every_hit(5, Micros{60'000'000}).value().with_name("api").value();
  EXPECT_EQ(store.acquire(every, "k")->reason, DecisionReason::kPolicyConflict);
  // A bucket's rate is a capacity: changing it keeps the bucket's level.
  const Policy slow = Policy::token_bucket(1, 5).value().with_name("b").value();
  const Policy fast = Policy::token_bucket(100, 5).value().with_name("b").value();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(store.acquire(slow, "k")->allowed);
  EXPECT_FALSE(store.acquire(fast, "k")->allowed);
  EXPECT_EQ(store.acquire(fast, "k")->reason, DecisionReason::kOverLimit);
  // Another key under the other meaning is its own state: no conflict there.
  EXPECT_TRUE(store.acquire(hourly, "other")->allowed);
}

TEST(MemoryStoreNamespacing, AConflictInAnAllOrNothingCallRefusesItAndCountsNothing) {
  ManualClock clock(kSecond);
  MemoryStore store(manual(clock));
  const Policy bucket = Policy::token_bucket(1, 5).value().with_name("api").value();
  ASSERT_TRUE(store.acquire(fixed(2, "api"), "k")->allowed);
  const Policy both[] = {fixed(10, "other"), bucket};
  auto got = store.acquire_all(both, "k");
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 2U);
  EXPECT_TRUE((*got)[0].allowed);  // the peek of the limit that had room
  EXPECT_EQ((*got)[0].remaining, 9);
  EXPECT_EQ((*got)[1].reason, DecisionReason::kPolicyConflict);
  // Nothing was taken (a peek answers what one more would leave: 10 - 1, and 2 - (1 + 1)).
  EXPECT_EQ(store.peek(fixed(10, "other"), "k")->remaining, 9);
  EXPECT_EQ(store.peek(fixed(2, "api"), "k")->remaining, 0);
  // Once the window's state is idle, the call goes through and the bucket starts afresh.
  clock.set(Micros{60'000'000});
  got = store.acquire_all(both, "k");
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE((*got)[0].allowed && (*got)[1].allowed);
  EXPECT_EQ((*got)[1].remaining, 4);
}

TEST(MemoryStoreNamespacing, ManyPolicyNamesComeAndGo) {
  // Thousands of names pass through one shard while older ones go idle and are swept: a
  // recycled name slot must never carry state over to another name.
  ManualClock clock(kSecond);
  MemoryStoreOptions o = manual(clock, 100'000, 1);
  o.sweep_every = 1;
  MemoryStore store(o);
  for (int i = 0; i < 3000; ++i) {
    const Policy p = Policy::fixed_window(1, kSecond).value().with_name("p" + std::to_string(i)).value();
    ASSERT_TRUE(store.acquire(p, "k")->allowed) << i;
    ASSERT_FALSE(store.acquire(p, "k")->allowed) << i;
    if (i % 100 == 99) {
      clock.advance(kSecond);
      store.sweep();
      ASSERT_EQ(store.key_count(), 0U) << i;
    }
  }
}

// ---- idle keys ----

TEST(MemoryStoreIdle, IdleKeyIsDroppedWhenTouched) {
  ManualClock clock(kSecond);
  MemoryStore store(manual(clock));
  const Policy p = Policy::token_bucket(10, 2).value();  // one token back every 100 ms
  EXPECT_TRUE(store.acquire(p, "k")->allowed);
  EXPECT_EQ(store.key_count(), 1U);
  clock.advance(Micros{99'999});
  EXPECT_EQ(store.peek(p, "k")->remaining, 0);  // not yet refilled: kept
  EXPECT_EQ(store.key_count(), 1U);
  clock.advance(Micros{1});
  auto d = store.peek(p, "k");
  EXPECT_EQ(d->remaining, 1);
  EXPECT_EQ(store.key_count(), 0U);  // back to full: the peek dropped it
}

TEST(MemoryStoreIdle, SweepDropsOnlyIdleKeys) {
  ManualClock clock(kSecond);
  MemoryStoreOptions o = manual(clock);
  o.sweep_every = 0;  // only sweep() here
  MemoryStore store(o);
  const Policy short_window = Policy::fixed_window(5, kSecond).value();
  const Policy long_window = Policy::fixed_window(5, Micros{3600 * kSecond.count()}).value();
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(store.acquire(short_window, "s" + std::to_string(i))->allowed);
  for (int i = 0; i < 10; ++i) EXPECT_TRUE(store.acquire(long_window, "l" + std::to_string(i))->allowed);
  EXPECT_EQ(store.sweep(), 0U);
  EXPECT_EQ(store.key_count(), 110U);
  clock.advance(kSecond);  // the 1 s windows are over
  EXPECT_EQ(store.sweep(), 100U);
  EXPECT_EQ(store.key_count(), 10U);
  EXPECT_EQ(store.peek(long_window, "l3")->remaining, 3);  // 1 used, 1 more asked
  EXPECT_EQ(store.evictions(), 0U);
}

TEST(MemoryStoreIdle, IncrementalSweepDropsIdleKeysWithoutSweepCalls) {
  ManualClock clock(kSecond);
  MemoryStoreOptions o = manual(clock, 1'000, 1);
  o.sweep_every = 4;
  o.sweep_batch = 2;
  MemoryStore store(o);
  const Policy p = Policy::fixed_window(5, kSecond).value();
  const Policy keep = Policy::fixed_window(5, Micros{3600 * kSecond.count()}).value();
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(store.acquire(p, "k" + std::to_string(i))->allowed);
  ASSERT_TRUE(store.acquire(keep, "long")->allowed);
  clock.advance(kSecond);
  // 2 entries checked every 4 operations: 201 entries need at most ~402 operations.
  for (int i = 0; i < 1000 && store.key_count() > 1; ++i) EXPECT_TRUE(store.peek(p, "absent").ok());
  EXPECT_EQ(store.key_count(), 1U);
  EXPECT_EQ(store.peek(keep, "long")->remaining, 3);
}

// ---- the key bound and LRU order ----

TEST(MemoryStoreBound, EvictsLeastRecentlyUsedFirst) {
  ManualClock clock(kSecond);
  MemoryStoreOptions o = manual(clock, 8, 1);
  o.sweep_every = 0;
  MemoryStore store(o);
  ASSERT_EQ(store.capacity(), 8U);
  const Policy p = fixed(10);
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(store.acquire(p, "k" + std::to_string(i)).ok());
  for (int i : {3, 0, 2, 1}) EXPECT_TRUE(store.acquire(p, "k" + std::to_string(i)).ok());  // used again
  for (int i = 8; i < 12; ++i) EXPECT_TRUE(store.acquire(p, "k" + std::to_string(i)).ok());
  EXPECT_EQ(store.key_count(), 8U);
  EXPECT_EQ(store.evictions(), 4U);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(store.holds(p, "k" + std::to_string(i))) << i;
  for (int i = 4; i < 8; ++i) EXPECT_FALSE(store.holds(p, "k" + std::to_string(i))) << i;
  for (int i = 8; i < 12; ++i) EXPECT_TRUE(store.holds(p, "k" + std::to_string(i))) << i;
  // peek: 10 - used - 1. An evicted roomy key decides from its residue like the entry it was,
  // unless another residue held its cell (16 cells, hashes seeded per store): then fresh.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(store.peek(p, "k" + std::to_string(i))->remaining, 7) << i;
  for (int i = 4; i < 8; ++i) {
    const int64_t remaining = store.peek(p, "k" + std::to_string(i))->remaining;
    EXPECT_TRUE(remaining == 8 || remaining == 9) << i << ": " << remaining;
  }
}

TEST(MemoryStoreBound, KeysUsedRecentlySurviveTheOldestGo) {
  ManualClock clock(kSecond);
  MemoryStoreOptions o = manual(clock, 1000, 1);
  o.sweep_every = 0;
  MemoryStore store(o);
  const Policy p = fixed(10);
  auto key = [](int i) { return "key-" + std::to_string(i); };
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(store.acquire(p, key(i)).ok());
  // Used again right after insertion (still in the most recent quarter: the lazy LRU does not
  // move them, and must still keep them).
  for (int i = 990; i < 1000; ++i) EXPECT_TRUE(store.acquire(p, key(i)).ok());
  // Used again long after insertion, in scattered order.
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(store.acquire(p, key((i * 37) % 100 + 500)).ok());
  // 640 new keys: the 640 least recently used (0..499 and 600..739) must go, nothing else.
  for (int i = 1000; i < 1640; ++i) EXPECT_TRUE(store.acquire(p, key(i)).ok());
  EXPECT_EQ(store.key_count(), 1000U);
  EXPECT_EQ(store.evictions(), 640U);
  auto held = [&](int i) { return store.holds(p, key(i)); };
  for (int i = 0; i < 500; ++i) EXPECT_FALSE(held(i)) << i;
  for (int i = 500; i < 600; ++i) EXPECT_TRUE(held(i)) << i;
  for (int i = 600; i < 740; ++i) EXPECT_FALSE(held(i)) << i;
  for (int i = 740; i < 1640; ++i) EXPECT_TRUE(held(i)) << i;
}

TEST(MemoryStoreBound, IdleEntryMakesRoomWithoutCountingAnEviction) {
  ManualClock clock(kSecond);
  MemoryStoreOptions o = manual(clock, 2, 1);
  o.sweep_every = 0;
  MemoryStore store(o);
  const Policy p = Policy::fixed_window(5, kSecond).value();
  EXPECT_TRUE(store.acquire(p, "a").ok());
  EXPECT_TRUE(store.acquire(p, "b").ok());
  clock.advance(kSecond);  // both idle now
  EXPECT_TRUE(store.acquire(p, "c").ok());
  EXPECT_EQ(store.key_count(), 2U);
  EXPECT_EQ(store.evictions(), 0U);
  EXPECT_TRUE(store.acquire(p, "d").ok());
  EXPECT_TRUE(store.acquire(p, "e").ok());  // "c" is live: this one is a real eviction
  EXPECT_EQ(store.evictions(), 1U);
}

TEST(MemoryStoreBound, CapacityNeverExceedsMaxKeys) {
  ManualClock clock;
  for (size_t max_keys : {size_t{1}, size_t{3}, size_t{10}, size_t{100}, size_t{1000}}) {
    for (size_t shards : {size_t{1}, size_t{3}, size_t{64}, size_t{1000}}) {
      MemoryStore store(manual(clock, max_keys, shards));
      EXPECT_LE(store.capacity(), max_keys) << max_keys << " " << shards;
      EXPECT_GE(store.capacity(), max_keys / 2 + 1) << max_keys << " " << shards;
      const Policy p = fixed(3);
      for (size_t i = 0; i < 2 * max_keys + 10; ++i) EXPECT_TRUE(store.acquire(p, std::to_string(i)).ok());
      EXPECT_LE(store.key_count(), store.capacity());
      EXPECT_GT(store.key_count(), 0U);
    }
  }
}

int64_t allocated_bytes() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<int64_t>(m.uordblks + m.hblkhd);
}

// Allocator bytes per entry the memory figure in docs/BENCHMARKS.md allows: a 64-byte
// slot, its share of the hash table (8-byte cells, load 3/8 ... 3/4) and slab rounding.
constexpr int64_t kBudgetBytesPerKey = 96;

TEST(MemoryStoreBound, MillionInventedKeysStayWithinTheCapAndMemoryFigure) {
  ManualClock clock(kSecond);
  const int64_t before = allocated_bytes();
  {
    MemoryStore store(manual(clock, 100'000));
    const Policy p = Policy::token_bucket(1, 10).value().with_name("tb").value();
    std::string key = "k";
    for (int i = 0; i < 1'000'000; ++i) {
      key.resize(1);
      key += std::to_string(i);
      ASSERT_TRUE(store.acquire(p, key)->allowed);
      if (i % 100'000 == 99'999) {
        ASSERT_LE(store.key_count(), 100'000U) << i;
      }
    }
    EXPECT_EQ(store.key_count(), store.capacity());
    EXPECT_EQ(store.evictions(), 1'000'000U - store.capacity());
    const int64_t used = allocated_bytes() - before;
    // The entries, and the residue tables of the keys evicted before they were idle (fixed
    // size: 24 bytes per cell, half a cell per key of capacity).
    EXPECT_LE(store.residue_bytes(), size_t{24} * 100'000);
    EXPECT_LE(used, int64_t{100'000} * kBudgetBytesPerKey + static_cast<int64_t>(store.residue_bytes()))
        << used / 100'000 << " bytes per key";
    std::printf("1M keys into a 100k cap: %.1f allocator bytes per held key, %.1f of them the "
                "eviction residue\n", static_cast<double>(used) / 100'000,
                static_cast<double>(store.residue_bytes()) / 100'000);
    // The newest keys are held, the oldest are not (their residue still counts their one token).
    EXPECT_TRUE(store.holds(p, "k999999"));
    EXPECT_FALSE(store.holds(p, "k0"));
    EXPECT_EQ(store.peek(p, "k999999")->remaining, 8);
    EXPECT_GE(store.peek(p, "k0")->remaining, 8);
  }
  EXPECT_LE(allocated_bytes(), before + 64 * 1024);  // everything given back
}

}  // namespace
}  // namespace ratelimit
