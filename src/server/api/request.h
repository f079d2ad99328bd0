// request.h — the untrusted-input side of ratelimitd's API: JSON request bodies and the
// forward-auth query string, parsed into plain values with an HTTP-ready error on any fault.
//
// Why separate and pure: this is what an attacker controls, so it is small, allocation-light,
// has no server state, and is exercised directly by unit tests and by the libFuzzer target
// (tests/fuzz). Bounds: JSON nesting depth 4, key length and cost range from the config,
// at most kMaxPoliciesPerCall policies, no unknown fields (a typo such as "polcy" is an error,
// never silently ignored).
// Thread-safety: stateless functions; the output objects belong to the caller.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "ratelimit/store.h"

namespace ratelimit::server {

struct RequestBounds {
  size_t max_key_length = 256;
  int64_t max_cost = 1'000'000;
};

// Why a request was refused: HTTP status, a stable machine-readable code, a human message.
struct RequestError {
  unsigned status = 400;
  std::string_view error;  // "invalid_json", "invalid_request", "invalid_key", "invalid_cost", ...
  std::string message;
};

// {"key", "policy" | "policies", "cost", "limit", "max_wait_ms", "priority"} (acquire, peek), {"key",
// "policy" | "policies", "cost", "limit"} (report) or {"key", "policy"} (reset).
// Reusable: parse functions overwrite every field, keeping string capacity.
struct DecisionRequest {
  std::string key;
  std::array<std::string, kMaxPoliciesPerCall> policies;
  size_t policy_count = 0;
  bool multi = false;  // "policies": [...] was used (all or nothing)
  int64_t cost = 1;
  // "limit": the caller's own limit for its one "policy" (1 ... kMaxLimit; the policy's
  // request_limit bounds are checked by the caller); 0 = not given.
  int64_t limit = 0;
  unsigned deny_status = 0;  // forward-auth `?deny_status=` (401, 403, 429); 0 = not given
  // "max_wait_ms" (body) or `?max_wait_ms=` (forward-auth): the longest this request will wait
  // in its policy's queue, 0 ... kMaxWaitMs; -1 = not given (the policy's max_wait). The
  // policy's max_wait caps it: a request may ask for less wait, never more.
  int64_t max_wait_ms = -1;
  // "priority" (POST /v1/leases): the request's priority class by name (the policy's classes,
  // include/ratelimit/priority.h; resolved by the caller); empty = not given.
  std::string priority;
};

// The largest max_wait_ms a request may name (one hour; the policy's max_wait caps it anyway).
inline constexpr int64_t kMaxWaitMs = 3'600'000;

enum class BodyKind : uint8_t {
  kDecision,  // key, policy or policies, optional cost
  kReset,     // key, policy
  kReport,    // key, policy or policies, cost (required: -max_cost ... max_cost; < 0 a refund)
};

// Parses a request body. On failure returns false and fills `err` (status 400). Policy names
// are checked for shape only; whether they exist is the caller's business.
[[nodiscard]] bool parse_request_body(std::string_view body, BodyKind kind, const RequestBounds& bounds,
                        DecisionRequest& out, RequestError& err);

// The fast path of parse_request_body: true when `body` is exactly a JSON object of the two
// members "key" and "policy" (either order, each once) whose values are strings of printable
// ASCII without escapes, with only JSON whitespace around the tokens; `key` and `policy` then
// view their contents. Boost.JSON reads every such body as the same two strings, so the
// answer cannot differ; anything else returns false (the full parser decides). Exposed for the
// fuzz target, which checks that claim against Boost.JSON.
bool plain_key_policy(std::string_view body, std::string_view& key, std::string_view& policy);

// Parses the query of GET /v1/forward-auth: one or more `policy=NAME` (percent-encoded;
// several = all or nothing), at most one `deny_status=` (429, 403 or 401) and at most one
// `max_wait_ms=` (0 ... kMaxWaitMs). `out.key` is
// left untouched; cost is 1.
[[nodiscard]] bool parse_forward_auth_query(std::string_view query, DecisionRequest& out, RequestError& err);

// Parses a lease release's body (DELETE /v1/leases/{id}): empty (nothing reported), or
// {"outcome": "ok" | "dropped" | "timeout", "latency_ms": number} with both fields optional.
// dropped and timeout mean the work failed for want of capacity (a drop to an adaptive limit's
// estimator); latency_ms (finite, 0 <= ms < 3,600,000, microsecond precision) replaces the
// measured grant-to-release round trip. Anything else — another outcome, a negative, NaN-like
// or hour-long latency, an unknown field — is refused with 400, so it never reaches the store.
[[nodiscard]] bool parse_release_body(std::string_view body, adaptive::ReleaseReport& out, RequestError& err);

// Checks a key against the bounds (1 ... max_key_length bytes).
bool check_key(std::string_view key, const RequestBounds& bounds, RequestError& err);

}  // namespace ratelimit::server
