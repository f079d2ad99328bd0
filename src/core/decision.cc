// decision.cc — stable names for decision reasons (logs, JSON, metrics labels), and the hex
// form of lease ids.
#include "ratelimit/decision.h"

namespace ratelimit {

const char* decision_reason_name(DecisionReason r) {
  switch (r) {
    case DecisionReason::kWithinLimit: return "within_limit";
    case DecisionReason::kOverLimit: return "over_limit";
    case DecisionReason::kExceedsCapacity: return "exceeds_capacity";
    case DecisionReason::kStoreFailedOpen: return "failed_open";
    case DecisionReason::kStoreFailedClosed: return "failed_closed";
    case DecisionReason::kLeaseNotHeld: return "lease_not_held";
    case DecisionReason::kPolicyConflict: return "policy_conflict";
  }
  return "unknown";
}

std::string LeaseId::to_hex() const {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(32, '0');
  for (size_t i = 0; i < bytes.size(); ++i) {
    out[2 * i] = kDigits[bytes[i] >> 4];
    out[2 * i + 1] = kDigits[bytes[i] & 15];
  }
  return out;
}

std::optional<LeaseId> LeaseId::from_hex(std::string_view hex) {
  if (hex.size() != 32) return std::nullopt;
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  LeaseId id;
  for (size_t i = 0; i < id.bytes.size(); ++i) {
    const int hi = nibble(hex[2 * i]);
    const int lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    id.bytes[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return id;
}

}  // namespace ratelimit
