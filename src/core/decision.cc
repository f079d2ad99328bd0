// decision.cc — stable names for decision reasons (logs, JSON, metrics labels).
#include "ratelimit/decision.h"

namespace ratelimit {

const char* decision_reason_name(DecisionReason r) {
  switch (r) {
    case DecisionReason::kWithinLimit: return "within_limit";
    case DecisionReason::kOverLimit: return "over_limit";
    case DecisionReason::kExceedsCapacity: return "exceeds_capacity";
    case DecisionReason::kStoreFailedOpen: return "failed_open";
    case DecisionReason::kStoreFailedClosed: return "failed_closed";
  }
  return "unknown";
}

}  // namespace ratelimit
