// waiting_rule.h — the rules of waiting instead of refusing, as pure functions: which denial a
// request waits on, and when the next waiter of a key's FIFO queue is decided after its head was
// admitted.
//
// Why here: this is decision logic, so it has one home (src/core/waiting_rule.cc). The waiting
// service (src/service/waiting.cc, waiting_loop.cc: the daemon's queues) and the simulator's
// throttle lanes (src/sim/throttle.cc) both call these functions, so the simulator's queue
// admits, refuses and re-decides exactly when the daemon's does. Hand-worked cases:
// tests/core/waiting_rule_test.cc.
// Invariants: integer microseconds; no clock is read (callers pass `now` and the deadline on
// one time base); a waiter is never kept past its deadline by these rules.
#pragma once

#include <cstdint>

#include "ratelimit/decision.h"

namespace ratelimit::algo {

// A denial that waiting can turn into an admission: over the limit with retry_after > 0. Not an
// admission, a cost above the capacity (kExceedsCapacity: nothing to wait for), a failure
// policy's answer or a lease not held.
bool waitable(const Decision& d);

// Whether a request denied with `d` at `now_us` waits — or, its re-decision at the head of its
// queue denied again, keeps waiting — until `deadline_us`: `d` is waitable, and for a rate
// policy the moment it could pass (now + retry_after) is no later than the deadline (a later
// one cannot be met: the request is answered at once). A concurrency policy's waiter waits
// whatever retry_after says: a release can come at any moment; its deadline ends the wait.
bool worth_waiting(const Decision& d, bool concurrency, int64_t now_us, int64_t deadline_us);

// After the head of a queue was admitted with `d`: whether the next waiter (cost `next_cost`)
// is decided at once, because the decision says there is room left for it — for a concurrency
// policy the free units cover its cost, for a rate policy any unit is left (its own check then
// decides) — rather than at the retry time of the last denial the queue saw.
bool next_decided_at_once(const Decision& d, bool concurrency, int64_t next_cost);

}  // namespace ratelimit::algo
