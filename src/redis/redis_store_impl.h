// redis_store_impl.h — RedisStore::Impl: the state one RedisStore owns (options, counters, the
// router and the script invoker, the INFO poller) and the paths its public methods share.
//
// Why a header: RedisStore's methods live in several files by concern — redis_store.cc
// (connect, the Store entry points, counters), redis_store_decide.cc (one batched decision,
// the lease ops among them), redis_store_envoy.cc (envoyproxy/ratelimit's key layout) and
// redis_store_shared.cc (reserve / add_hits for the distributed store) — and all of them work
// on this one struct. Internal to src/redis: never installed.
//
// Invariants: every path completes its callback exactly once and lets no exception out; a
// failed call is counted (counters) and answered by the failure policy (fail_decisions) or, for
// the calls that return a Status, by the error itself. Members are declared in destruction
// order: the router goes before the counters it writes to.
#pragma once

#include <hiredis/hiredis.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "background_thread.h"
#include "mutex.h"
#include "ratelimit/redis_store.h"
#include "router.h"
#include "script_codec.h"
#include "script_invoker.h"
#include "server_info.h"

namespace ratelimit {

// Store-level counters beside the router's (see RedisStoreCounters).
struct StoreCounters {
  std::atomic<uint64_t> commands{0}, errors{0}, timeouts{0}, failed_open{0}, failed_closed{0};
};

struct RedisStore::Impl {
  RedisStoreOptions options;
  StoreCounters counters;
  redis_detail::InvokerCounters invoker_counters;
  redis_detail::RouterCounters router_counters;
  // before the router: its handshakes and polls use it
  std::unique_ptr<redis_detail::ServerInfoWatch> info;
  // after the counters: it uses them until it is gone
  std::unique_ptr<redis_detail::Router> router;
  std::unique_ptr<redis_detail::ScriptInvoker> invoker;
  // Timeouts, backoff and stream of a release subscriber's connection (watch_releases).
  std::shared_ptr<const redis_detail::ConnectionConfig> pubsub_config;
  // The INFO poller (evicted_keys growth, a changed policy): one thread asleep between polls.
  BackgroundThread poller;

  ~Impl();

  // Fire and forget: the reply (or its failure) lands in `info` on an I/O thread; a slow server
  // costs at most one outstanding INFO per interval. (redis_store.cc)
  void start_poller();

  // The test clock's now for the scripts' `now` argument; none: Redis' TIME.
  std::optional<int64_t> now_arg() const {
    if (options.test_clock == nullptr) return std::nullopt;
    return options.test_clock->now().count();
  }

  // Counts a failed call (an error; a timeout too when it is one).
  void count_error(const Status& why) {
    counters.errors.fetch_add(1, std::memory_order_relaxed);
    if (why.code() == StatusCode::kDeadlineExceeded) {
      counters.timeouts.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // Counts a failed call; returns the failure-policy decisions for `limits`.
  std::vector<Decision> fail_decisions(const Status& why, std::span<const int64_t> limits) {
    count_error(why);
    auto& c = options.on_failure == FailurePolicy::kOpen ? counters.failed_open
                                                         : counters.failed_closed;
    c.fetch_add(limits.size(), std::memory_order_relaxed);
    std::vector<Decision> out;
    out.reserve(limits.size());
    for (int64_t limit : limits) {
      out.push_back(failure_decision(options.on_failure, limit));
    }
    return out;
  }

  // One script call; `finish` receives the decisions (real or failure policy).
  template <typename Finish>
  void run_script(const redis_detail::ScriptCall& call, std::vector<int64_t> limits,
                  Finish finish) {
    invoker->invoke(call, [this, limits = std::move(limits), finish = std::move(finish)](
                              const Status& error, const redisReply* reply) mutable {
      if (error.is_ok()) {
        auto decoded = redis_detail::decode_decisions(reply, limits);
        if (decoded.ok()) {
          counters.commands.fetch_add(1, std::memory_order_relaxed);
          finish(std::move(decoded).value());
          return;
        }
        finish(fail_decisions(decoded.status(), limits));
        return;
      }
      finish(fail_decisions(error, limits));
    });
  }

  // One decision, batched by the invoker with whatever else is queued. `lease`: the lease a
  // release or renew names (a concurrency acquire draws its own). A concurrency decision that
  // Redis answered carries the lease (an acquire's only when admitted); a failure-policy answer
  // carries none: nothing was stored under it. (redis_store_decide.cc)
  void decide(const Policy& policy, std::string_view key, int64_t cost, algo::Op op,
              DecisionCallback done, LeaseId lease = {}, const adaptive::ReleaseReport& report = {});
  // One op of decide_many_async on its own: the Envoy layout's counter, a batched lease op
  // (decide) or one unbatched script call. Failures answer by policy. (redis_store_decide.cc)
  void decide_op(const StoreOp& op, DecisionCallback done);

  // True when `policy`'s decisions use envoyproxy/ratelimit's counter instead of the library's
  // scripts (options.key_layout kEnvoy and a policy that counts every hit). (redis_store_envoy.cc)
  bool envoy_layout(const Policy& policy) const;
  // The refusal of a report on a policy with envoy_layout (kInvalidArgument).
  static Status envoy_report_refused(const Policy& policy);
  // One decision on envoyproxy/ratelimit's counter (envoy_counter.h): its own command, not a
  // script of the library. The window is this host's clock's, as there. (redis_store_envoy.cc)
  void decide_envoy(const Policy& policy, std::string_view key, int64_t cost, algo::Op op,
                    DecisionCallback done);
  // The Redis key of `key`'s counter in the current window of the Envoy layout (what reset
  // deletes). (redis_store_envoy.cc)
  std::string envoy_key_now(const Policy& policy, std::string_view key) const;

  // One reserve / add_hits call; the reply decoded into a SharedView, failures as errors.
  // (redis_store_shared.cc)
  void run_shared(const redis_detail::ScriptCall& call, SharedViewCallback done);
};

}  // namespace ratelimit
