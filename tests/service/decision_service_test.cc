// decision_service_test.cc — the transport-neutral decision service driven in process, as a
// front-end drives it: on the memory store (answers inline, on the caller's thread, before
// decide() returns) and on a real Redis (decide() returns false; resume() comes once, from a
// store thread). The shadow/enforced split, all or nothing, counting, peeks, bad input and
// reset are checked on both through one set of scenarios.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "decision_service.h"
#include "ratelimit/memory_store.h"
#include "ratelimit/redis_store.h"
#include "redis_server.h"
#include "window_room.h"

namespace ratelimit::service {
namespace {

using Kind = StoreOp::Kind;

Policy fixed(int64_t limit, std::string name) {
  return Policy::fixed_window(limit, Micros{60'000'000}).value().with_name(std::move(name)).value();
}

// A front-end's Pending: waits for resume() and records the thread it came from.
class TestPending final : public Pending {
 public:
  void resume() override {
    std::lock_guard lock(mu_);
    ++resumes_;
    resumed_on_ = std::this_thread::get_id();
    cv_.notify_all();
  }
  // decide()'s return value in, true once the answer is there (bounded wait). A Pending is
  // reused: each asynchronous answer brings one more resume().
  bool wait(bool inline_answer) {
    if (inline_answer) return true;
    std::unique_lock lock(mu_);
    ++expected_;
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return resumes_ >= expected_; });
  }
  int resumes() {
    std::lock_guard lock(mu_);
    return resumes_;
  }
  std::thread::id resumed_on() {
    std::lock_guard lock(mu_);
    return resumed_on_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int resumes_ = 0;
  int expected_ = 0;
  std::thread::id resumed_on_;
};

struct CountingObserver final : Observer {
  std::atomic<int> decisions{0}, store_errors{0};
  void observe_decision(std::chrono::nanoseconds) override { ++decisions; }
  void count_store_error() override { ++store_errors; }
};

uint64_t count(const RuleCounters& c, Outcome o) {
  return c.outcomes[static_cast<size_t>(o)].load();
}

// Rules "a" (limit 2), "b" (limit 1), "shadow" (limit 1, shadow mode).
struct Fixture {
  RuleCounters ca, cb, cs;
  Snapshot snap;
  explicit Fixture(const std::string& prefix) {
    snap.rules.emplace("a", Rule{fixed(2, prefix + "a"), false, &ca});
    snap.rules.emplace("b", Rule{fixed(1, prefix + "b"), false, &cb});
    snap.rules.emplace("shadow", Rule{fixed(1, prefix + "shadow"), true, &cs});
  }
  const Rule* rule(std::string_view n) const { return snap.find(n); }
};

// Every scenario, on any store. `inline_store`: the store answers inline.
void run_scenarios(std::shared_ptr<Store> store, bool inline_store, const std::string& prefix) {
  // The rules are 60 s fixed windows on the real clock (the memory store's SystemClock, Redis'
  // TIME), aligned to the minute: a boundary mid-run would give their units back. The
  // scenarios take milliseconds; they start with 5 s of the minute left.
  testing::await_window_room(std::chrono::seconds(60), std::chrono::seconds(5));
  CountingObserver observer;
  DecisionService service(store, &observer);
  Fixture f(prefix);
  TestPending p;
  auto decide = [&](std::vector<Item> items, Atomicity a) {
    const bool now = service.decide(f.snap, items, a, p);
    // Redis may also answer before decide() returns: then it is answered "inline" too.
    if (inline_store) {
      EXPECT_TRUE(now);
    }
    ASSERT_TRUE(p.wait(now));
  };

  // Shadow: decided, counted as shadow_denied, answered as admitted; never in the group.
  decide({{f.rule("shadow"), "k"}}, Atomicity::kIndependent);
  ASSERT_TRUE(p.status.is_ok()) << p.status.to_string();
  EXPECT_TRUE(p.decisions[0].allowed);
  decide({{f.rule("a"), "k"}, {f.rule("b"), "k"}, {f.rule("shadow"), "k"}}, Atomicity::kAllOrNothing);
  ASSERT_TRUE(p.status.is_ok());
  ASSERT_EQ(p.decisions.size(), 3U);
  EXPECT_TRUE(p.decisions[0].allowed);  // the shadow denial did not block the group
  EXPECT_TRUE(p.decisions[1].allowed);
  EXPECT_TRUE(p.decisions[2].allowed);  // answered as admitted ...
  EXPECT_EQ(p.shadow_denied, (std::vector<uint8_t>{0, 0, 1}));  // ... but it was a denial
  EXPECT_EQ(p.decisions[2].retry_after, Micros{0});
  EXPECT_EQ(count(f.cs, Outcome::kAllowed), 1U);
  EXPECT_EQ(count(f.cs, Outcome::kShadowDenied), 1U);

  // All or nothing: b is full now, so a is not consumed.
  decide({{f.rule("a"), "k"}, {f.rule("b"), "k"}}, Atomicity::kAllOrNothing);
  EXPECT_TRUE(p.decisions[0].allowed);
  EXPECT_FALSE(p.decisions[1].allowed);
  EXPECT_EQ(p.shadow_denied, (std::vector<uint8_t>{0, 0}));
  // A peek counts nothing and shows a still has 1 left.
  decide({{f.rule("a"), "k", 1, Kind::kPeek}}, Atomicity::kIndependent);
  EXPECT_TRUE(p.decisions[0].allowed);
  EXPECT_EQ(p.decisions[0].remaining, 0);  // 2 - 1 taken - this one
  // Counted per decision: a admitted twice (consumed once, then admitted in the group b
  // denied), b admitted once and denied once.
  EXPECT_EQ(count(f.ca, Outcome::kAllowed), 2U);
  EXPECT_EQ(count(f.cb, Outcome::kAllowed), 1U);
  EXPECT_EQ(count(f.cb, Outcome::kDenied), 1U);
  // Independent: a consumes its last unit although b denies.
  decide({{f.rule("a"), "k"}, {f.rule("b"), "k"}}, Atomicity::kIndependent);
  EXPECT_TRUE(p.decisions[0].allowed);
  EXPECT_FALSE(p.decisions[1].allowed);
  decide({{f.rule("a"), "k"}}, Atomicity::kIndependent);
  EXPECT_FALSE(p.decisions[0].allowed);

  // Bad input: refused as kInvalidArgument, nothing consumed, not a store error.
  decide({{f.rule("a"), "fresh"}, {f.rule("b"), "fresh", 0}}, Atomicity::kIndependent);
  EXPECT_EQ(p.status.code(), StatusCode::kInvalidArgument);
  const int before = observer.store_errors.load();
  EXPECT_EQ(before, 0);
  std::vector<Item> none;
  EXPECT_TRUE(service.decide(f.snap, none, Atomicity::kIndependent, p));  // no store call at all
  EXPECT_EQ(p.status.code(), StatusCode::kInvalidArgument);
  decide({{f.rule("a"), "fresh", 1, Kind::kPeek}}, Atomicity::kIndependent);
  EXPECT_EQ(p.decisions[0].remaining, 1);  // the refused call took nothing

  // Reset.
  const bool now = service.reset(*f.rule("a"), "k", p);
  if (inline_store) {
    EXPECT_TRUE(now);
  }
  ASSERT_TRUE(p.wait(now));
  EXPECT_TRUE(p.status.is_ok()) << p.status.to_string();
  decide({{f.rule("a"), "k"}}, Atomicity::kIndependent);
  EXPECT_TRUE(p.decisions[0].allowed);
  EXPECT_EQ(p.decisions[0].remaining, 1);

  // Global shadow mode: every rule answers admitted, denials counted as shadow_denied.
  f.snap.shadow_all = true;
  decide({{f.rule("b"), "k"}, {f.rule("a"), "k"}}, Atomicity::kAllOrNothing);
  EXPECT_TRUE(p.decisions[0].allowed && p.decisions[1].allowed);
  EXPECT_EQ(p.shadow_denied[0], 1);
  EXPECT_GE(count(f.cb, Outcome::kShadowDenied), 1U);
  EXPECT_GT(observer.decisions.load(), 8);
  if (inline_store) {
    EXPECT_EQ(p.resumes(), 0);  // inline answers never resume
  }
}

TEST(DecisionService, MemoryStoreAnswersInline) {
  run_scenarios(std::make_shared<MemoryStore>(), true, "");
}

std::string test_redis_url() {
  auto url = ratelimit::testing::shared_test_redis_url();
  EXPECT_TRUE(url.ok()) << url.status().to_string();
  return url.ok() ? *url : "";
}

std::shared_ptr<RedisStore> redis_store(const std::string& prefix) {
  RedisStoreOptions o;
  o.url = test_redis_url();
  o.connections = 2;
  o.command_timeout = std::chrono::milliseconds(2000);
  o.key_prefix = prefix;
  auto s = RedisStore::connect(o);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? *s : nullptr;
}

std::string unique(const std::string& what) {
  return "rltest:svc:" + what + ":" + std::to_string(std::random_device{}()) + ":";
}

TEST(DecisionService, RedisStoreResumesFromAStoreThread) {
  auto store = redis_store(unique("scenarios"));
  ASSERT_NE(store, nullptr);
  run_scenarios(store, false, "");
  // Where resume() comes from (a reply may beat decide()'s return: then it is inline).
  DecisionService service(store, nullptr);
  Fixture f("");
  TestPending p;
  int asynchronous = 0;
  for (int i = 0; i < 20; ++i) {
    std::vector<Item> items = {{f.rule("a"), "other" + std::to_string(i)}};
    const bool now = service.decide(f.snap, items, Atomicity::kIndependent, p);
    ASSERT_TRUE(p.wait(now));
    if (now) continue;
    ++asynchronous;
    EXPECT_NE(p.resumed_on(), std::this_thread::get_id());
  }
  EXPECT_GT(asynchronous, 0);
  EXPECT_EQ(p.resumes(), asynchronous);
}

// 200 decisions on one rule at 10 per minute from 8 threads, each with its own Pending, on
// Redis: exactly 10 admitted, each Pending resumed exactly once per decision.
TEST(DecisionService, RedisExactUnderConcurrency) {
  auto store = redis_store(unique("race"));
  ASSERT_NE(store, nullptr);
  RuleCounters c;
  Snapshot snap;
  snap.rules.emplace("ten", Rule{fixed(10, "ten"), false, &c});
  // A 60 s window on Redis' clock: a minute boundary mid-run would admit 20. The 200
  // decisions take well under a second; they start with 10 s of the minute left.
  testing::await_window_room(std::chrono::seconds(60), std::chrono::seconds(10));
  DecisionService service(store, nullptr);
  std::atomic<int> allowed{0}, answered{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      TestPending p;
      int asynchronous = 0;
      for (int i = 0; i < 25; ++i) {
        std::vector<Item> items = {{snap.find("ten"), "hot"}};
        const bool now = service.decide(snap, items, Atomicity::kIndependent, p);
        asynchronous += now ? 0 : 1;
        if (!p.wait(now)) return;
        ++answered;
        if (p.status.is_ok() && p.decisions[0].allowed) ++allowed;
      }
      EXPECT_EQ(p.resumes(), asynchronous);  // exactly once per asynchronous answer
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(answered.load(), 200);
  EXPECT_EQ(allowed.load(), 10);
  EXPECT_EQ(count(c, Outcome::kAllowed), 10U);
  EXPECT_EQ(count(c, Outcome::kDenied), 190U);
}

}  // namespace
}  // namespace ratelimit::service
