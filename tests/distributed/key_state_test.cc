// key_state_test.cc — DistributedStore's per-key state (src/distributed/key_state.h) driven by a
// ManualClock, the shared store being core's own math (algo::reserve, algo::add_hits: what
// distributed.lua mirrors): a lease's slices sized by the demand spent, answered locally, and
// given back exactly at their end; async pushes on their half-interval grid, none for a quiet
// key, the grid kept across a late wake-up; the failure policy's answer and its quiet interval.
// The test plays DistributedStore's part: it makes the calls KeyState asks for and feeds back
// the replies.
#include <gtest/gtest.h>

#include <vector>

#include "key_state.h"
#include "ratelimit/clock.h"
#include "ratelimit/failure_policy.h"

namespace ratelimit::distributed_detail {
namespace {

Policy with_mode(Consistency mode) {
  ConsistencyOptions c;
  c.mode = mode;
  c.sync_interval = Micros{100'000};
  c.lease_max = 10;
  c.lease_ttl = Micros{3'000'000};
  return Policy::fixed_window(100, Micros{10'000'000})->with_name("ks")->with_consistency(c).value();
}

struct Rig {
  explicit Rig(Consistency mode, Micros start) : policy(with_mode(mode)), clock(start), key(policy, "k", "ks/k") {}
  int64_t now() const { return clock.now().count(); }
  // Decides one unit now: true when answered here (the decision in `last`).
  bool decide(int64_t cost = 1) {
    return key.decide(cost, false, now(), 0, options, counters, &last,
                      [this](Decision d) { later.push_back(d); }, sends);
  }
  // The shared store answers every call asked for so far, now.
  void answer_all() {
    std::vector<Send> calls;
    calls.swap(sends);
    for (const Send& s : calls) {
      const algo::SharedView v = s.kind == Send::Kind::kReserve
                                     ? algo::reserve(policy, store, now(), s.window_us, s.give_back, s.want)
                                     : algo::add_hits(policy, store, now(), s.window_us, s.hits);
      reply(s, v);
    }
  }
  void reply(const Send& s, const Result<algo::SharedView>& v) {
    std::vector<Answer> answers;
    key.on_reply(s, v, now(), 0, options, counters, answers, sends);
    for (Answer& a : answers) a.done(a.decision);
  }
  void tick() { key.tick(now(), 0, options, counters, sends); }
  // The background thread just before `due` (nothing to send) and at it: the calls it makes.
  const std::vector<Send>& tick_at(int64_t due) {
    clock.set(Micros{due - 1});
    tick();
    EXPECT_TRUE(sends.empty()) << "a call before its time, " << due - 1;
    clock.set(Micros{due});
    tick();
    return sends;
  }

  Policy policy;
  ManualClock clock;
  KeyState key;
  DistributedStoreOptions options;
  Counters counters;
  algo::AlgorithmState store;
  std::vector<Send> sends;
  std::vector<Decision> later;
  Decision last;
};

TEST(KeyState, LeaseSlicesFollowTheDemandAndGoBackAtTheirEnd) {
  Rig r(Consistency::kLease, Micros{21'000'000});
  ASSERT_FALSE(r.decide());  // no slice yet: one reserve, for just this request (no demand)
  ASSERT_EQ(r.sends.size(), 1u);
  EXPECT_EQ(r.sends[0].want, 1);
  r.answer_all();
  ASSERT_EQ(r.later.size(), 1u);
  EXPECT_TRUE(r.later[0].allowed);

  r.clock.advance(Micros{100'000});  // the unit spent in 0.1 s: 10 units/s over a 3-s life
  ASSERT_FALSE(r.decide());
  ASSERT_EQ(r.sends.size(), 1u);
  EXPECT_EQ(r.sends[0].want, 10);  // 30 expected, capped at lease_max
  r.answer_all();
  ASSERT_EQ(r.later.size(), 2u);
  EXPECT_TRUE(r.later[1].allowed);
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(r.decide()) << "decided from the slice, no call";
    EXPECT_TRUE(r.last.allowed);
  }
  EXPECT_EQ(r.key.units_held(), 4u);
  // Granted at 21.1 s: it ends at 24.1 s (lease_ttl), before its window (30 s).
  EXPECT_EQ(r.key.due_at(0), 24'100'000);
  ASSERT_EQ(r.tick_at(24'100'000).size(), 1u);
  EXPECT_EQ(r.sends[0].give_back, 4);
  EXPECT_EQ(r.sends[0].want, 0);
  r.answer_all();
  EXPECT_EQ(r.key.units_held(), 0u);
  EXPECT_EQ(r.counters.lease_units_returned.load(), 4u);
}

TEST(KeyState, AsyncPushesOnAHalfIntervalGridAndNotWhenQuiet) {
  Rig r(Consistency::kAsync, Micros{5'000'000});
  ASSERT_FALSE(r.decide());  // the first request waits for one read
  ASSERT_EQ(r.sends.size(), 1u);
  EXPECT_EQ(r.sends[0].hits, 0);
  r.answer_all();
  ASSERT_EQ(r.later.size(), 1u);
  EXPECT_TRUE(r.later[0].allowed);
  r.clock.advance(Micros{10'000});
  ASSERT_TRUE(r.decide());  // on the fresh view
  EXPECT_EQ(r.key.units_pending(), 2u);
  EXPECT_EQ(r.key.due_at(0), 5'050'000);  // sync_interval / 2 after the read
  ASSERT_EQ(r.tick_at(5'050'000).size(), 1u);
  EXPECT_EQ(r.sends[0].hits, 2);
  r.answer_all();
  EXPECT_EQ(r.key.units_pending(), 0u);
  EXPECT_EQ(r.key.due_at(0), 5'100'000);
  // Quiet since that push: no call, the grid moves on — and a late wake-up keeps to the grid.
  r.clock.set(Micros{5'120'000});
  r.tick();
  EXPECT_TRUE(r.sends.empty());
  EXPECT_EQ(r.key.due_at(0), 5'150'000);
  ASSERT_TRUE(r.decide());
  r.clock.set(Micros{5'150'000});
  r.tick();
  ASSERT_EQ(r.sends.size(), 1u);
  EXPECT_EQ(r.sends[0].hits, 1);
}

TEST(KeyState, AFailedCallIsAnsweredByTheFailurePolicyThenQuietForAnInterval) {
  Rig r(Consistency::kLease, Micros{21'000'000});
  r.options.on_failure = FailurePolicy::kClosed;
  ASSERT_FALSE(r.decide());
  ASSERT_EQ(r.sends.size(), 1u);
  const Send sent = r.sends[0];
  r.sends.clear();
  r.reply(sent, Status::unavailable("redis down"));
  ASSERT_EQ(r.later.size(), 1u);
  EXPECT_EQ(r.later[0], failure_decision(FailurePolicy::kClosed, 100));
  EXPECT_EQ(r.later[0].retry_after, kFailedClosedRetryAfter);
  r.clock.advance(Micros{99'999});  // within sync_interval: answered so without a call
  ASSERT_TRUE(r.decide());
  EXPECT_EQ(r.last.reason, DecisionReason::kStoreFailedClosed);
  EXPECT_TRUE(r.sends.empty());
  EXPECT_EQ(r.counters.failed_closed.load(), 2u);
  r.clock.advance(Micros{1});  // the interval over: the store is asked again
  ASSERT_FALSE(r.decide());
  EXPECT_EQ(r.sends.size(), 1u);
}

}  // namespace
}  // namespace ratelimit::distributed_detail
