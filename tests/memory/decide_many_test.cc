// decide_many_test.cc — MemoryStore::decide_many_async: identical to the pure functions on
// random multi-key calls (decide_many_mirror), all or nothing across keys, peek ops inside a
// group, input errors that change nothing, and exactness and deadlock freedom under threads
// deciding overlapping key pairs in opposite orders.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "decide_many_mirror.h"
#include "ratelimit/memory_store.h"

namespace ratelimit {
namespace {

Policy fixed(int64_t limit, std::string name) {
  return Policy::fixed_window(limit, Micros{60'000'000}).value().with_name(std::move(name)).value();
}

MemoryStoreOptions with_clock(const ManualClock& clock, size_t shards = 64) {
  MemoryStoreOptions o;
  o.clock = &clock;
  o.shards = shards;
  return o;
}

TEST(MemoryStoreDecideMany, IdenticalToThePureFunctions) {
  for (size_t shards : {1, 64}) {  // one shard: every op of a group under one lock
    ManualClock clock;
    MemoryStore store(with_clock(clock, shards));
    const auto policies = vectors::decide_many_policies();
    auto failures = vectors::check_decide_many(store, clock, policies, 3000, 7, "m:");
    EXPECT_TRUE(failures.empty()) << failures.size() << " mismatches, first: " << failures.front();
  }
}

TEST(MemoryStoreDecideMany, AllOrNothingAcrossKeysConsumesNothingOnADenial) {
  ManualClock clock;
  MemoryStore store(with_clock(clock));
  const Policy user = fixed(5, "user"), tenant = fixed(2, "tenant");
  std::vector<StoreOp> ops = {{&user, "alice", 1}, {&tenant, "acme", 1}};
  for (int i = 0; i < 2; ++i) {
    auto d = store.decide_many(ops, Atomicity::kAllOrNothing);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    EXPECT_TRUE((*d)[0].allowed && (*d)[1].allowed);
  }
  auto denied = store.decide_many(ops, Atomicity::kAllOrNothing);
  ASSERT_TRUE(denied.ok());
  EXPECT_TRUE((*denied)[0].allowed);   // alice alone would pass ...
  EXPECT_FALSE((*denied)[1].allowed);  // ... but the tenant is full
  EXPECT_EQ(store.peek(user, "alice")->remaining, 2);  // 5 - 2 - this peek: nothing taken
  // Independent: alice consumes even though the tenant denies.
  auto independent = store.decide_many(ops, Atomicity::kIndependent);
  ASSERT_TRUE(independent.ok());
  EXPECT_TRUE((*independent)[0].allowed);
  EXPECT_FALSE((*independent)[1].allowed);
  EXPECT_EQ((*independent)[0].remaining, 2);
}

TEST(MemoryStoreDecideMany, PeekOpsCheckButNeverConsumeOrCreate) {
  ManualClock clock;
  MemoryStore store(with_clock(clock));
  const Policy a = fixed(3, "a"), b = fixed(1, "b");
  std::vector<StoreOp> ops = {{&a, "k", 1, StoreOp::Kind::kAcquire},
                              {&b, "k", 1, StoreOp::Kind::kPeek}};
  for (int i = 0; i < 3; ++i) {
    auto d = store.decide_many(ops, Atomicity::kAllOrNothing);
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE((*d)[0].allowed) << i;
    EXPECT_TRUE((*d)[1].allowed) << i;  // b is only checked: never filled
  }
  EXPECT_EQ(store.key_count(), 1U);  // a's entry; the peeked b never got one
  ASSERT_TRUE(store.acquire(b, "k").ok());
  auto d = store.decide_many(ops, Atomicity::kAllOrNothing);
  ASSERT_TRUE(d.ok());
  EXPECT_FALSE((*d)[1].allowed);  // b full now: the check denies, so a is not consumed
  EXPECT_FALSE((*d)[0].allowed);  // a is full too (3 taken)
}

TEST(MemoryStoreDecideMany, BadInputIsRefusedWholeAndChangesNothing) {
  ManualClock clock;
  MemoryStore store(with_clock(clock));
  const Policy p = fixed(3, "p");
  auto code = [&](std::vector<StoreOp> ops, Atomicity a) {
    return store.decide_many(ops, a).status().code();
  };
  EXPECT_EQ(code({}, Atomicity::kIndependent), StatusCode::kInvalidArgument);
  EXPECT_EQ(code(std::vector<StoreOp>(kMaxOpsPerCall + 1, StoreOp{&p, "k"}), Atomicity::kIndependent),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(code({{&p, "ok"}, {nullptr, "k"}}, Atomicity::kIndependent), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({{&p, "ok"}, {&p, ""}}, Atomicity::kIndependent), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({{&p, "ok"}, {&p, "k", 0}}, Atomicity::kIndependent), StatusCode::kInvalidArgument);
  EXPECT_EQ(code({{&p, "ok"}, {&p, "k", kMaxCost + 1}}, Atomicity::kAllOrNothing),
            StatusCode::kInvalidArgument);
  auto twice = store.decide_many(std::vector<StoreOp>{{&p, "k"}, {&p, "k"}}, Atomicity::kAllOrNothing);
  EXPECT_EQ(twice.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(twice.status().message().find("twice"), std::string::npos) << twice.status().message();
  EXPECT_EQ(store.key_count(), 0U);  // the valid first ops were not decided either
  // Independent ops may repeat a state: each is decided in turn.
  auto repeat = store.decide_many(std::vector<StoreOp>{{&p, "k", 2}, {&p, "k", 2}}, Atomicity::kIndependent);
  ASSERT_TRUE(repeat.ok());
  EXPECT_TRUE((*repeat)[0].allowed);
  EXPECT_FALSE((*repeat)[1].allowed);
}

TEST(MemoryStoreDecideMany, CompletesInlineWithTheDecisions) {
  MemoryStore store;
  const Policy p = fixed(3, "p");
  const std::thread::id caller = std::this_thread::get_id();
  bool called = false;
  std::vector<StoreOp> ops = {{&p, "x"}, {&p, "y"}};
  store.decide_many_async(ops, Atomicity::kAllOrNothing, [&](Result<std::span<const Decision>> r) {
    called = true;
    EXPECT_EQ(std::this_thread::get_id(), caller);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->size(), 2U);
  });
  EXPECT_TRUE(called);  // before decide_many_async returned
}

// Threads decide pairs (x, y) and (y, x) all or nothing while others take singles: no
// deadlock (shards locked in ascending order), and exactly `limit` units taken per key.
TEST(MemoryStoreDecideMany, ExactAndDeadlockFreeUnderThreads) {
  MemoryStore store(MemoryStoreOptions{.max_keys = 1000, .shards = 4});
  const Policy p = fixed(100, "p");
  std::atomic<int> taken_x{0}, taken_y{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        std::vector<StoreOp> ops;
        if (t % 3 == 2) {
          ops = {{&p, t % 2 == 0 ? "x" : "y"}};
        } else if (t % 2 == 0) {
          ops = {{&p, "x"}, {&p, "y"}};
        } else {
          ops = {{&p, "y"}, {&p, "x"}};
        }
        auto d = store.decide_many(ops, Atomicity::kAllOrNothing);
        ASSERT_TRUE(d.ok());
        const bool all = std::all_of(d->begin(), d->end(), [](const Decision& x) { return x.allowed; });
        if (!all) continue;
        for (const StoreOp& op : ops) (op.key == "x" ? taken_x : taken_y).fetch_add(1);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(taken_x.load(), 100);
  EXPECT_EQ(taken_y.load(), 100);
}

}  // namespace
}  // namespace ratelimit
