// functions_batch_test.cc — the two ways decisions reach Redis and the batching above them,
// against real redis-servers:
//   - FCALL of the function library is used by default (the library is in FUNCTION LIST), and
//     EVALSHA when asked (use_functions = false) or when the server has no FUNCTION command (a
//     private server started with `--rename-command FUNCTION ""`): the shared vectors and 10 of
//     200 at 50 in flight hold on every path;
//   - FUNCTION FLUSH while decisions are in flight is invisible (reload, exact counts);
//   - batched decisions are the unbatched ones: many decisions issued at once on one connection
//     (so the batches leave in issue order) at a fixed test time equal the pure functions applied
//     in issue order, every algorithm and mode, several keys; batches really formed (counted);
//     max_batch = 1 forms none.
#include <gtest/gtest.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "lua_scripts.h"
#include "script_codec.h"
#include "ratelimit/algorithms.h"
#include "ratelimit/redis_store.h"
#include "redis_server.h"
#include "store_test_util.h"
#include "window_room.h"
#include "vectors.h"

namespace ratelimit::testing {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;



// The shared vectors, then 10 of 200 at 50 in flight per algorithm, through `o`'s store.
void vectors_and_exactness(RedisStoreOptions o, bool expect_functions) {
  ManualClock clock;
  auto vo = o;
  vo.test_clock = &clock;
  vo.key_prefix = unique_prefix("fbvec");
  auto store = must_connect(vo);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->uses_functions(), expect_functions);
  auto files = vectors::load_all(RATELIMIT_VECTORS_DIR);
  ASSERT_TRUE(files.ok()) << files.status().to_string();
  for (const auto& f : *files) {
    auto failures = vectors::run_vectors(*store, clock, f);
    EXPECT_TRUE(failures.empty()) << vectors::format_failures(failures);
  }
  EXPECT_EQ(store->counters().errors, 0u);

  o.key_prefix = unique_prefix("fbexact");
  auto live = must_connect(o);
  ASSERT_NE(live, nullptr);
  EXPECT_EQ(live->uses_functions(), expect_functions);
  for (const Policy& p : limit_ten_policies()) {
    // fw10 and swc10: 60 s windows on Redis' clock; a minute boundary mid-round would admit
    // 20. A round takes well under a second; it starts with 10 s of the minute left.
    await_window_room(p, seconds(10));
    auto r = fire(200, 50, [&](auto done) { live->acquire_async(p, "hot", 1, std::move(done)); });
    ASSERT_TRUE(r.finished) << p.name();
    EXPECT_EQ(r.allowed, 10) << p.name();
    EXPECT_EQ(r.denied, 190) << p.name();
    EXPECT_EQ(r.failed + r.errors, 0) << p.name();
  }
}

TEST(RedisFunctions, FcallIsTheDefaultAndTheLibraryIsLoaded) {
  auto url = shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().to_string();
  vectors_and_exactness(options_for(*url), true);
  auto c = RedisClient::connect(*url);
  ASSERT_TRUE(c.ok());
  auto list = c->command({"FUNCTION", "LIST", "LIBRARYNAME", redis_detail::kLuaLibrary.name});
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->elements.size(), 1u) << "library " << redis_detail::kLuaLibrary.name;
}

