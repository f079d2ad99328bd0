// race.cc — ratelimit-bench race: the race demonstration, the real store against a naive
// limiter, `requests` acquires on one key with `concurrency` in flight, admissions counted.
//
// The naive limiter is a DEMONSTRATION OF WHAT NOT TO DO: it reads the count (GET), decides in
// the client, then increments (INCR) — two round trips with a gap in which every concurrent
// request reads the same old count. It runs on the store's own pipelined transport, so all
// requests in flight really are in flight together and the over-admission is reliable.
// Invariants: every wait is bounded; no exception escapes (errors are printed, exit 1).
#include <hiredis/hiredis.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include "mutex.h"
#include "bench.h"
#include "bench_common.h"
#include "closed_loop.h"
#include "ratelimit/policy.h"
#include "ratelimit/redis_store.h"
#include "router.h"
#include "script_codec.h"

namespace ratelimit::bench {
namespace {

// The policy a race uses: `limit` per 60 s window, or a bucket of `limit` that does not
// refill measurably during the run.
Result<Policy> race_policy(const std::string& algorithm, int64_t limit) {
  auto a = parse_algorithm(algorithm);
  if (!a.ok()) return a.status();
  const Micros minute{60'000'000};
  switch (*a) {
    case Algorithm::kFixedWindow: return Policy::fixed_window(limit, minute);
    case Algorithm::kSlidingWindowLog: return Policy::sliding_window_log(limit, minute);
    case Algorithm::kSlidingWindowCounter: return Policy::sliding_window_counter(limit, minute);
    case Algorithm::kTokenBucket: return Policy::token_bucket(1e-6, limit);
    case Algorithm::kLeakyBucket: return Policy::leaky_bucket(1e-6, limit);
    case Algorithm::kConcurrency: return Policy::concurrency(limit, minute);  // none released
  }
  return Status::invalid_argument("unknown algorithm");
}

void wait_until_unix_ms(int64_t at_ms) {
  if (at_ms <= 0) return;
  for (int i = 0; i < 600'000; ++i) {  // at most 10 minutes
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    if (now >= at_ms) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min<int64_t>(at_ms - now, 1)));
  }
}

// --- The naive limiter (demonstration only) ------------------------------------------------

class NaiveLimiter {
 public:
  static Result<std::unique_ptr<NaiveLimiter>> open(const std::string& url_text,
                                                    size_t connections) {
    auto url = parse_redis_url(url_text);
    if (!url.ok()) return url.status();
    auto n = std::unique_ptr<NaiveLimiter>(new NaiveLimiter());
    redis_detail::RouterOptions ro;  // no handshake steps: it runs no script
    ro.connections_per_node = std::max<size_t>(connections, 1);
    ro.command_timeout = std::chrono::milliseconds(5000);
    ro.connect_timeout = std::chrono::milliseconds(5000);
    auto router = redis_detail::make_router(*url, ro, n->counters_);
    if (!router.ok()) return router.status();
    n->router_ = std::move(router).value();
    if (Status s = n->router_->wait_ready(ro.connect_timeout); !s.is_ok()) {
      return Status::unavailable("naive limiter: " + s.message());
    }
    return n;
  }

  ~NaiveLimiter() {
    if (router_ != nullptr) router_->close();
  }

  // GET the count; if below the limit, INCR it and admit. NOT ATOMIC: that is the point.
  void acquire(const std::string& key, int64_t limit, std::function<void(Outcome)> done) {
    std::string get_argv[] = {"GET", key};
    send(key, get_argv, [this, key, limit, done = std::move(done)](const Status& error,
                                                                    const redisReply* reply) {
      if (!error.is_ok() || reply == nullptr || reply->type == REDIS_REPLY_ERROR) {
        return done(Outcome::kFailed);
      }
      int64_t count = 0;
      if (reply->type == REDIS_REPLY_STRING) {
        std::from_chars(reply->str, reply->str + reply->len, count);
      }
      if (count >= limit) return done(Outcome::kDenied);
      std::string incr_argv[] = {"INCR", key};
      send(key, incr_argv, [done](const Status& e, const redisReply* r) {
        done(e.is_ok() && r != nullptr && r->type == REDIS_REPLY_INTEGER ? Outcome::kAllowed
                                                                         : Outcome::kFailed);
      });
    });
  }

