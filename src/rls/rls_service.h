// rls_service.h — envoyproxy/ratelimit's ShouldRateLimit, transport-neutral: a
// RateLimitRequest (domain, descriptors, hits_addend) in, a RateLimitResponse (overall_code,
// statuses in request order, response_headers_to_add) out, every decision made by the decision
// service (src/service). The gRPC front-end (RateLimitService/ShouldRateLimit) and the HTTP
// front-end (POST /json) both translate their wire form into a Call and render its response;
// neither holds any matching, counting or status logic.
//
// Why one home: which rule applies (RuleSet::resolve), the hits per descriptor, the
// STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT two-step, per-rule shadow_mode, SHADOW_MODE, quota_mode,
// the limit headers and the per-rule statistics are envoyproxy/ratelimit's service semantics
// (src/service/ratelimit.go, src/limiter/base_limiter.go, src/redis/fixed_cache_impl.go); two
// front-ends writing them twice would drift.
//
// What happens to one request (see rule_set.h for the matching):
//   - refused (Call::status kInvalidArgument, nothing counted): empty domain ("rate limit domain
//     must not be empty"), no descriptors ("rate limit descriptor list must not be empty"), more
//     than kMaxDescriptors, a descriptor without entries or with more than kMaxEntries, an empty
//     entry key or value (the proto's validation rules: entries min_items 1, key and value
//     min_len 1 — checked here so that gRPC and /json refuse alike), a limit override with an
//     unknown unit, a cache key longer than kMaxKeyLength, hits above kMaxCost;
//   - hits of a descriptor: its hits_addend when set (0 = check only), else
//     max(1, request.hits_addend);
//   - no rule: OK without current_limit; unlimited: OK with limit_remaining 4294967295; else
//     the rule's policy decides `hits` on the cache key (all descriptors independently, as
//     envoyproxy/ratelimit counts them); with stop_increment_when_over_limit every descriptor
//     is first checked, then counted by algo::hits_to_count_when_stopping;
//   - a denied descriptor is OVER_LIMIT with limit_remaining 0, unless its rule is in
//     shadow_mode (then OK, counted in shadow_mode); current_limit = {requests_per_unit, unit,
//     name}; duration_until_reset = the decision's reset_after rounded up to seconds (for the
//     default fixed window: unit - now % unit, envoyproxy/ratelimit's value);
//   - overall_code: OVER_LIMIT when a descriptor outside quota_mode is OVER_LIMIT, or when every
//     quota_mode descriptor is; SHADOW_MODE turns an overall OVER_LIMIT into OK (the statuses
//     stay as decided);
//   - response_headers_to_add (when enabled): limit, remaining and reset of the descriptor
//     closest to its limit (an over-limit one, if any), envoyproxy/ratelimit's choice; with
//     ietf_headers also RateLimit-Policy and RateLimit for it;
//   - a store that failed answers by its failure policy (fail open: OK; closed: OVER_LIMIT); a
//     store call that returned an error fails the call (Call::status, kUnavailable ...).
// Completion: should_rate_limit() returns true when the Call's answer is complete on return
// (the memory store); otherwise false, and call.done() is called exactly once, later, from a
// store thread — the front-end then posts to its own thread before rendering.
// Rules: read through a SnapshotView, so the owner publishes them in the same swap as the rest of
// its configuration (ratelimitd: one swap for every API); standalone, the service owns the cell.
// Thread-safety: one RateLimitService serves every front-end thread; should_rate_limit() may be
// called concurrently with distinct Calls; refresh() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "mutex.h"
#include "config_dir.h"
#include "decision_service.h"
#include "envoy_env.h"
#include "rls_stats.h"
#include "rule_set.h"
#include "snapshot.h"

namespace ratelimit::rls {

// RateLimitResponse.Code with its wire values.
enum class Code : uint8_t { kUnknown = 0, kOk = 1, kOverLimit = 2 };
// "UNKNOWN", "OK", "OVER_LIMIT" (the proto enum names).
inline const char* code_name(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kOverLimit: return "OVER_LIMIT";
    default: return "UNKNOWN";
  }
}

// Per request: one decision holds them all, so this is the store's bound under Envoy's name.
inline constexpr size_t kMaxDescriptors = kMaxOpsPerCall;
static_assert(kMaxDescriptors <= kMaxOpsPerCall, "a request's descriptors are decided in one store call");
inline constexpr size_t kMaxEntries = 64;  // per descriptor
// "at most 64 descriptors per request, got <n>" when n > kMaxDescriptors (the service and the
// /json parser, which stops reading there, refuse with the same words).
[[nodiscard]] inline Status check_descriptor_count(size_t n) {
  if (n <= kMaxDescriptors) return {};
  return Status::invalid_argument("at most " + std::to_string(kMaxDescriptors) + " descriptors per request, got " +
                                  std::to_string(n));
}

struct RequestEntry {
  std::string key;
  std::string value;
};
struct RequestDescriptor {
  std::vector<RequestEntry> entries;
  std::optional<LimitOverride> limit;      // RateLimitDescriptor.limit
  std::optional<uint64_t> hits_addend;     // RateLimitDescriptor.hits_addend (UInt64Value)
};
struct RateLimitRequest {
  std::string domain;
  std::vector<RequestDescriptor> descriptors;
  uint32_t hits_addend = 0;
  void clear() {
    domain.clear();
    descriptors.clear();
    hits_addend = 0;
  }
};

