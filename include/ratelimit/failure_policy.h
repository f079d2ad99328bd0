// failure_policy.h — what a store answers when the service holding its state cannot (Redis down,
// a reserve or read of the lease/async modes failing): admit (open) or deny (closed), and the
// one Decision that says so.
//
// Why in core: every store that can fail applies it — RedisStore to a decision Redis could not
// make, DistributedStore to a request that needed the shared store — and both must answer the
// same Decision, so it is written once here (STYLE.md principle 5: failing open or closed is
// explicit configuration, and counted by each store).
// Invariants: an open answer is allowed with reason kStoreFailedOpen; a closed one is denied
// with kStoreFailedClosed and retry_after = kFailedClosedRetryAfter; remaining and reset_after
// are 0 (unknown); limit is the policy's.
#pragma once

#include <cstdint>
#include <string_view>

#include "ratelimit/clock.h"
#include "ratelimit/decision.h"
#include "ratelimit/status.h"

namespace ratelimit {

// What a decision answers when the store cannot: admit (open) or deny (closed).
enum class FailurePolicy : uint8_t { kOpen, kClosed };

// "open", "closed".
const char* failure_policy_name(FailurePolicy p);
// Inverse of failure_policy_name; kInvalidArgument for anything else.
Result<FailurePolicy> parse_failure_policy(std::string_view text);

// The retry_after of a closed answer: a client backs off this long before asking again.
inline constexpr Micros kFailedClosedRetryAfter{1'000'000};

// The answer of `policy` for a limit of `limit` (see the invariants above). Pure.
Decision failure_decision(FailurePolicy policy, int64_t limit);

}  // namespace ratelimit