  // Deletes `key` (the naive limiter sets no TTL): waits for the answer, at most 6 s (the
  // command timeout is 5 s, so the reply or its failure comes first).
  void forget(const std::string& key) {
    auto answered = std::make_shared<std::promise<void>>();
    std::future<void> f = answered->get_future();
    std::string del_argv[] = {"DEL", key};
    send(key, del_argv, [answered](const Status&, const redisReply*) { answered->set_value(); });
    f.wait_for(std::chrono::seconds(6));
  }

 private:
  NaiveLimiter() = default;
  void send(const std::string& key, std::span<const std::string> argv,
            redis_detail::ReplyCallback done) {
    const int slot = router_->routes_by_slot() ? redis_detail::key_hash_slot(key)
                                               : redis_detail::kAnySlot;
    router_->send(slot, std::make_shared<const std::string>(redis_detail::encode_command(argv)),
                  std::move(done));
  }

  redis_detail::RouterCounters counters_;
  std::unique_ptr<redis_detail::Router> router_;
};

}  // namespace

int run_race(const RaceOptions& o) {
  auto policy = race_policy(o.algorithm, o.limit);
  if (!policy.ok()) {
    std::cerr << "ratelimit-bench race: " << policy.status().message() << "\n";
    return 1;
  }
  const std::string key = o.key.empty() ? random_key("race") : o.key;
  Tally tally;
  bool finished = false;
  std::string label;
  if (o.naive) {
    label = "NAIVE GET-then-INCR (demonstration only: not atomic, do not use)";
    const size_t conns = o.connections > 0 ? o.connections : 4;
    auto naive = NaiveLimiter::open(o.store, conns);
    if (!naive.ok()) {
      std::cerr << "ratelimit-bench race: " << naive.status().message() << "\n";
      return 1;
    }
    const std::string naive_key = "naive:" + key;
    wait_until_unix_ms(o.start_at_unix_ms);
    finished = closed_loop(o.requests, o.concurrency,
                           [&](int, std::function<void(Outcome)> done) {
                             (*naive)->acquire(naive_key, o.limit, std::move(done));
                           },
                           tally, std::chrono::seconds(60));
    // A throwaway key is removed (a --key the caller chose may be shared with another run).
    if (o.key.empty()) (*naive)->forget(naive_key);
  } else {
    label = std::string("RedisStore ") + algorithm_name(policy->algorithm()) +
            " (one atomic Lua call per decision)";
    auto store = connect_store(o.store, o.connections);
    if (!store.ok()) {
      std::cerr << "ratelimit-bench race: " << store.status().message() << "\n";
      return 1;
    }
    auto p = policy->with_name("race").value();
    wait_until_unix_ms(o.start_at_unix_ms);
    finished = closed_loop(o.requests, o.concurrency,
                           [&](int, std::function<void(Outcome)> done) {
                             (*store)->acquire_async(p, key, 1, [done = std::move(done)](
                                                                    Result<Decision> d) {
                               done(outcome_of(d));
                             });
                           },
                           tally, std::chrono::seconds(60));
    // A throwaway key is removed rather than left to its TTL (up to ~116 days for the buckets'
    // slow refill); a --key the caller chose may be shared with another run, so it stays.
    if (o.key.empty()) (void)(*store)->reset(p, key);
  }
  MutexLock lock(tally.mu);
  const int failed = tally.failed + tally.errors;  // store unavailable, or an error answer
  if (o.json) {
    std::printf("{\"limiter\": \"%s\", \"algorithm\": \"%s\", \"requests\": %d, "
                "\"concurrency\": %d, \"limit\": %lld, \"allowed\": %d, \"denied\": %d, "
                "\"failed\": %d}\n",
                o.naive ? "naive" : "redis_store", o.naive ? "get_then_incr" : o.algorithm.c_str(),
                o.requests, o.concurrency, static_cast<long long>(o.limit), tally.allowed,
                tally.denied, failed);
  } else {
    std::printf("limiter:     %s\nrequests:    %d, %d in flight, one key, limit %lld\n"
                "allowed:     %d\ndenied:      %d\n",
                label.c_str(), o.requests, o.concurrency, static_cast<long long>(o.limit),
                tally.allowed, tally.denied);
    if (failed > 0) std::printf("failed:      %d (store unavailable)\n", failed);
    std::printf("verdict:     %s\n", tally.allowed == o.limit ? "exact"
                                     : tally.allowed > o.limit ? "OVER-ADMITTED"
                                                               : "under the limit");
  }
  if (!finished) {
    std::cerr << "ratelimit-bench race: timed out with " << tally.done << " of " << o.requests
              << " answered\n";
    return 1;
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace ratelimit::bench
