// state_peek.h — the one input the stores accept beyond validate_cost: a peek of cost 0 on a
// rate policy decided exactly, which answers the key's state as it is (algorithms.h: remaining
// = what is left now, reset_after = until it is all back; allowed, and nothing recorded).
//
// Why: redis-cell's CL.THROTTLE takes quantity 0 as exactly that peek (resp_api.h), and the
// math already defines it (algo::report answers with it). Why so narrow: an acquire of 0 would
// be a request that takes nothing, yet counts as a decision (refused: validate_cost); a
// concurrency policy's peek at 0 has no meaning (leases); a lease/async policy answers from a
// local slice whose peek was not designed for a cost of 0. Every front-end still asks for a
// cost of at least 1 (the HTTP body, RL.PEEK, gRPC), so nothing they accept changes.
// Every store's validation (store.cc, memory_store.cc, redis_store_decide.cc) calls this one
// predicate, so the stores cannot disagree on it.
#pragma once

#include <cstdint>

#include "ratelimit/policy.h"

namespace ratelimit {

inline bool is_state_peek(const Policy& policy, bool peek, int64_t cost) {
  return peek && cost == 0 && !policy.is_concurrency() && policy.consistency().mode == Consistency::kExact;
}

}  // namespace ratelimit
