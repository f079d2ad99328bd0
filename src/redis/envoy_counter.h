// envoy_counter.h — envoyproxy/ratelimit's Redis layout for its counters, so that a fleet
// migrating one instance at a time shares one count per descriptor (issue 23 item 6).
//
// What envoyproxy/ratelimit does (src/limiter/cache_key.go, src/redis/fixed_cache_impl.go):
// the key is CACHE_KEY_PREFIX + domain + "_" + (entry key + "_" + value + "_")… + the window's
// start in Unix seconds (now / unit * unit, the host's clock); each hit is INCRBY key hits
// followed by EXPIRE key <unit seconds>, pipelined; the request is over the limit when the
// count after it exceeds requests_per_unit. rls::RuleSet builds the part before the window
// start (Applied::cache_key); this file adds the window start, the commands, and turns the
// count into a Decision through src/core's fixed window (every hit counting), so the decision
// math stays there.
// Only Policy::fixed_window_every_hit policies (envoyproxy/ratelimit's counter) use it; the
// store's options choose it (RedisStoreOptions::key_layout). Pure functions, no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ratelimit/algorithms.h"
#include "ratelimit/policy.h"
#include "ratelimit/status.h"

struct redisReply;

namespace ratelimit::redis_detail {

// `key` followed by the start, in whole Unix seconds, of the policy's window holding now_us.
std::string envoy_counter_key(std::string_view key, const Policy& policy, int64_t now_us);

// The RESP command for one decision on `redis_key`: an acquire adds `cost` and refreshes the
// TTL to the window's length in seconds, atomically (one EVAL of INCRBY then EXPIRE: what
// envoyproxy/ratelimit pipelines); a peek, or an acquire of cost 0 (a check), reads the count
// (GET) and writes nothing.
std::string envoy_counter_command(const std::string& redis_key, const Policy& policy,
                                  int64_t cost, algo::Op op);

// The decision the reply gives: the count before this request is the reply (GET; nil = 0) or
// the reply minus `cost` (INCRBY), decided by algo::decide on that window at now_us.
// kUnavailable for a reply that is not a count (an error reply, a key of another type).
Result<Decision> envoy_counter_decision(const redisReply* reply, const Policy& policy,
                                        int64_t cost, algo::Op op, int64_t now_us);

}  // namespace ratelimit::redis_detail
