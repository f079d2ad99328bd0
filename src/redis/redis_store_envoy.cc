// redis_store_envoy.cc — RedisStore on envoyproxy/ratelimit's key layout
// (RedisKeyLayout::kEnvoy): a policy that counts every hit keeps its count where Envoy's own
// ratelimit service does (envoy_counter.h: one INCRBY + EXPIRE per window key), so both can
// share one Redis during a migration.
//
// Why its own file: this layout is a drop-in path with its own command and window (this host's
// clock, as in envoyproxy/ratelimit), apart from the library's scripts.
//
// Invariants: `done` is called exactly once; every transport or reply failure is answered by
// the failure policy and counted, never as an error; the key is routed by its own hash slot on
// a cluster.
#include <hiredis/hiredis.h>

#include "envoy_counter.h"
#include "hash_slot.h"
#include "redis_store_impl.h"

namespace ratelimit {
using namespace redis_detail;

bool RedisStore::Impl::envoy_layout(const Policy& policy) const {
  return options.key_layout == RedisKeyLayout::kEnvoy && policy.counts_every_hit();
}

namespace {

int64_t clock_now(const RedisStoreOptions& options) {
  return (options.test_clock != nullptr ? options.test_clock : &SystemClock::instance())
      ->now()
      .count();
}

}  // namespace

std::string RedisStore::Impl::envoy_key_now(const Policy& policy, std::string_view key) const {
  return envoy_counter_key(key, policy, clock_now(options));
}

void RedisStore::Impl::decide_envoy(const Policy& policy, std::string_view key, int64_t cost,
                                    algo::Op op, DecisionCallback done) {
  const int64_t now = clock_now(options);
  const std::string redis_key = envoy_counter_key(key, policy, now);
  const int slot = router->routes_by_slot() ? key_hash_slot(redis_key) : kAnySlot;
  auto command =
      std::make_shared<const std::string>(envoy_counter_command(redis_key, policy, cost, op));
  const int64_t limit = policy.limit();
  router->send(slot, std::move(command),
               [this, policy, cost, op, now, limit, done = std::move(done)](
                   const Status& error, const redisReply* reply) {
                 if (!error.is_ok()) return done(fail_decisions(error, {&limit, 1}).front());
                 auto d = envoy_counter_decision(reply, policy, cost, op, now);
                 if (!d.ok()) return done(fail_decisions(d.status(), {&limit, 1}).front());
                 counters.commands.fetch_add(1, std::memory_order_relaxed);
                 done(*d);
               });
}

}  // namespace ratelimit
