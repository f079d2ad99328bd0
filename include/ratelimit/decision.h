// decision.h — the answer to "may this request pass?".
//
// Why one type: the same Decision feeds the library caller, the HTTP headers, the JSON body
// and the simulator's tables. Over the limit is a Decision (allowed = false), not an error.
// Invariants:
//   - allowed  => retry_after == 0;
//   - !allowed && reason == kOverLimit => retry_after > 0, and waiting exactly retry_after
//     (with no other traffic on the key) admits the same request, 1 µs less does not;
//   - reason == kExceedsCapacity => !allowed, retry_after == 0 (no wait can ever help);
//   - reason == kLeaseNotHeld => !allowed, retry_after == 0 (a release or renew of a lease that
//     is not held: expired, released, or never issued under this key and policy);
//   - reason == kPolicyConflict => !allowed, remaining == 0, retry_after == reset_after > 0:
//     the key's state was written under another definition of the same policy name (another
//     algorithm, window or counting mode: see same_state_meaning in policy.h), which is still
//     live; nothing was counted, and retry_after is when that state ends (then this definition
//     starts the key afresh);
//   - 0 <= remaining <= limit; reset_after >= 0; delay > 0 only for a shaping leaky bucket;
//   - lease is empty except on a concurrency policy's decisions: an admitted acquire carries
//     the new lease's id; a release or renew carries the id it was asked about.
// Thread-safety: Decision is a plain value (no shared state); decision_reason_name returns a
// static string and may be called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ratelimit/clock.h"

namespace ratelimit {

enum class DecisionReason : uint8_t {
  kWithinLimit,        // admitted
  kOverLimit,          // denied; retry_after says when the same request would pass
  kExceedsCapacity,    // denied; cost > limit (or burst): this request can never pass
  kStoreFailedOpen,    // store unreachable; admitted by the configured fail-open policy
  kStoreFailedClosed,  // store unreachable; denied by the configured fail-closed policy
  kLeaseNotHeld,       // release/renew of a lease that is not held (expired, released, foreign)
  kPolicyConflict,     // denied; the key holds live state of another definition of this name
};

// "within_limit", "over_limit", "exceeds_capacity", "failed_open", "failed_closed",
// "lease_not_held", "policy_conflict".
const char* decision_reason_name(DecisionReason r);

// The identity of one lease of a concurrency policy: 128 random bits drawn by the store layer
// (new_lease_id() in store.h) from the kernel's CSPRNG, so a lease cannot be guessed, and
// ownership is the id itself. All zero = no lease. A plain value; thread-safe to copy.
struct LeaseId {
  std::array<uint8_t, 16> bytes{};

  bool empty() const {
    for (uint8_t b : bytes) {
      if (b != 0) return false;
    }
    return true;
  }
  // 32 lower-case hex digits (the form Redis stores and the wire carries).
  std::string to_hex() const;
  // Inverse of to_hex (either case accepted); nullopt for anything but 32 hex digits.
  static std::optional<LeaseId> from_hex(std::string_view hex);

  friend bool operator==(const LeaseId&, const LeaseId&) = default;
  friend auto operator<=>(const LeaseId&, const LeaseId&) = default;
};

struct Decision {
  bool allowed = false;
  DecisionReason reason = DecisionReason::kOverLimit;
  int64_t limit = 0;      // the policy's capacity (L or burst)
  int64_t remaining = 0;  // cost-1 requests that would still be admitted right now
  Micros reset_after{0};  // until the limit is fully available again (no other traffic)
  Micros retry_after{0};  // 0 when allowed; else the shortest wait that admits this request
  Micros delay{0};        // shaping leaky bucket: hold the request this long before serving
  LeaseId lease;          // concurrency policies only (see the invariants above)

  friend bool operator==(const Decision&, const Decision&) = default;
};

}  // namespace ratelimit
