// failure_policy.cc — the failure policy's names and its one Decision (see
// include/ratelimit/failure_policy.h; RedisStore and DistributedStore both answer with it).
#include "ratelimit/failure_policy.h"

#include <string>

namespace ratelimit {

const char* failure_policy_name(FailurePolicy p) {
  return p == FailurePolicy::kOpen ? "open" : "closed";
}

Result<FailurePolicy> parse_failure_policy(std::string_view text) {
  if (text == "open") return FailurePolicy::kOpen;
  if (text == "closed") return FailurePolicy::kClosed;
  return Status::invalid_argument("on_failure must be 'open' or 'closed', got '" +
                                  std::string(text) + "'");
}

Decision failure_decision(FailurePolicy policy, int64_t limit) {
  Decision d;
  d.limit = limit;
  d.remaining = 0;
  if (policy == FailurePolicy::kOpen) {
    d.allowed = true;
    d.reason = DecisionReason::kStoreFailedOpen;
  } else {
    d.allowed = false;
    d.reason = DecisionReason::kStoreFailedClosed;
    d.retry_after = kFailedClosedRetryAfter;
  }
  return d;
}

}  // namespace ratelimit
