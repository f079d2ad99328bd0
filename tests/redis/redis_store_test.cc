// redis_store_test.cc — RedisStore against a real redis-server: the shared test vectors, a
// randomised comparison with the pure functions (every algorithm, every mode), acquire_all,
// exactness under concurrency, SCRIPT FLUSH mid-run, TTLs, hostile keys, configuration errors
// and the failure policy.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>
#include <regex>
#include <thread>

#include "ratelimit/algorithms.h"
#include "ratelimit/redis_store.h"
#include "redis_server.h"
#include "script_codec.h"
#include "store_test_util.h"
#include "vectors.h"
#include "window_room.h"

namespace ratelimit::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

using RedisStoreTest = RedisTest;

// --- Same decisions as the pure functions --------------------------------------------------

TEST_F(RedisStoreTest, SharedVectorsGiveIdenticalDecisions) {
  ManualClock clock;
  auto o = options_for(url_);
  o.test_clock = &clock;
  o.key_prefix = unique_prefix("vectors");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  auto files = vectors::load_all(RATELIMIT_VECTORS_DIR);
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  ASSERT_EQ(files->size(), std::size(vectors::kAllAlgorithms));
  for (const auto& f : *files) {
    ASSERT_FALSE(f.cases.empty()) << f.path;
    auto failures = vectors::run_vectors(*store, clock, f);
    EXPECT_TRUE(failures.empty()) << vectors::format_failures(failures);
  }
  EXPECT_EQ(store->counters().errors, 0u);
}


