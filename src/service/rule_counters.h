// rule_counters.h — what the decision service counts per rule (a named policy of the HTTP API,
// a descriptor rule of the Envoy API): outcomes of the decisions made under it.
//
// Why here: the decision service is the one place that sees every decision (whatever the
// front-end), so it is the one place that counts them; the daemon's Metrics owns the counters
// (stable pointers, never freed) and renders them.
// Thread-safety: relaxed atomic increments; any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ratelimit::service {

// kConflict: refused policy_conflict (another definition of the policy's name holds the key) —
// a configuration error to page on, not a client over its limit, so never counted as kDenied.
enum class Outcome : uint8_t { kAllowed, kDenied, kShadowDenied, kFailedOpen, kFailedClosed, kConflict };
inline constexpr size_t kOutcomeCount = 6;

struct RuleCounters {
  std::array<std::atomic<uint64_t>, kOutcomeCount> outcomes{};
  void count(Outcome o) { outcomes[static_cast<size_t>(o)].fetch_add(1, std::memory_order_relaxed); }
};

}  // namespace ratelimit::service
