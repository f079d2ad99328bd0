// envoy_front.h — the HTTP endpoints of `ratelimitd --envoy-env`, as envoyproxy/ratelimit serves
// them: on HOST:PORT `POST /json` (the JSON form of ShouldRateLimit) and `/healthcheck`; on
// DEBUG_HOST:DEBUG_PORT `/rlconfig` (the loaded configuration), `/metrics` and an index at `/`;
// on PROMETHEUS_ADDR (USE_PROMETHEUS=true) PROMETHEUS_PATH.
//
// Why a separate front: in this mode the native API (/v1/...) is not served at all, and the
// decision is RateLimitService's (src/rls), the same one the gRPC front-end calls; this file
// only parses (rls_json) and renders, HttpApi and the Beast server carry the bytes.
// Answers: /json -> 200 (overallCode OK), 429 (OVER_LIMIT), 400 with a JSON error naming the
// problem (bad JSON, unknown field, empty domain, no descriptors...), 503 when the store answered
// an error; /healthcheck -> 200 "OK", or 500 once the server drains (SIGTERM), as
// envoyproxy/ratelimit's health checker does.
// Thread-safety: handle()/render() from any I/O thread; the front holds only shared,
// thread-safe objects.
#pragma once

#include <string>

#include "http_api.h"
#include "metrics.h"
#include "rls_service.h"

namespace ratelimit::server {

class EnvoyFront {
 public:
  // RequestView::listener of each listener of this mode.
  enum Role : uint8_t { kMain = 0, kDebug = 1, kPrometheus = 2 };

  EnvoyFront(rls::RateLimitService& service, Metrics& metrics, const HttpApi& api,
             std::string prometheus_path);

  // As HttpApi::handle: true when `out` is complete; false when the answer comes through
  // exchange.resume() and render().
  bool handle(const RequestView& req, http::Response& out, HttpApi::Exchange& exchange,
              Endpoint& endpoint);
  void render(const HttpApi::Exchange& exchange, http::Response& out) const;

 private:
  rls::RateLimitService& service_;
  Metrics& metrics_;
  const HttpApi& api_;
  const std::string prometheus_path_;
};

}  // namespace ratelimit::server