TEST_F(RedisStoreTest, RandomisedSequencesMatchThePureFunctions) {
  ManualClock clock(Micros{1'700'000'000'000'000});
  auto o = options_for(url_);
  o.test_clock = &clock;
  o.key_prefix = unique_prefix("mirror");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  std::mt19937_64 rng(20240601);
  for (const Policy& p : mirror_policies()) {
    algo::AlgorithmState state = algo::fresh_state(p);
    for (int i = 0; i < 250; ++i) {
      // Mostly small steps (several requests per window), some jumps, a few steps back.
      const int kind = static_cast<int>(rng() % 20);
      int64_t dt = static_cast<int64_t>(rng() % 150'000);
      if (kind == 0) dt = static_cast<int64_t>(rng() % 5'000'000);
      if (kind == 1) dt = -static_cast<int64_t>(rng() % 50'000);
      if (kind == 2) dt = 0;
      clock.advance(Micros{dt});
      const int64_t cost = rng() % 10 == 0 ? static_cast<int64_t>(1 + rng() % (p.limit() + 2))
                                           : 1 + static_cast<int64_t>(rng() % 2);
      const bool peek = rng() % 5 == 0;
      const algo::Op op = peek ? algo::Op::kPeek : algo::Op::kAcquire;
      const Decision want = algo::decide(p, state, clock.now().count(), cost, op);
      auto got = peek ? store->peek(p, "k", cost) : store->acquire(p, "k", cost);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      ASSERT_EQ(*got, want) << p.name() << " step " << i << " t=" << clock.now().count()
                            << " cost=" << cost << (peek ? " peek" : " acquire")
                            << ": got allowed=" << got->allowed
                            << " reason=" << decision_reason_name(got->reason)
                            << " remaining=" << got->remaining
                            << " reset=" << got->reset_after.count()
                            << " retry=" << got->retry_after.count()
                            << " delay=" << got->delay.count() << "; want allowed=" << want.allowed
                            << " reason=" << decision_reason_name(want.reason)
                            << " remaining=" << want.remaining
                            << " reset=" << want.reset_after.count()
                            << " retry=" << want.retry_after.count()
                            << " delay=" << want.delay.count();
    }
  }
  EXPECT_EQ(store->counters().errors, 0u);
}

TEST_F(RedisStoreTest, AcquireAllMatchesDecideAll) {
  ManualClock clock(Micros{1'700'000'000'000'000});
  auto o = options_for(url_);
  o.test_clock = &clock;
  o.key_prefix = unique_prefix("all");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  const std::vector<Policy> all = mirror_policies();
  std::mt19937_64 rng(7);
  // Groups of 2-4 policies of mixed algorithms, each with its own key.
  for (int g = 0; g < 12; ++g) {
    std::vector<Policy> ps;
    std::vector<algo::AlgorithmState> states;
    const size_t n = 2 + rng() % 3;
    while (ps.size() < n) {
      const Policy& p = all[rng() % all.size()];
      bool dup = false;
      for (auto& q : ps) dup = dup || q.name() == p.name();
      if (dup) continue;
      ps.push_back(p.with_count_denied(false));
      states.push_back(algo::fresh_state(p));
    }
    const std::string key = "group" + std::to_string(g);
    for (int i = 0; i < 60; ++i) {
      clock.advance(Micros{static_cast<int64_t>(rng() % 200'000)});
      const int64_t cost = 1 + static_cast<int64_t>(rng() % 2);
      std::vector<algo::Limit> limits;
      for (size_t j = 0; j < ps.size(); ++j) limits.push_back({&ps[j], &states[j]});
      std::vector<Decision> want;
      // Whether all admitted is in `want` too (one decision per limit), which is compared.
      (void)algo::decide_all(limits, clock.now().count(), cost, algo::Op::kAcquire, want);
      auto got = store->acquire_all(ps, key, cost);
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      ASSERT_EQ(*got, want) << "group " << g << " step " << i;
    }
  }
}

TEST_F(RedisStoreTest, AcquireAllIsAllOrNothing) {
  auto o = options_for(url_);
  o.key_prefix = unique_prefix("aon");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  std::vector<Policy> ps = {named(Policy::fixed_window(2, seconds(60)), "small"),
                            named(Policy::sliding_window_log(5, seconds(60)), "big")};
  // "small" is a 60 s fixed window on Redis' clock (aligned to the minute): a boundary between
  // these calls would give its units back. They take milliseconds; 5 s of the minute is left.
  await_window_room(ps, seconds(5));
  for (int i = 0; i < 2; ++i) {
    auto d = store->acquire_all(ps, "u", 1);
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE((*d)[0].allowed && (*d)[1].allowed);
  }
  auto denied = store->acquire_all(ps, "u", 1);
  ASSERT_TRUE(denied.ok());
  EXPECT_FALSE((*denied)[0].allowed);
  EXPECT_TRUE((*denied)[1].allowed);  // would have admitted, but consumed nothing
  auto big = store->peek(ps[1], "u", 1);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->remaining, 2);  // 5 - 2 consumed - 1 for this peek
  // Invalid policy lists are errors, not decisions.
  std::vector<Policy> twice = {ps[0], ps[0]};
  EXPECT_EQ(store->acquire_all(twice, "u", 1).status().code(), StatusCode::kInvalidArgument);
}

// A peek of cost 0 (redis-cell's CL.THROTTLE quantity 0, state_peek.h) through the scripts:
// every rate algorithm answers its state as the pure function does, and writes nothing — no
// key on a fresh one; an acquire of 0 and a concurrency policy's peek of 0 stay errors.
TEST_F(RedisStoreTest, PeekOfCostZeroAnswersTheStateAndWritesNothing) {
  ManualClock clock(Micros{1'000'000'000'000});
  auto o = options_for(url_);
  o.test_clock = &clock;
  o.key_prefix = unique_prefix("peek0");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  for (const Policy& p : limit_ten_policies()) {
    ASSERT_TRUE(store->peek(p, "fresh", 0)->allowed) << p.name();
    EXPECT_EQ(client_->command({"EXISTS", redis_state_key(o.key_prefix, "fresh", p.name())})->integer, 0) << p.name();
    algo::AlgorithmState state = algo::fresh_state(p);
    for (int i = 0; i < 3; ++i) {
      ASSERT_TRUE(store->acquire(p, "k")->allowed) << p.name();
      (void)algo::decide(p, state, clock.now().count(), 1, algo::Op::kAcquire);
    }
    clock.advance(Micros{2'000'000});
    const Decision want = algo::decide(p, state, clock.now().count(), 0, algo::Op::kPeek);
    for (int i = 0; i < 2; ++i) {  // and again: the first peek recorded nothing
      auto got = store->peek(p, "k", 0);
      ASSERT_TRUE(got.ok()) << p.name() << ": " << got.status().message();
      EXPECT_TRUE(got->allowed) << p.name();
      EXPECT_EQ(got->remaining, want.remaining) << p.name();
      EXPECT_LT(got->remaining, 10) << p.name();  // the acquires are seen
      EXPECT_EQ(got->reset_after, want.reset_after) << p.name();
    }
    EXPECT_EQ(store->acquire(p, "k", 0).status().code(), StatusCode::kInvalidArgument) << p.name();
  }
  const Policy c = named(Policy::concurrency(2, std::chrono::seconds(1)), "c");
  EXPECT_EQ(store->peek(c, "k", 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store->counters().errors, 0u);
}

TEST_F(RedisStoreTest, ResetForgetsTheKey) {
  auto o = options_for(url_);
  o.key_prefix = unique_prefix("reset");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  auto p = named(Policy::sliding_window_log(1, seconds(60)), "once");
  EXPECT_TRUE(store->acquire(p, "k")->allowed);
  EXPECT_FALSE(store->acquire(p, "k")->allowed);
  ASSERT_TRUE(store->reset(p, "k").is_ok());
  EXPECT_TRUE(store->acquire(p, "k")->allowed);
}

// --- Exactness under concurrency -----------------------------------------------------------

TEST_F(RedisStoreTest, ExactlyTenOf200With50InFlightForEveryAlgorithm) {
  auto o = options_for(url_);
  o.key_prefix = unique_prefix("exact");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  for (const Policy& p : limit_ten_policies()) {
    // fw10 and swc10 count in 60 s windows on Redis' clock (aligned to the minute): a boundary
    // mid-round would admit 20. A round takes well under a second; it starts with 10 s left.
    await_window_room(p, seconds(10));
    auto r = fire(200, 50, [&](auto done) { store->acquire_async(p, "hot", 1, std::move(done)); });
    ASSERT_TRUE(r.finished) << p.name();
    EXPECT_EQ(r.allowed, 10) << p.name();
    EXPECT_EQ(r.denied, 190) << p.name();
    EXPECT_EQ(r.failed + r.errors, 0) << p.name();
  }
}

TEST_F(RedisStoreTest, ScriptFlushMidRunIsInvisibleAndCountsStayExact) {
  auto o = options_for(url_);
  o.use_functions = false;  // the EVALSHA path (FUNCTION FLUSH: functions_batch_test.cc)
  o.key_prefix = unique_prefix("flush");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  const auto before = store->counters();
  for (const Policy& base : limit_ten_policies()) {
    // limit 500 of 1000 requests, in four waves; SCRIPT FLUSH while each wave is in flight.
    Policy p = base.algorithm() == Algorithm::kFixedWindow
                   ? named(Policy::fixed_window(500, seconds(60)), "fw500")
               : base.algorithm() == Algorithm::kSlidingWindowLog
                   ? named(Policy::sliding_window_log(500, seconds(60)), "swl500")
               : base.algorithm() == Algorithm::kSlidingWindowCounter
                   ? named(Policy::sliding_window_counter(500, seconds(60)), "swc500")
               : base.algorithm() == Algorithm::kTokenBucket
                   ? named(Policy::token_bucket(1e-6, 500), "tb500")
                   : named(Policy::leaky_bucket(1e-6, 500), "lb500");
    // Four waves of one 60 s window on Redis' clock (fw500, swc500): a minute boundary between
    // them would admit more than 500. They take well under a second; 10 s of the minute left.
    await_window_room(p, seconds(10));
    int allowed = 0;
    for (int wave = 0; wave < 4; ++wave) {
      std::thread flusher([&] {
        auto c = RedisClient::connect(url_);
        ASSERT_TRUE(c.ok());
        auto r = c->command({"SCRIPT", "FLUSH"});
        ASSERT_TRUE(r.ok());
        EXPECT_EQ(r->str, "OK");
      });
      auto r = fire(250, 250, [&](auto done) { store->acquire_async(p, "k", 1, std::move(done)); });
      flusher.join();
      ASSERT_TRUE(r.finished);
      EXPECT_EQ(r.failed + r.errors, 0) << p.name() << " wave " << wave;
      allowed += r.allowed;
    }
    EXPECT_EQ(allowed, 500) << p.name();
  }
  const auto after = store->counters();
  EXPECT_GT(after.script_reloads, before.script_reloads);
  EXPECT_EQ(after.errors, before.errors);
  EXPECT_EQ(after.failed_open + after.failed_closed, 0u);
}

// --- State layout ---------------------------------------------------------------------------

// HGETALL of `key` as a field -> value map.
std::map<std::string, std::string> hash_of(RedisClient& client, const std::string& key) {
  std::map<std::string, std::string> out;
  auto r = client.command({"HGETALL", key});
  if (!r.ok()) return out;
  for (size_t i = 0; i + 1 < r->elements.size(); i += 2) {
    out[r->elements[i].str] = r->elements[i + 1].str;
  }
  return out;
}

// A fixed window is a hash with one field, named by the window's start and its definition,
// holding its count (fixed_window.lua, layout 3): a new window, a clock stepping back and a
// denial leave exactly one field, the core's state.
TEST_F(RedisStoreTest, FixedWindowHoldsOneFieldNamedByItsWindow) {
  ManualClock clock(Micros{5'000'000'300'000});
  auto o = options_for(url_);
  o.test_clock = &clock;
  o.key_prefix = unique_prefix("layout");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  const auto p = named(Policy::fixed_window(2, seconds(1)), "fw");
  const std::string key = redis_state_key(o.key_prefix, "u", p.name());
  using Fields = std::map<std::string, std::string>;
  ASSERT_TRUE(store->acquire(p, "u")->allowed);
  EXPECT_EQ(hash_of(*client_, key), (Fields{{"5000000000000/0:1000000:0", "1"}}));
  ASSERT_TRUE(store->acquire(p, "u")->allowed);
  EXPECT_FALSE(store->acquire(p, "u")->allowed);  // the denial is undone: still 2
  EXPECT_EQ(hash_of(*client_, key), (Fields{{"5000000000000/0:1000000:0", "2"}}));
  clock.advance(Micros{-400'000});  // back into the previous window: counted in the stored one
  EXPECT_FALSE(store->acquire(p, "u")->allowed);
  EXPECT_EQ(hash_of(*client_, key), (Fields{{"5000000000000/0:1000000:0", "2"}}));
  clock.advance(Micros{1'500'000});  // the next window (test mode: the old key has not expired)
  ASSERT_TRUE(store->acquire(p, "u")->allowed);
  EXPECT_EQ(hash_of(*client_, key), (Fields{{"5000001000000/0:1000000:0", "1"}}));
  EXPECT_GT(client_->command({"PTTL", key})->integer, 0);
}

// A key written by a build before layout 2 (fields window_start_us and count) keeps its count:
// the first write after the upgrade reads it and replaces it by the one-field layout, keeping
// the key's TTL when the window is the same.
TEST_F(RedisStoreTest, FixedWindowKeepsTheCountOfTheOlderLayout) {
  ManualClock clock(Micros{7'000'000'250'000});
  auto o = options_for(url_);
  o.test_clock = &clock;
  o.key_prefix = unique_prefix("layout1");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  const auto p = named(Policy::fixed_window(5, seconds(1)), "fw");
  const std::string key = redis_state_key(o.key_prefix, "u", p.name());
  ASSERT_TRUE(client_->command({"HSET", key, "window_start_us", "7000000000000", "count", "3"}).ok());
  ASSERT_TRUE(client_->command({"PEXPIRE", key, "900000"}).ok());
  auto peek = store->peek(p, "u");
  ASSERT_TRUE(peek.ok());
  EXPECT_EQ(peek->remaining, 1);  // what an acquire would leave: 5 - (3 + 1)
  auto d = store->acquire(p, "u");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->remaining, 1);
  using Fields = std::map<std::string, std::string>;
  EXPECT_EQ(hash_of(*client_, key), (Fields{{"7000000000000/0:1000000:0", "4"}}));
  EXPECT_GT(client_->command({"PTTL", key})->integer, 800'000);  // the TTL it had
  ASSERT_TRUE(store->acquire(p, "u")->allowed);
  EXPECT_FALSE(store->acquire(p, "u")->allowed);
}

// A key written by the build before definitions were kept (layout 2: one field named by the
// window's start alone) is read as this definition's count and rewritten in layout 3.
TEST_F(RedisStoreTest, FixedWindowKeepsTheCountOfLayoutTwo) {
  ManualClock clock(Micros{7'000'000'250'000});
  auto o = options_for(url_);
  o.test_clock = &clock;
  o.key_prefix = unique_prefix("layout2");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  const auto p = named(Policy::fixed_window(5, seconds(1)), "fw");
  const std::string key = redis_state_key(o.key_prefix, "u", p.name());
  ASSERT_TRUE(client_->command({"HSET", key, "7000000000000", "3"}).ok());
  ASSERT_TRUE(client_->command({"PEXPIRE", key, "900000"}).ok());
  auto d = store->acquire(p, "u");
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->remaining, 1);
  using Fields = std::map<std::string, std::string>;
  EXPECT_EQ(hash_of(*client_, key), (Fields{{"7000000000000/0:1000000:0", "4"}}));
  ASSERT_TRUE(store->acquire(p, "u")->allowed);
  EXPECT_FALSE(store->acquire(p, "u")->allowed);
}

// --- Two definitions of one name (issue 31) -----------------------------------------------------

// Two clients using one policy name with different algorithms used to share one hash, each
// reading its own fields: together they admitted 21 against a limit of 10. A state now keeps
// its definition; a call under another meaning (Policy::same_state_meaning) is refused with
// kPolicyConflict, counts nothing and leaves the state as it was, and the name's definitions
// never admit more together than the first one's limit while its state lives.
TEST_F(RedisStoreTest, AnotherMeaningOfTheNameIsRefusedAndCountsNothing) {
  ManualClock clock(Micros{9'000'000'000'000});
  auto o = options_for(url_);
  o.test_clock = &clock;
  o.key_prefix = unique_prefix("conflict");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  const Micros minute{60'000'000};
  const Policy defs[] = {
      named(Policy::fixed_window(10, minute), "api"),
      named(Policy::sliding_window_log(10, minute), "api"),
      named(Policy::sliding_window_counter(10, minute), "api"),
      named(Policy::token_bucket(0.1, 10), "api"),
      named(Policy::leaky_bucket(0.1, 10), "api"),
      named(Policy::concurrency(10, minute), "api"),
      named(Policy::fixed_window(10, Micros{3'600'000'000}), "api"),  // another window
      named(Policy::fixed_window(10, minute).value().with_count_denied(), "api"),
      named(Policy::fixed_window_every_hit(10, minute), "api"),
  };
  const size_t n = std::size(defs);
  for (size_t first = 0; first < n; ++first) {
    for (size_t second = 0; second < n; ++second) {
      if (first == second) continue;
      const std::string user = "u" + std::to_string(first) + "_" + std::to_string(second);
      const std::string key = redis_state_key(o.key_prefix, user, "api");
      int admitted = 0;
      for (int i = 0; i < 3; ++i) admitted += store->acquire(defs[first], user)->allowed;
      ASSERT_EQ(admitted, 3);
      const auto before = hash_of(*client_, key);
      for (int i = 0; i < 30; ++i) {
        auto d = store->acquire(defs[second], user);
        ASSERT_TRUE(d.ok()) << first << " then " << second;
        ASSERT_FALSE(d->allowed) << first << " then " << second;
        ASSERT_EQ(d->reason, DecisionReason::kPolicyConflict) << first << " then " << second;
        EXPECT_EQ(d->remaining, 0);
        EXPECT_EQ(d->limit, 10);
        EXPECT_GT(d->retry_after.count(), 0);
        EXPECT_EQ(d->reset_after, d->retry_after);
      }
      auto peek = store->peek(defs[second], user);
      ASSERT_TRUE(peek.ok());
      EXPECT_EQ(peek->reason, DecisionReason::kPolicyConflict) << first << " then " << second;
      EXPECT_EQ(hash_of(*client_, key), before) << first << " then " << second;
      // The first definition still sees its own 3 and admits 7 more, no more.
      for (int i = 0; i < 20; ++i) admitted += store->acquire(defs[first], user)->allowed;
      EXPECT_EQ(admitted, 10) << first << " then " << second;
    }
  }
}

// What does not change a state's meaning applies to the live state: a new limit, a bucket's
// rate. A batch answers a conflict for its item alone; an all-or-nothing call is refused whole.
TEST_F(RedisStoreTest, ALimitChangeKeepsTheCountAndAConflictStaysInItsItem) {
  ManualClock clock(Micros{9'100'000'000'000});
  auto o = options_for(url_);
  o.test_clock = &clock;
  o.key_prefix = unique_prefix("conflict2");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  const Micros minute{60'000'000};
  const Policy three = named(Policy::fixed_window(3, minute), "api");
  const Policy five = named(Policy::fixed_window(5, minute), "api");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store->acquire(three, "k")->allowed);
  auto d = store->acquire(five, "k");
  EXPECT_TRUE(d->allowed);
  EXPECT_EQ(d->remaining, 1);
  const Policy slow = named(Policy::token_bucket(1, 5), "b");
  const Policy fast = named(Policy::token_bucket(100, 5), "b");
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(store->acquire(slow, "k")->allowed);
  EXPECT_EQ(store->acquire(fast, "k")->reason, DecisionReason::kOverLimit);

  const Policy bucket = named(Policy::token_bucket(1, 5), "api");
  const Policy other = named(Policy::fixed_window(10, minute), "other");
  const StoreOp ops[] = {{&other, "k"}, {&bucket, "k"}, {&other, "k2"}};
  auto batch = store->decide_many(ops, Atomicity::kIndependent);
  ASSERT_TRUE(batch.ok());
  EXPECT_TRUE((*batch)[0].allowed);
  EXPECT_EQ((*batch)[1].reason, DecisionReason::kPolicyConflict);
  EXPECT_TRUE((*batch)[2].allowed);
  const Policy both[] = {other, bucket};
  auto all = store->acquire_all(both, "k");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ((*all)[1].reason, DecisionReason::kPolicyConflict);
  EXPECT_EQ(store->peek(other, "k")->remaining, 8);  // only the batch's one: the call took none
}

// --- TTL ------------------------------------------------------------------------------------

TEST_F(RedisStoreTest, EveryWriteSetsATtlAndIdleKeysDisappear) {
  auto o = options_for(url_);
  o.key_prefix = unique_prefix("ttl");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  struct Case {
    Policy policy;
    int64_t max_ttl_ms;  // how long the state can matter after the last write
  };
  const std::vector<Case> cases = {
      {named(Policy::fixed_window(5, milliseconds(200)), "fw"), 200},
      {named(Policy::sliding_window_log(5, milliseconds(200)), "swl"), 200},
      {named(Policy::sliding_window_counter(5, milliseconds(100)), "swc"), 200},  // 2 windows
      {named(Policy::token_bucket(50, 5), "tb"), 100},   // 5 tokens refill in 100 ms
      {named(Policy::leaky_bucket(50, 5), "lb"), 100}};  // 5 units drain in 100 ms
  for (const auto& c : cases) {
    const std::string key = redis_state_key(o.key_prefix, "idle", c.policy.name());
    // A peek on a fresh key writes nothing.
    ASSERT_TRUE(store->peek(c.policy, "idle").ok());
    EXPECT_EQ(client_->command({"EXISTS", key})->integer, 0) << c.policy.name();
    // A fixed window's TTL ends with its window (200 ms, aligned to Redis' clock): the PTTL
    // below must come before that end, so the acquires start with 150 ms of it left.
    if (c.policy.algorithm() == Algorithm::kFixedWindow) await_window_room(c.policy, milliseconds(150));
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(store->acquire(c.policy, "idle")->allowed);
    std::vector<std::string> keys = {key};
    if (c.policy.algorithm() == Algorithm::kSlidingWindowLog) keys.push_back(key + "#log");
    for (const auto& k : keys) {
      auto ttl = client_->command({"PTTL", k});
      ASSERT_TRUE(ttl.ok());
      EXPECT_GT(ttl->integer, 0) << k;
      EXPECT_LE(ttl->integer, c.max_ttl_ms) << k;
    }
    // No traffic: the key disappears by itself (bounded wait for Redis' real clock).
    bool gone = false;
    for (int i = 0; i < 300 && !gone; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
      gone = true;
      for (const auto& k : keys) gone = gone && client_->command({"EXISTS", k})->integer == 0;
    }
    EXPECT_TRUE(gone) << c.policy.name();
  }
}

// --- Hostile keys ---------------------------------------------------------------------------

TEST_F(RedisStoreTest, HostileKeysAreStoredSafelyOrRejected) {
  auto o = options_for(url_);
  o.key_prefix = unique_prefix("hostile");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  auto p = named(Policy::fixed_window(1, seconds(60)), "once");
  const std::vector<std::string> keys = {
      "plain",        "with space",        "cr\r\nlf",      "{",          "}",
      "}{",           "{plain}",           "plain}:once",   "%7B",        "%7Bplain%7D",
      "%",            "%25",               "\xff\xfe\x80",  "\xc3\x28",   std::string("nul\0x", 5),
      "*",            "?",                 "[a-z]",         "#log",       std::string(512, 'k')};
  // "once" is a 60 s fixed window on Redis' clock: a minute boundary between the two rounds
  // would admit the second. They take milliseconds; 5 s of the minute is left.
  await_window_room(p, seconds(5));
  for (const auto& k : keys) {
    auto d = store->acquire(p, k);
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    EXPECT_TRUE(d->allowed) << "key reached another key's state: " << k;
  }
  for (const auto& k : keys) {
    auto d = store->acquire(p, k);
    ASSERT_TRUE(d.ok());
    EXPECT_FALSE(d->allowed) << "state of key not kept: " << k;
  }
  // Exactly one Redis key per user key, each with a brace-free tag right after the prefix.
  std::vector<std::string> found;
  std::string cursor = "0";
  for (int i = 0; i < 1000; ++i) {
    auto r = client_->command({"SCAN", cursor, "MATCH", o.key_prefix + "*", "COUNT", "1000"});
    ASSERT_TRUE(r.ok());
    cursor = r->elements[0].str;
    for (auto& e : r->elements[1].elements) found.push_back(e.str);
    if (cursor == "0") break;
  }
  EXPECT_EQ(found.size(), keys.size());
  for (const auto& k : found) {
    const std::string rest = k.substr(o.key_prefix.size());
    ASSERT_EQ(rest.front(), '{') << k;
    const size_t close = rest.find('}');
    ASSERT_NE(close, std::string::npos) << k;
    EXPECT_EQ(rest.substr(1, close - 1).find('{'), std::string::npos) << k;
    EXPECT_EQ(rest.substr(close), "}:once") << k;
  }
  // Too long or empty: a clear error, nothing stored.
  for (const std::string& bad : {std::string(10 * 1024, 'x'), std::string(513, 'x'), std::string()}) {
    auto d = store->acquire(p, bad);
    ASSERT_FALSE(d.ok());
    EXPECT_EQ(d.status().code(), StatusCode::kInvalidArgument);
    EXPECT_FALSE(d.status().message().empty());
  }
  EXPECT_EQ(store->acquire(p, "k", 0).status().code(), StatusCode::kInvalidArgument);
}

// --- Configuration and connection errors ----------------------------------------------------

TEST(RedisStoreConfig, RejectsBadOptionsWithTheFieldNamed) {
  RedisStoreOptions o;
  o.url = "http://x";
  EXPECT_NE(RedisStore::connect(o).status().message().find("redis://"), std::string::npos);
  o = {};
  o.key_prefix = "a{b";
  EXPECT_NE(RedisStore::connect(o).status().message().find("key_prefix"), std::string::npos);
  o = {};
  o.command_timeout = milliseconds(0);
  EXPECT_NE(RedisStore::connect(o).status().message().find("command_timeout"), std::string::npos);
  o = {};
  o.io_threads = 0;
  EXPECT_EQ(RedisStore::connect(o).status().code(), StatusCode::kInvalidArgument);
}

TEST(RedisStoreConfig, RefusedConnectionIsReportedAtConnect) {
  auto port = free_loopback_port();
  ASSERT_TRUE(port.ok());
  RedisStoreOptions o;
  o.url = "redis://127.0.0.1:" + std::to_string(*port) + "/0";
  o.connections = 2;
  auto s = RedisStore::connect(o);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(s.status().message().find("cannot connect"), std::string::npos) << s.status().to_string();
}

TEST(RedisStoreConfig, FailurePolicyAppliesAndIsCountedWhenRedisIsDown) {
  auto port = free_loopback_port();
  ASSERT_TRUE(port.ok());
  auto p = Policy::fixed_window(10, seconds(1)).value();
  for (FailurePolicy fp : {FailurePolicy::kOpen, FailurePolicy::kClosed}) {
    RedisStoreOptions o;
    o.url = "redis://127.0.0.1:" + std::to_string(*port) + "/0";
    o.connections = 1;
    o.lazy_connect = true;
    o.on_failure = fp;
    auto store = must_connect(o);
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 3; ++i) {
      auto d = store->acquire(p, "k");
      ASSERT_TRUE(d.ok());
      EXPECT_EQ(d->allowed, fp == FailurePolicy::kOpen);
      EXPECT_EQ(d->reason, fp == FailurePolicy::kOpen ? DecisionReason::kStoreFailedOpen
                                                      : DecisionReason::kStoreFailedClosed);
      EXPECT_EQ(d->limit, 10);
    }
    auto all = store->acquire_all(std::vector<Policy>{p}, "k", 1);
    ASSERT_TRUE(all.ok());
    EXPECT_TRUE(is_failure(all->front()));
    EXPECT_FALSE(store->reset(p, "k").is_ok());  // no decision to fall back on: an error
    const auto c = store->counters();
    EXPECT_EQ(fp == FailurePolicy::kOpen ? c.failed_open : c.failed_closed, 4u);
    EXPECT_EQ(fp == FailurePolicy::kOpen ? c.failed_closed : c.failed_open, 0u);
    EXPECT_EQ(c.errors, 5u);
    // The connection's own attempt fails in the background; it is reported once it has.
    for (int i = 0; i < 200 && store->last_error().is_ok(); ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    EXPECT_NE(store->last_error().message().find("cannot connect"), std::string::npos)
        << store->last_error().to_string();
  }
}

TEST(RedisStoreConfig, AuthSelectAndUnixSocket) {
  RedisServer server;
  char dir[] = "/tmp/ratelimit-sock-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string sock = std::string(dir) + "/redis.sock";
  ASSERT_TRUE(server.start(0, {"--requirepass", "s3cr%t", "--unixsocket", sock,
                               "--unixsocketperm", "700"}).is_ok());
  const std::string hostport = "127.0.0.1:" + std::to_string(server.port());
  auto p = Policy::fixed_window(1, seconds(60)).value();

  RedisStoreOptions o;
  o.connections = 1;
  o.url = "redis://" + hostport + "/0";
  auto noauth = RedisStore::connect(o);
  ASSERT_FALSE(noauth.ok());
  EXPECT_EQ(noauth.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(noauth.status().message().find("NOAUTH"), std::string::npos) << noauth.status().to_string();

  o.url = "redis://:wrong@" + hostport + "/0";
  auto wrong = RedisStore::connect(o);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument) << wrong.status().to_string();
  EXPECT_EQ(wrong.status().message().find("wrong"), std::string::npos);  // no password echoed

  // Password with a percent-escape; database 3: the key lands there.
  o.url = "redis://:s3cr%25t@" + hostport + "/3";
  // p is a 60 s fixed window on Redis' clock: the denial over the unix socket below must fall
  // in the same minute as this acquire. Milliseconds apart; 5 s of the minute is left.
  await_window_room(p, seconds(5));
  auto good = RedisStore::connect(o);
  ASSERT_TRUE(good.ok()) << good.status().to_string();
  EXPECT_TRUE((*good)->acquire(p, "in-db-3")->allowed);
  auto c3 = RedisClient::connect("redis://:s3cr%25t@" + hostport + "/3");
  ASSERT_TRUE(c3.ok());
  EXPECT_EQ(c3->command({"DBSIZE"})->integer, 1);
  auto c0 = RedisClient::connect("redis://:s3cr%25t@" + hostport + "/0");
  ASSERT_TRUE(c0.ok());
  EXPECT_EQ(c0->command({"DBSIZE"})->integer, 0);

  // The same server over its unix socket, database 3 again: the state is shared.
  o.url = "unix://:s3cr%25t@" + sock + "?db=3";
  auto viaunix = RedisStore::connect(o);
  ASSERT_TRUE(viaunix.ok()) << viaunix.status().to_string();
  EXPECT_FALSE((*viaunix)->acquire(p, "in-db-3")->allowed);
  server.kill();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ratelimit::testing
