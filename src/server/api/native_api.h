// native_api.h — ratelimitd's own decision endpoints as Handlers: POST /v1/acquire, /v1/peek
// and /v1/report (JSON body), /v1/forward-auth[/...] (key from a header or the client address, for
// Traefik, Caddy, nginx auth_request, Envoy ext_authz) and POST /v1/reset (admin). The contract —
// statuses, headers, bodies, what counts as bad input — is README.md (ratelimitd); every
// decision is the decision service's (src/service); this file parses (request.h) and renders
// (ratelimit/http.h) only.
//
// Invariants:
//   - a request is decided against one published configuration (published.h) from start to
//     end, even if a reload lands meanwhile: the exchange's state keeps the snapshot it used;
//   - bad input is refused before the store is touched, so it never consumes a unit;
//   - the admin token is compared in constant time and never written anywhere.
// Thread-safety: the handlers are shared by every worker; per-request state lives in the
// Exchange (NativeState), so handle() may run concurrently on distinct exchanges.
#pragma once

#include <optional>
#include <string_view>

#include "decision_service.h"
#include "waiting.h"
#include "handler.h"
#include "published.h"

namespace ratelimit::server {

// What the native handlers share: the decision service, the waiting service in front of it
// (acquires that may wait go there, with their budget), and the published configuration.
struct NativeApi {
  service::DecisionService& decisions;
  service::WaitingService& waiting;
  const ConfigCell& config;
};

// The wait budget a request named (max_wait_ms; -1: none, so the policy's max_wait).
inline Micros wait_budget(int64_t max_wait_ms) {
  return max_wait_ms < 0 ? Micros::max() : Micros{max_wait_ms * 1000};
}

// What a DecisionHandler does with the units of its request.
enum class DecisionVerb : uint8_t {
  kAcquire,  // POST /v1/acquire: decide and consume (may wait, max_wait)
  kPeek,     // POST /v1/peek: decide without consuming (peek_requires_admin_token: admin only)
  kReport,   // POST /v1/report: usage known after the fact, recorded even past the limit (a
             // debt), or given back (negative cost); never refused, never waits (docs/usage.md)
};

// POST /v1/acquire, /v1/peek or /v1/report (DecisionVerb).
class DecisionHandler final : public Handler {
 public:
  DecisionHandler(NativeApi api, DecisionVerb verb) : api_(api), verb_(verb) {}
  bool handle(Exchange& x) override;
  void complete(Exchange& x) override;
  void cancel(Exchange& x) override;

 private:
  NativeApi api_;
  const DecisionVerb verb_;
};

// /v1/forward-auth[/...], any method (proxies differ in what they send); no body is read.
class ForwardAuthHandler final : public Handler {
 public:
  explicit ForwardAuthHandler(NativeApi api) : api_(api) {}
  bool handle(Exchange& x) override;
  void complete(Exchange& x) override;
  void cancel(Exchange& x) override;

 private:
  NativeApi api_;
};

// POST /v1/reset {"key", "policy"}: forgets the key (admin token required).
class ResetHandler final : public Handler {
 public:
  explicit ResetHandler(NativeApi api) : api_(api) {}
  bool handle(Exchange& x) override;
  void complete(Exchange& x) override;

 private:
  NativeApi api_;
};

// A request's own "limit" for `rule` (request.h): within the policy's request_limit bounds, its
// policy with that limit (Policy::with_limit keeps the name: decided on the policy's own
// counter). Acquire, peek and POST /v1/leases apply it alike. Nullopt: refused — 400
// limit_not_allowed (no request_limit) or invalid_limit (out of bounds) in `out`.
std::optional<Policy> own_limit_policy(const service::Rule& rule, int64_t limit, http::Response& out);

// A request's priority class (docs/throttling.md "Priority classes") on `rule`, for leases,
// acquires, peeks and forward-auth alike: the body's "priority" (`body`), else the
// RateLimit-Priority header (`header`), which is ambient — a policy without classes ignores it (a
// proxy may send it on every route); neither: the policy's lowest class. Its index into
// rule.classes; SIZE_MAX when no class applies (no classes, nothing named in the body). nullopt:
// refused, `out` holds the 400 (a class the policy does not list, a body's class on a policy
// without classes, or a class with an own "limit": both would set the request's limit).
std::optional<size_t> priority_class(const service::Rule& rule, std::string_view body, std::string_view header,
                                     bool own_limit, http::Response& out);

// Constant-time comparison of a presented bearer credential with the configured token.
bool token_matches(std::string_view presented, std::string_view expected);

}  // namespace ratelimit::server
