// script_codec.h — the Redis store's pure half: Redis key names, the EVALSHA and FCALL commands
// that carry decisions (one, all or nothing, or a batch) to the Lua code, and the decoding of
// their replies. No I/O, no threads.
//
// Why apart from the transport (resp_connection.h): this is where the store's correctness lives
// (what goes in KEYS, what goes in ARGV, how integers come back), so it is testable on its own
// and readable in one place, as hiredis separates its reply reader from its event loop.
// Invariants:
//   - every key a script touches is in KEYS, every varying value in ARGV; the script text never
//     changes (it is the SHA1 the command names);
//   - all keys of one user key share the hash tag `{<escaped key>}`; the escaped key holds no
//     brace, so no user key can move into another's tag or state. Only a batch call mixes user
//     keys, and the invoker sends one only where that is allowed (standalone, or one slot);
//   - ARGV[1] is "-" (the server's TIME) unless a test clock supplies the time.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "lua_scripts.h"
#include "ratelimit/algorithms.h"
#include "ratelimit/consistency.h"
#include "ratelimit/decision.h"
#include "ratelimit/policy.h"
#include "ratelimit/redis_store.h"
#include "ratelimit/status.h"
#include "resp.h"

struct redisReply;

namespace ratelimit::redis_detail {

// '%' -> %25, '{' -> %7B, '}' -> %7D; every other byte as is. Injective, brace-free.
std::string escape_key(std::string_view key);

// The channel concurrency.lua publishes each freeing release on, and its message
// "<lease id> <state key>" read back: the policy name and the user key (unescaped) of a state key
// under `prefix`. nullopt for a message of another form or another prefix. Pure.
inline constexpr std::string_view kReleasedChannel = "ratelimit:released";
struct ReleasedKey {
  LeaseId lease;
  std::string key;
  std::string policy;
};
std::optional<ReleasedKey> parse_released(std::string_view prefix, std::string_view message);

// The sorted set that holds a sliding log's entries, beside the state key.
std::string log_key(const std::string& state_key);
// The sorted set of a concurrency policy's leases (id -> expiry), beside its hash.
std::string leases_key(const std::string& state_key);

// One EVALSHA: which script, its KEYS and its ARGV.
struct ScriptCall {
  ScriptId script = kScriptFixedWindow;
  std::vector<std::string> keys;
  std::vector<std::string> args;
};

// A decision on one policy. `now_us` is set only in test mode. A concurrency policy's call
// carries `lease` (its acquire: the new lease's id; release, renew: the lease named) as a ninth
// argument, 32 hex digits; a release under an adaptive policy also its `report` (the sample the
// learned limit takes: "<id>,<dropped 0|1>,<latency_us>").
// Preconditions: validate_key(key) and validate_cost(cost) are ok.
ScriptCall decide_call(std::string_view prefix, const Policy& policy, std::string_view key,
                       int64_t cost, algo::Op op, std::optional<int64_t> now_us,
                       const LeaseId& lease = {}, const adaptive::ReleaseReport& report = {});

// All or nothing over several policies. Precondition: validate_acquire_all(...) is ok.
ScriptCall acquire_all_call(std::string_view prefix, std::span<const Policy> policies,
                            std::string_view key, int64_t cost, algo::Op op,
                            std::optional<int64_t> now_us);

// All or nothing across several keys, each with its own policy, cost and op (decide_many.lua).
// Precondition: validate_decide_many(ops, kAllOrNothing) is ok.
ScriptCall decide_many_call(std::string_view prefix, std::span<const StoreOp> ops,
                            std::optional<int64_t> now_us);

// The lease call (consistency.h reserve(), distributed.lua run_reserve): give back, then
// reserve up to `want`. Precondition: the policy's algorithm is fixed_window or
// sliding_window_counter; validate_key(key) ok; want, give_back >= 0.
ScriptCall reserve_call(std::string_view prefix, const Policy& policy, std::string_view key,
                        int64_t give_back_window_us, int64_t give_back, int64_t want,
                        std::optional<int64_t> now_us);
// The async push (consistency.h add_hits(), run_add_hits). Preconditions as reserve_call.
ScriptCall add_hits_call(std::string_view prefix, const Policy& policy, std::string_view key,
                         int64_t window_us, int64_t hits, std::optional<int64_t> now_us);
// The reply of either: six integers (now_us, window_start_us, prev, curr, granted, dropped). kInternal
// for anything else (an error reply included: its text).
Result<algo::SharedView> decode_shared_view(const redisReply* reply);

// The keys reset deletes (state and log, or state and leases).
std::vector<std::string> reset_keys(std::string_view prefix, const Policy& policy,
                                    std::string_view key);

// Several single-policy decisions (each built by decide_call) as one call of the batch script:
// the items' keys in order; the distinct (algorithm, policy) pairs once each; per item one
// argument, the pair's index ("<index>:<cost>:<op>" unless an acquire of cost 1;
// "<index>:<cost>:<op>:<lease>" for a concurrency policy), and its now
// only when a test clock set one (run_batch in lua/multi.lua). The reply holds one decision per
// item, in order.
// Precondition: 1 ... kMaxBatch items, each an algorithm's script (not acquire_all or batch).
inline constexpr size_t kMaxBatch = 1024;
ScriptCall batch_call(std::span<const ScriptCall* const> items);

// RESP bytes of EVALSHA <sha1> <numkeys> KEYS... ARGV...
std::string encode_evalsha(const ScriptCall& call);
// RESP bytes of FCALL <function_name(call.script)> <numkeys> KEYS... ARGV... (Redis >= 7, with
// kLuaLibrary loaded). Same keys, arguments and reply as EVALSHA.
std::string encode_fcall(const ScriptCall& call);

// A script's reply (four integers per decision: reason, remaining, reset_after, and delay when
// allowed, retry_after when not) as Decisions; `limits` gives Decision::limit,
// one per expected decision. kInternal for anything else (an error reply included: its text).
Result<std::vector<Decision>> decode_decisions(const redisReply* reply,
                                               std::span<const int64_t> limits);
// Decision `index` of a reply holding `count` (a batch's), with Decision::limit = `limit`.
Result<Decision> decode_decision_at(const redisReply* reply, size_t index, size_t count,
                                    int64_t limit);

// "NOSCRIPT No matching script..." — the script cache was flushed (restart, failover, SCRIPT
// FLUSH); the command did not run.
bool is_noscript(const redisReply* reply);
// "ERR Function not found" — the library is gone (restart without persistence, FUNCTION FLUSH,
// a failover to a node that never had it); the command did not run.
bool is_function_not_found(const redisReply* reply);

}  // namespace ratelimit::redis_detail
