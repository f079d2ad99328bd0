// throttle_test.cc — the simulator's throttling (throttle.h), against hand derivations on
// pattern B (30 requests at 5 + i·0.02/30 s) and against the replay: without waiting, every
// rate algorithm admits exactly what the replay's table says; with waiting, FIFO order, the
// queue bound and max_wait hold, and every request is counted once.
#include "throttle.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "run.h"
#include "sim_test_util.h"

namespace ratelimit::sim {
namespace {

Report run_pattern(char pattern, const ThrottleOptions& t) {
  RunOptions o;
  o.patterns = {pattern};
  o.throttle = t;
  auto r = simulate(o);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r->front() : Report{};
}

Report run_b(const ThrottleOptions& t) { return run_pattern('B', t); }

const ThrottleResult& lane(const Report& r, const std::string& name) {
  for (const ThrottleResult& t : r.throttle->results) {
    if (t.algorithm == name) return t;
  }
  ADD_FAILURE() << "no lane " << name;
  return r.throttle->results.front();
}

void expect_every_request_counted_once(const Report& r) {
  for (const ThrottleResult& t : r.throttle->results) {
    EXPECT_EQ(t.offered, r.requests) << t.algorithm;
    EXPECT_EQ(t.admitted_at_once + t.admitted_after_wait + t.refused + t.refused_queue_full +
                  t.refused_timed_out,
              t.offered)
        << t.algorithm;
  }
}

TEST(Throttle, WithoutWaitingTheRateAlgorithmsAdmitWhatTheReplayAdmits) {
  ThrottleOptions t;
  t.concurrency = 5;
  t.hold = Micros{300'000};
  for (char p : {'A', 'B', 'C'}) {
    const Report rep = run_pattern(p, t);
    ASSERT_TRUE(rep.throttle.has_value());
    ASSERT_EQ(rep.throttle->results.size(), kAlgorithms + 1);
    for (size_t i = 0; i < kAlgorithms; ++i) {
      EXPECT_EQ(rep.throttle->results[i].admitted_at_once, rep.algorithms[i].admitted) << p << i;
      EXPECT_EQ(rep.throttle->results[i].refused, rep.algorithms[i].denied) << p << i;
    }
    expect_every_request_counted_once(rep);
  }
}

// Concurrency 5, each request 300 ms, pattern B's burst: 5 hold, the next 20 queue (max_queue
// 20), the last 5 find the queue full. Each release admits the queue's head, so request
// 5 + j starts when request j ends: waits of 0.3 s minus the arrival gap per round of 5,
// the last (i = 24) after 1.2 s less its 0.0133 s later arrival.
TEST(Throttle, ConcurrencyQueuesInArrivalOrderAndHoldsTheLimit) {
  ThrottleOptions t;
  t.concurrency = 5;
  t.hold = Micros{300'000};
  t.max_wait = Micros{2'000'000};
  t.max_queue = 20;
  const Report r = run_b(t);
  const ThrottleResult& c = lane(r, "concurrency");
  EXPECT_EQ(c.policy, "5 in flight");
  EXPECT_EQ(c.admitted_at_once, 5);
  EXPECT_EQ(c.admitted_after_wait, 20);
  EXPECT_EQ(c.refused_queue_full, 5);
  EXPECT_EQ(c.refused_timed_out, 0);
  EXPECT_EQ(c.peak_in_flight, 5);  // never more than the limit
  EXPECT_EQ(c.peak_queue, 20);
  // Request i arrives at 5 + i·20000/30 µs (llround); request 24 starts 1.2 s after request 4.
  const int64_t arrive4 = 5'000'000 + std::llround(4 * 20'000.0 / 30);
  const int64_t arrive24 = 5'000'000 + std::llround(24 * 20'000.0 / 30);
  EXPECT_EQ(c.wait_max_us, arrive4 + 1'200'000 - arrive24);
  expect_every_request_counted_once(r);
}

// The fixed window (10 per 1 s) admits 10 at 5.0 s; waiters are decided again at their
// retry_after, the window's end: 10 at 6.0 s, 10 at 7.0 s (each within max_wait 2 s).
TEST(Throttle, RatePoliciesWaitUntilRetryAfterInOrder) {
  ThrottleOptions t;
  t.max_wait = Micros{2'000'000};
  t.max_queue = 30;
  const Report r = run_b(t);
  const ThrottleResult& fw = lane(r, "fixed_window");
  EXPECT_EQ(fw.admitted_at_once, 10);
  EXPECT_EQ(fw.admitted_after_wait, 20);
  const int64_t arrive20 = 5'000'000 + std::llround(20 * 20'000.0 / 30);
  EXPECT_EQ(fw.wait_max_us, 7'000'000 - arrive20);  // request 20, decided again at 7.0 s
  // The token bucket (rate 10/s, burst 20) admits 20, then one waiter per 100 ms.
  const ThrottleResult& tb = lane(r, "token_bucket");
  EXPECT_EQ(tb.admitted_at_once, 20);
  EXPECT_EQ(tb.admitted_after_wait, 10);
  EXPECT_EQ(r.throttle->results.size(), kAlgorithms);  // no concurrency lane without --concurrency
  expect_every_request_counted_once(r);
}

TEST(Throttle, WaitsNeverPassMaxWaitAndQueuesNeverPassMaxQueue) {
  ThrottleOptions t;
  t.concurrency = 3;
  t.hold = Micros{250'000};
  t.max_wait = Micros{400'000};
  t.max_queue = 4;
  for (char p : {'A', 'B', 'C'}) {
    const Report r = run_pattern(p, t);
    ASSERT_TRUE(r.throttle.has_value());
    for (const ThrottleResult& x : r.throttle->results) {
      EXPECT_LE(x.wait_max_us, 400'000) << p << " " << x.algorithm;
      EXPECT_LE(x.peak_queue, 4) << p << " " << x.algorithm;
    }
    EXPECT_LE(lane(r, "concurrency").peak_in_flight_per_key, 3);
    expect_every_request_counted_once(r);
  }
}

// A holder that outlives its lease (hold 300 ms > lease_ttl 100 ms) loses it: the slot frees
// at the TTL and the policy then admits more than `limit` requests that are still running —
// what an operator sees when lease_ttl is set below the requests' real duration.
TEST(Throttle, ALeaseShorterThanTheRequestFreesItsSlotEarly) {
  ThrottleOptions t;
  t.concurrency = 5;
  t.hold = Micros{300'000};
  t.lease_ttl = Micros{100'000};
  t.max_wait = Micros{2'000'000};
  t.max_queue = 30;
  const ThrottleResult& c = lane(run_b(t), "concurrency");
  EXPECT_EQ(c.admitted_at_once + c.admitted_after_wait, 30);
  EXPECT_GT(c.peak_in_flight, 5);
}

TEST(Throttle, TraceDurationsAndTheOutputs) {
  testing::ScratchDir dir;
  // Two requests of one client 10 ms apart, each lasting 1 s by its log: with concurrency 1
  // the second waits for the first to end (0.99 s), though --hold is 1 ms.
  testing::write_file(dir.file("t.jsonl"),
                      "{\"time\": 100.0, \"remote_addr\": \"a\", \"request_time\": 1.0}\n"
                      "{\"time\": 100.01, \"remote_addr\": \"a\", \"request_time\": 1.0}\n"
                      "{\"time\": 100.02, \"remote_addr\": \"b\"}\n");
  RunOptions o;
  o.trace_path = dir.file("t.jsonl");
  o.throttle.concurrency = 1;
  o.throttle.hold = Micros{1'000};
  o.throttle.max_wait = Micros{5'000'000};
  auto r = simulate(o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->front().throttle->durations_from_trace, 2);
  const ThrottleResult& c = lane(r->front(), "concurrency");
  EXPECT_EQ(c.admitted_after_wait, 1);
  EXPECT_EQ(c.wait_max_us, 990'000);
  const std::string table = render_table(*r);
  EXPECT_NE(table.find("throttling: each request holds 1ms unless the trace gives its duration (2 did)"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("990.0ms"), std::string::npos) << table;
  const auto j = nlohmann::json::parse(render_json(*r));
  const auto& tj = j["runs"][0]["throttling"];
  EXPECT_EQ(tj["concurrency"].get<int64_t>(), 1);
  EXPECT_EQ(tj["algorithms"][5]["wait_max_us"].get<int64_t>(), 990'000);
  // Without the flags, nothing of it appears (the documented tables stay as they are).
  RunOptions plain;
  plain.trace_path = o.trace_path;
  auto p = simulate(plain);
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->front().throttle.has_value());
  EXPECT_EQ(render_table(*p).find("throttling"), std::string::npos);
}

TEST(Throttle, BadSettingsAreRefusedNamingTheFlag) {
  ThrottleOptions t;
  t.concurrency = 0;
  EXPECT_NE(validate(t).message().find("--concurrency"), std::string::npos);
  t.concurrency = 2;
  t.max_queue = -1;
  EXPECT_NE(validate(t).message().find("--max-queue"), std::string::npos);
  RunOptions o;
  o.throttle.max_wait = Micros{-1};
  EXPECT_FALSE(simulate(o).ok());
}

}  // namespace
}  // namespace ratelimit::sim
