// bench_common.h — what ratelimit-bench's subcommands share (tools/bench: race.cc,
// throughput.cc, bench.cc): a fresh random key, the "allow" policy of a throughput run, and a
// Redis store connected as every subcommand connects it (fail closed, 5 s command timeout).
// Internal to tools/bench.
// Invariants: nothing here waits unboundedly; errors come back as a Status, never thrown.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "ratelimit/policy.h"
#include "ratelimit/redis_store.h"

namespace ratelimit::bench {

// "bench:<what>:<16 random hex digits>": a key no earlier run used.
std::string random_key(const char* what);

// The policy a throughput run (and evalsha-args) uses for `algorithm`: as the peers' harness,
// an "allow" limit never reached. kNotFound for an unknown algorithm name.
Result<Policy> allow_policy(const std::string& algorithm);

// A RedisStore on `url` with `connections` (0: the store's default), failing closed, with a
// 5 s command timeout; connecting loads every script.
Result<std::shared_ptr<RedisStore>> connect_store(const std::string& url, size_t connections,
                                                  bool use_functions = true,
                                                  size_t max_batch = RedisStoreOptions{}.max_batch);

}  // namespace ratelimit::bench