struct CurrentLimit {
  uint32_t requests_per_unit = 0;
  Unit unit = Unit::kUnknown;
  std::string name;
};
struct DescriptorStatus {
  Code code = Code::kUnknown;
  std::optional<CurrentLimit> current_limit;
  uint32_t limit_remaining = 0;
  std::optional<int64_t> duration_until_reset_seconds;
};
struct HeaderValue {
  std::string key;
  std::string value;
};
struct RateLimitResponse {
  Code overall_code = Code::kUnknown;
  std::vector<DescriptorStatus> statuses;
  std::vector<HeaderValue> response_headers_to_add;
  void clear() {
    overall_code = Code::kUnknown;
    statuses.clear();
    response_headers_to_add.clear();
  }
};

// The service-level settings (from EnvoySettings).
struct ServiceOptions {
  float near_limit_ratio = 0.8F;
  bool shadow_mode = false;                     // SHADOW_MODE
  bool stop_increment_when_over_limit = false;  // STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT
  bool response_headers = false;                // LIMIT_RESPONSE_HEADERS_ENABLED
  std::string limit_header = "RateLimit-Limit";
  std::string remaining_header = "RateLimit-Remaining";
  std::string reset_header = "RateLimit-Reset";
  // Also the IETF structured fields RateLimit-Policy ("name";q=<requests_per_unit>;w=<unit
  // seconds>) and RateLimit ("name";r=<remaining>;t=<reset seconds>) of the same descriptor
  // (draft-ietf-httpapi-ratelimit-headers); ours, envoyproxy/ratelimit has no such option.
  bool ietf_headers = false;

  static ServiceOptions from(const EnvoySettings& s);
};

class RateLimitService;

// One ShouldRateLimit in flight, owned by the front-end (reusable once complete). Fill
// `request`, call should_rate_limit(); read `status` and `response` once complete.
class Call {
 public:
  Call();
  virtual ~Call();
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  RateLimitRequest request;
  Status status;               // not ok: no response (see top for the codes)
  RateLimitResponse response;  // valid when status is ok

  // Called exactly once from a store thread when should_rate_limit() returned false.
  virtual void done() = 0;

  struct State;  // the service's per-request state (src/rls/rls_call.h, internal)

 private:
  friend class RateLimitService;
  std::unique_ptr<State> state_;
};

class RateLimitService {
 public:
  // The rules as a Call reads them: a RuleSet with, per rule, its service::Rule and statistics
  // slot. Immutable once built (defined in rls_call.h).
  struct Snapshot;
  // `rules` (RuleSource generation `generation`) ready to serve; `outcomes` (the decision
  // service's per-rule outcome counters for every Envoy rule) must never be freed.
  static std::shared_ptr<const Snapshot> snapshot(std::shared_ptr<const RuleSet> rules, uint64_t generation,
                                                  service::RuleCounters* outcomes);

  // Serves what `rules` publishes: the owner publishes Snapshots (snapshot()) in its own cell —
  // ratelimitd's composition root, with the rest of the daemon's configuration in one swap.
  // refresh() does nothing. `stats` and the view's cell must outlive the service.
  RateLimitService(service::DecisionService& decisions, service::SnapshotView<Snapshot> rules,
                   ServiceOptions options, RuleStats& stats);
  // Standalone: serves `rules`' current RuleSet and follows it on refresh(). `rules` and `stats`
  // must outlive the service; `outcomes` as for snapshot().
  RateLimitService(service::DecisionService& decisions, RuleSource& rules, ServiceOptions options,
                   RuleStats& stats, service::RuleCounters* outcomes);
  ~RateLimitService();

  bool should_rate_limit(Call& call);

  // Standalone only: publishes the RuleSource's current RuleSet if it is newer than the one
  // serving (call it after a successful RuleSource::reload). Calls already started finish on the
  // old one.
  void refresh() RL_EXCLUDES(refresh_mu_);
  // RuleSource generation of the RuleSet serving.
  uint64_t generation() const;
  // The serving RuleSet's dump (for /rlconfig).
  std::string dump() const;

 private:
  struct Own;  // the standalone service's cell: { Snapshot }
  friend struct Call::State;
  static void prepare(Call::State& st);
  bool step(Call& call);   // starts the current phase; true when it completed inline
  bool after(Call& call);  // takes a phase's result; true when another phase is to run
  // The answer (rls_answer.cc).
  void finish(Call& call);
  void answer_descriptor(Call& call, size_t i, DescriptorStatus& ds);
  HitCounters* counters_for(const Call::State& st, std::string_view domain, size_t i, uint64_t total_hits);
  void add_headers(const DescriptorStatus& closest, const Rule& rule, RateLimitResponse& resp) const;

  service::DecisionService& decisions_;
  const ServiceOptions options_;
  RuleStats& stats_;
  // Standalone: the RuleSource followed, its outcome counters and the cell published into.
  RuleSource* source_ = nullptr;
  service::RuleCounters* outcomes_ = nullptr;
  Mutex refresh_mu_;  // one refresh() at a time: a generation is built and published once
  std::unique_ptr<service::SnapshotCell<Own>> own_;
  service::SnapshotView<Snapshot> view_;  // after own_: it may view it
};

}  // namespace ratelimit::rls
