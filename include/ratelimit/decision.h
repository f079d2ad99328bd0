// decision.h — the answer to "may this request pass?".
//
// Why one type: the same Decision feeds the library caller, the HTTP headers, the JSON body
// and the simulator's tables. Over the limit is a Decision (allowed = false), not an error.
// Invariants:
//   - allowed  => retry_after == 0;
//   - !allowed && reason == kOverLimit => retry_after > 0, and waiting exactly retry_after
//     (with no other traffic on the key) admits the same request, 1 µs less does not;
//   - reason == kExceedsCapacity => !allowed, retry_after == 0 (no wait can ever help);
//   - 0 <= remaining <= limit; reset_after >= 0; delay > 0 only for a shaping leaky bucket.
// Thread-safety: Decision is a plain value (no shared state); decision_reason_name returns a
// static string and may be called from any thread.
#pragma once

#include <cstdint>

#include "ratelimit/clock.h"

namespace ratelimit {

enum class DecisionReason : uint8_t {
  kWithinLimit,        // admitted
  kOverLimit,          // denied; retry_after says when the same request would pass
  kExceedsCapacity,    // denied; cost > limit (or burst): this request can never pass
  kStoreFailedOpen,    // store unreachable; admitted by the configured fail-open policy
  kStoreFailedClosed,  // store unreachable; denied by the configured fail-closed policy
};

// "within_limit", "over_limit", "exceeds_capacity", "failed_open", "failed_closed".
const char* decision_reason_name(DecisionReason r);

struct Decision {
  bool allowed = false;
  DecisionReason reason = DecisionReason::kOverLimit;
  int64_t limit = 0;      // the policy's capacity (L or burst)
  int64_t remaining = 0;  // cost-1 requests that would still be admitted right now
  Micros reset_after{0};  // until the limit is fully available again (no other traffic)
  Micros retry_after{0};  // 0 when allowed; else the shortest wait that admits this request
  Micros delay{0};        // shaping leaky bucket: hold the request this long before serving

  friend bool operator==(const Decision&, const Decision&) = default;
};

}  // namespace ratelimit