// The library derives a bucket's window (time_to_drain_us of a full bucket) itself: a caller
// that sends a wrong window_us for a token or leaky bucket gets exactly the answers of one that
// sends the right one. With the window taken from the caller, "1" (µs) would cap the refill at
// 2 µs and the second take below would be refused.
TEST(RedisFunctions, ABucketsWindowIsDerivedByTheLibraryNotTakenFromTheCaller) {
  auto url = shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().to_string();
  auto o = options_for(*url);
  o.key_prefix = unique_prefix("fbwin");
  auto store = must_connect(o);  // loads the library
  ASSERT_NE(store, nullptr);
  auto c = RedisClient::connect(*url);
  ASSERT_TRUE(c.ok());
  for (const Policy& p : {Policy::token_bucket(10, 10).value(), Policy::leaky_bucket(10, 10).value()}) {
    ASSERT_EQ(p.window().count(), 1'000'000) << p.name();
    std::vector<std::vector<Reply>> answers;
    for (const char* window : {"", "1", "999999999"}) {  // "": the policy's own
      std::vector<Reply> got;
      const std::string key = std::string("k") + window;
      for (const int64_t t : {1'000'000, 3'000'000, 3'000'001}) {
        redis_detail::ScriptCall call =
            redis_detail::decide_call(o.key_prefix, p, key, 10, algo::Op::kAcquire, t, LeaseId{});
        if (*window != '\0') call.args[4] = window;  // now, cost, op, limit, window_us, ...
        std::vector<std::string> argv{"FCALL", redis_detail::function_name(call.script),
                                      std::to_string(call.keys.size())};
        argv.insert(argv.end(), call.keys.begin(), call.keys.end());
        argv.insert(argv.end(), call.args.begin(), call.args.end());
        auto r = c->command(argv);
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        ASSERT_FALSE(r->is_error()) << r->str;
        got.push_back(*r);
      }
      answers.push_back(std::move(got));
    }
    // Each answer starts with the DecisionReason: within_limit (admitted) or over_limit.
    constexpr auto kWithin = static_cast<int64_t>(DecisionReason::kWithinLimit);
    ASSERT_EQ(answers[0].size(), 3u);
    EXPECT_EQ(answers[0][0].elements.at(0).integer, kWithin) << p.name() << ": the full bucket admits 10";
    EXPECT_EQ(answers[0][1].elements.at(0).integer, kWithin) << p.name() << ": refilled 2 s later";
    EXPECT_NE(answers[0][2].elements.at(0).integer, kWithin) << p.name() << ": and empty again";
    for (size_t w = 1; w < answers.size(); ++w) {
      for (size_t i = 0; i < answers[0].size(); ++i) {
        ASSERT_EQ(answers[w][i].elements.size(), answers[0][i].elements.size()) << p.name();
        for (size_t e = 0; e < answers[0][i].elements.size(); ++e) {
          EXPECT_EQ(answers[w][i].elements[e].integer, answers[0][i].elements[e].integer)
              << p.name() << " window variant " << w << " call " << i << " field " << e;
          EXPECT_EQ(answers[w][i].elements[e].str, answers[0][i].elements[e].str)
              << p.name() << " window variant " << w << " call " << i << " field " << e;
        }
      }
    }
  }
}

TEST(RedisFunctions, EvalshaWhenFunctionsAreTurnedOff) {
  auto url = shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().to_string();
  auto o = options_for(*url);
  o.use_functions = false;
  vectors_and_exactness(o, false);
}

TEST(RedisFunctions, EvalshaWhenTheServerHasNoFunctionCommand) {
  RedisServer server;
  ASSERT_TRUE(server.start(0, {"--rename-command", "FUNCTION", ""}).is_ok());
  auto c = RedisClient::connect(server.url());
  ASSERT_TRUE(c.ok());
  auto probe = c->command({"FUNCTION", "LIST"});
  ASSERT_TRUE(probe.ok());
  ASSERT_TRUE(probe->is_error()) << "FUNCTION still exists on the private server";
  vectors_and_exactness(options_for(server.url()), false);
}

TEST(RedisFunctions, FunctionFlushMidRunIsInvisibleAndCountsStayExact) {
  auto url = shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().to_string();
  auto o = options_for(*url);
  o.key_prefix = unique_prefix("fflush");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->uses_functions());
  const auto before = store->counters();
  const Policy p = named(Policy::fixed_window(500, seconds(60)), "fw500");
  // Four waves in one 60 s window on Redis' clock: a minute boundary between them would admit
  // more than 500. They take well under a second; they start with 10 s of the minute left.
  await_window_room(p, seconds(10));
  int allowed = 0;
  for (int wave = 0; wave < 4; ++wave) {
    std::thread flusher([&] {
      auto c = RedisClient::connect(*url);
      ASSERT_TRUE(c.ok());
      auto r = c->command({"FUNCTION", "FLUSH"});
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(r->str, "OK");
    });
    auto r = fire(250, 250, [&](auto done) { store->acquire_async(p, "k", 1, std::move(done)); });
    flusher.join();
    ASSERT_TRUE(r.finished);
    EXPECT_EQ(r.failed + r.errors, 0) << "wave " << wave;
    allowed += r.allowed;
  }
  EXPECT_EQ(allowed, 500);
  const auto after = store->counters();
  EXPECT_GT(after.script_reloads, before.script_reloads);
  EXPECT_EQ(after.errors, before.errors);
  EXPECT_TRUE(store->uses_functions()) << "a flush must not demote the store to EVALSHA";
}


