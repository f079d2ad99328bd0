// envoy_http.h — envoyproxy/ratelimit's HTTP endpoints as Handlers: `POST /json` (the JSON form
// of ShouldRateLimit) and `/rlconfig` (the loaded configuration). The rest of what
// `ratelimitd --envoy-env` serves over HTTP — /healthcheck, /metrics, the debug index, "404
// page not found" — are the shared handlers of ops_api.h and answers.h, wired by the
// composition root (app.cc).
//
// Why a thin file: the decision is RateLimitService's (src/rls), the same one ShouldRateLimit
// over gRPC calls; this file parses (rls_json) and renders only.
// Answers of /json: 200 (overallCode OK), 429 (OVER_LIMIT), 400 with a JSON error naming the
// problem (bad JSON, unknown field, empty domain, no descriptors...), 503 when the store answered
// an error (render_store_failure).
// Thread-safety: shared by every worker; the call in flight lives in the Exchange.
#pragma once

#include "handler.h"
#include "rls_service.h"

namespace ratelimit::server {

class JsonHandler final : public Handler {
 public:
  explicit JsonHandler(rls::RateLimitService& service) : service_(service) {}
  bool handle(Exchange& x) override;
  void complete(Exchange& x) override;

 private:
  rls::RateLimitService& service_;
};

class RlconfigHandler final : public Handler {
 public:
  explicit RlconfigHandler(const rls::RateLimitService& service) : service_(service) {}
  bool handle(Exchange& x) override;

 private:
  const rls::RateLimitService& service_;
};

}  // namespace ratelimit::server
