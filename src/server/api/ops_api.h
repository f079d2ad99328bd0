// ops_api.h — the operator endpoints: liveness (/healthz, and envoyproxy/ratelimit's
// /healthcheck), readiness (/readyz) and the Prometheus page (/metrics, PROMETHEUS_PATH).
//
// Why apart from the decision APIs: they read the server's state (draining, the store's
// readiness, the metrics), never decide; every listener that serves them uses these handlers.
// Answers: /healthz 200 {"status":"ok"}; /readyz 200 {"status":"ready"}, or 503 while the
// server drains or the store cannot decide (its reason); /healthcheck "OK", or 500 once the
// server drains (envoyproxy/ratelimit's health checker); /metrics the text format. Methods other
// than GET and HEAD get 405 — or, where envoyproxy/ratelimit answers them "404 page not found",
// the `otherwise` handler.
// Thread-safety: every handler may run on any worker; ServerState is atomic.
#pragma once

#include <atomic>
#include <functional>

#include "answers.h"
#include "metrics.h"

namespace ratelimit::server {

// What the operator endpoints report, owned by the composition root.
struct ServerState {
  std::atomic<bool> draining{false};     // set once, at SIGTERM/SIGINT
  std::function<Status()> store_ready;   // null: always ready; set before serving
};

class HealthzHandler final : public Handler {
 public:
  bool handle(Exchange& x) override;
};

// A handler that answers from the ServerState (which must outlive it).
class StateHandler : public Handler {
 public:
  explicit StateHandler(const ServerState& state) : state_(state) {}

 protected:
  const ServerState& state_;
};

class ReadyzHandler final : public StateHandler {
 public:
  using StateHandler::StateHandler;
  bool handle(Exchange& x) override;
};

// envoyproxy/ratelimit's /healthcheck (any method, as its handler).
class HealthcheckHandler final : public StateHandler {
 public:
  using StateHandler::StateHandler;
  bool handle(Exchange& x) override;
};

class MetricsHandler final : public Handler {
 public:
  // `otherwise`: answers a method other than GET/HEAD (counted as endpoint "other"); null: 405.
  explicit MetricsHandler(const Metrics& metrics, Handler* otherwise = nullptr)
      : metrics_(metrics), otherwise_(otherwise) {}
  bool handle(Exchange& x) override;

 private:
  const Metrics& metrics_;
  Handler* otherwise_;
};

}  // namespace ratelimit::server