void batched_equals_sequential(bool use_functions) {
  auto url = shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().to_string();
  ManualClock clock(Micros{1'700'000'000'000'000});
  auto o = options_for(*url);
  o.connections = 1;  // one lane: calls leave, and run, in issue order
  o.max_batch = 16;
  o.use_functions = use_functions;
  o.test_clock = &clock;
  o.key_prefix = unique_prefix("batch");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  const auto policies = mirror_policies();
  std::map<std::string, algo::AlgorithmState> pure;
  std::mt19937_64 rng(777);
  const char* keys[] = {"a", "b", "c"};
  int compared = 0;
  for (int wave = 0; wave < 40; ++wave) {
    clock.advance(Micros{static_cast<int64_t>(rng() % 400'000)});
    const int64_t now = clock.now().count();
    struct Issued {
      const Policy* p;
      std::string key;
      int64_t cost;
      bool peek;
      Decision want;
    };
    std::vector<Issued> issued;
    const int n = 20 + static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i) {
      const Policy& p = policies[rng() % policies.size()];
      Issued x{&p, keys[rng() % 3], 1 + static_cast<int64_t>(rng() % 3), rng() % 5 == 0, {}};
      auto& state = pure.try_emplace(p.name() + "\n" + x.key, algo::fresh_state(p)).first->second;
      x.want = algo::decide(p, state, now, x.cost, x.peek ? algo::Op::kPeek : algo::Op::kAcquire);
      issued.push_back(std::move(x));
    }
    std::mutex mu;
    std::vector<std::optional<Result<Decision>>> got(issued.size());
    int answered = 0;
    std::condition_variable cv;
    for (size_t i = 0; i < issued.size(); ++i) {
      auto done = [&, i](Result<Decision> d) {
        std::lock_guard lock(mu);
        got[i] = std::move(d);
        ++answered;
        cv.notify_all();
      };
      const Issued& x = issued[i];
      if (x.peek) store->peek_async(*x.p, x.key, x.cost, done);
      else store->acquire_async(*x.p, x.key, x.cost, done);
    }
    std::unique_lock lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, seconds(20), [&] { return answered == n; }));
    for (size_t i = 0; i < issued.size(); ++i) {
      ASSERT_TRUE(got[i]->ok()) << got[i]->status().to_string();
      ASSERT_EQ(**got[i], issued[i].want)
          << "wave " << wave << " item " << i << " " << issued[i].p->name() << " key "
          << issued[i].key << " cost " << issued[i].cost;
      ++compared;
    }
  }
  const auto c = store->counters();
  EXPECT_EQ(c.errors, 0u);
  EXPECT_GT(c.batches, 20u) << "decisions issued together did not form batches";
  EXPECT_GT(c.batched_decisions, static_cast<uint64_t>(compared) / 2);
  EXPECT_LE(c.batched_decisions, static_cast<uint64_t>(compared));
}

TEST(RedisBatching, BatchedDecisionsEqualThePureFunctionsInIssueOrderWithFcall) {
  batched_equals_sequential(true);
}

TEST(RedisBatching, BatchedDecisionsEqualThePureFunctionsInIssueOrderWithEvalsha) {
  batched_equals_sequential(false);
}

TEST(RedisBatching, MaxBatchOneSendsEveryDecisionAlone) {
  auto url = shared_test_redis_url();
  ASSERT_TRUE(url.ok()) << url.status().to_string();
  auto o = options_for(*url);
  o.max_batch = 1;
  o.key_prefix = unique_prefix("nobatch");
  auto store = must_connect(o);
  ASSERT_NE(store, nullptr);
  const Policy p = named(Policy::fixed_window(10, seconds(60)), "fw10");
  await_window_room(p, seconds(10));  // one minute on Redis' clock for all 200 (as above)
  auto r = fire(200, 50, [&](auto done) { store->acquire_async(p, "hot", 1, std::move(done)); });
  ASSERT_TRUE(r.finished);
  EXPECT_EQ(r.allowed, 10);
  EXPECT_EQ(store->counters().batches, 0u);
}

TEST(RedisBatching, MaxBatchOutOfRangeIsRefusedByName) {
  RedisStoreOptions o;
  o.lazy_connect = true;
  o.max_batch = 0;
  auto s = RedisStore::connect(o);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("max_batch"), std::string::npos);
  o.max_batch = 5000;
  EXPECT_FALSE(RedisStore::connect(o).ok());
}

}  // namespace
}  // namespace ratelimit::testing
