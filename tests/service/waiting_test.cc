// waiting_test.cc — the waiting service's loop in process (src/service/waiting*.cc), on a
// MemoryStore whose decisions run on a ManualClock, so every denial, retry_after and lease is the
// same on every run and at any time of day: waiters admitted in arrival order as releases free
// units, a full queue answered at once, a denial whose retry lies past the budget not waited on
// (algo::worth_waiting) while one within it is, a cancelled waiter leaving at no cost, and
// shutdown answering every waiter with the denial it waited on. The waits themselves are bounded
// polls of the service's own state (stats(), resume()): nothing depends on the machine's speed.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>

#include "decision_service.h"
#include "eventually.h"
#include "ratelimit/memory_store.h"
#include "waiting.h"

namespace ratelimit::service {
namespace {

using testing::eventually;

class Answer final : public Pending {
 public:
  void resume() override { resumed.fetch_add(1); }
  std::atomic<int> resumed{0};
};

struct Rig {
  Rig() {
    MemoryStoreOptions o;
    o.clock = &clock;
    service = std::make_unique<DecisionService>(std::make_shared<MemoryStore>(o), nullptr);
    waiting = std::make_unique<WaitingService>(*service);
  }
  ~Rig() { waiting.reset(); }
  // Adds rule `name`: waits up to 60 s (the loop's clock), 2 waiters per key at most.
  const Rule* rule(const std::string& name, Policy policy) {
    Rule r{std::move(policy).with_name(name).value(), false, &counters};
    r.max_wait = Micros{60'000'000};
    r.max_queue = 2;
    return &snap.rules.emplace(name, std::move(r)).first->second;
  }
  // true: answered now (in `a`); false: waiting (a.resumed comes later).
  bool acquire(const Rule* r, Answer& a, Micros budget = Micros::max()) {
    Item item{r, "k"};
    return waiting->decide(snap, {&item, 1}, Atomicity::kIndependent, budget, a);
  }
  void release(const Rule* r, const LeaseId& lease) {
    Answer a;
    Item item{r, "k", 1, StoreOp::Kind::kRelease, nullptr, lease};
    ASSERT_TRUE(service->decide(snap, {&item, 1}, Atomicity::kIndependent, a));  // inline: memory
    ASSERT_TRUE(a.decisions.at(0).allowed);
  }

  ManualClock clock{Micros{1'700'000'000'000'000}};
  RuleCounters counters;
  Snapshot snap;
  std::unique_ptr<DecisionService> service;
  std::unique_ptr<WaitingService> waiting;
};

TEST(Waiting, WaitersAreAdmittedInArrivalOrderAsReleasesFreeUnits) {
  Rig r;
  const Rule* one = r.rule("one", Policy::concurrency(1, Micros{600'000'000}).value());
  Answer a, b, c, d;
  ASSERT_TRUE(r.acquire(one, a));
  ASSERT_TRUE(a.decisions.at(0).allowed);
  EXPECT_FALSE(r.acquire(one, b));
  ASSERT_TRUE(eventually([&] { return r.waiting->stats().waiting == 1; }));
  EXPECT_FALSE(r.acquire(one, c));
  ASSERT_TRUE(eventually([&] { return r.waiting->stats().waiting == 2; }));
  EXPECT_FALSE(r.acquire(one, d));  // its key has waiters: the waiting thread takes it ...
  ASSERT_TRUE(eventually([&] { return d.resumed.load() == 1; }));
  EXPECT_FALSE(d.decisions.at(0).allowed) << "... and a full queue answers it at once";
  EXPECT_EQ(r.waiting->stats().queue_full, 1u);

  r.release(one, a.decisions[0].lease);
  ASSERT_TRUE(eventually([&] { return b.resumed.load() == 1; }));
  EXPECT_TRUE(b.decisions.at(0).allowed) << "the first waiter first";
  EXPECT_EQ(c.resumed.load(), 0);
  r.release(one, b.decisions[0].lease);
  ASSERT_TRUE(eventually([&] { return c.resumed.load() == 1; }));
  EXPECT_TRUE(c.decisions.at(0).allowed);
  const WaitStats s = r.waiting->stats();
  EXPECT_EQ(s.waited, 2u);
  EXPECT_EQ(s.admitted, 2u);
  EXPECT_EQ(s.waiting, 0);
}

TEST(Waiting, ARateDenialIsWaitedOnOnlyWithinTheBudget) {
  Rig r;
  // One unit per 10 s window: the second request could pass at the next window, 10 s away on
  // the manual clock (which stands still).
  r.clock.set(Micros{1'700'000'000'000'000});  // a window boundary: retry_after is 10 s exactly
  const Rule* rate = r.rule("rate", Policy::fixed_window(1, Micros{10'000'000}).value());
  Answer first, too_short, within;
  ASSERT_TRUE(r.acquire(rate, first));
  ASSERT_TRUE(first.decisions.at(0).allowed);
  ASSERT_TRUE(r.acquire(rate, too_short, Micros{9'999'999})) << "10 s > the budget: not worth waiting";
  EXPECT_FALSE(too_short.decisions.at(0).allowed);
  EXPECT_EQ(too_short.decisions[0].retry_after, Micros{10'000'000});
  EXPECT_EQ(r.waiting->stats().waited, 0u);

  EXPECT_FALSE(r.acquire(rate, within, Micros{30'000'000}));
  ASSERT_TRUE(eventually([&] { return r.waiting->stats().waiting == 1; }));
  r.waiting->cancel(within);  // the client went away: it leaves at once, at no store call
  ASSERT_TRUE(eventually([&] { return within.resumed.load() == 1; }));
  const WaitStats s = r.waiting->stats();
  EXPECT_EQ(s.cancelled, 1u);
  EXPECT_EQ(s.waiting, 0);
  EXPECT_EQ(s.wakeups, 0u);
}

TEST(Waiting, ShutdownAnswersEveryWaiterWithTheDenialItWaitedOn) {
  Rig r;
  const Rule* one = r.rule("one", Policy::concurrency(1, Micros{600'000'000}).value());
  Answer a, b;
  ASSERT_TRUE(r.acquire(one, a));
  EXPECT_FALSE(r.acquire(one, b));
  ASSERT_TRUE(eventually([&] { return r.waiting->stats().waiting == 1; }));
  r.waiting->shutdown();
  ASSERT_TRUE(eventually([&] { return b.resumed.load() == 1; }));
  ASSERT_TRUE(b.status.is_ok());
  EXPECT_FALSE(b.decisions.at(0).allowed);
  EXPECT_EQ(b.decisions[0].reason, DecisionReason::kOverLimit);
  EXPECT_GT(b.decisions[0].retry_after, Micros{0});
  EXPECT_EQ(r.waiting->stats().shutdown, 1u);
  Answer later;
  EXPECT_TRUE(r.acquire(one, later)) << "after shutdown nothing waits";
  EXPECT_FALSE(later.decisions.at(0).allowed);
}

}  // namespace
}  // namespace ratelimit::service
