// grpc_frontend.h — the gRPC side of a natively configured ratelimitd (`grpc_listen`, `domains`
// and `envoy_api` in its YAML): Envoy's ShouldRateLimit (rls::RateLimitService over the gRPC
// server of src/grpc) on the same store and decision service as the HTTP API, with its
// per-rule statistics on the same /metrics page.
//
// Why here and not in server.cc: run_server() stays about the HTTP server; this file is the one
// place that turns a Config into a RuleSource, a RateLimitService and a GrpcServer, and follows
// the Config's reloads.
// Invariants: the RuleSet served is the last published Config's; the service's options are the
// first Config's (check_reloadable refuses a reload that changes grpc_listen or envoy_api).
// Thread-safety: start/reload/drain/shutdown from the control thread; the server runs its own.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "config.h"
#include "config_dir.h"
#include "decision_service.h"
#include "grpc_server.h"
#include "metrics.h"
#include "rls_service.h"
#include "rls_stats.h"

namespace ratelimit::server {

class GrpcFrontend {
 public:
  // Serves config.domains on config.grpc_listen (both must be set) with `threads` completion
  // queues, and adds the per-rule statistics to `metrics` (which must outlive it).
  // kUnavailable when the address cannot be bound.
  static Result<std::unique_ptr<GrpcFrontend>> start(const Config& config,
                                                     service::DecisionService& decisions,
                                                     Metrics& metrics, unsigned threads);
  ~GrpcFrontend();

  // Serves `config`'s domains from now on (after a successful reload).
  void reload(const Config& config);
  // Health NOT_SERVING; calls are still answered.
  void drain() { server_->drain(); }
  // Stops; calls in flight get up to `grace`.
  void shutdown(std::chrono::milliseconds grace) { server_->shutdown(grace); }
  // "host:port" as bound (the port resolved when grpc_listen asked for port 0).
  const std::string& address() const { return address_; }

 private:
  GrpcFrontend();
  rls::RuleSource rules_;
  rls::RuleStats stats_;
  std::unique_ptr<rls::RateLimitService> service_;
  std::unique_ptr<grpc_api::GrpcServer> server_;
  std::string address_;
};

}  // namespace ratelimit::server
