// grpc_frontend.cc — a Config's gRPC front-end (see grpc_frontend.h).
#include "grpc_frontend.h"

namespace ratelimit::server {

// The RuleSource reads no directory here: its rules come from the Config (replace()).
GrpcFrontend::GrpcFrontend() : rules_("", false, rls::LoadOptions{}) {}

GrpcFrontend::~GrpcFrontend() {
  if (server_) server_->shutdown(std::chrono::milliseconds(0));
}

Result<std::unique_ptr<GrpcFrontend>> GrpcFrontend::start(const Config& config,
                                                          service::DecisionService& decisions,
                                                          Metrics& metrics, unsigned threads) {
  std::unique_ptr<GrpcFrontend> f(new GrpcFrontend());
  f->rules_.replace(config.domains);
  // Outcomes of every descriptor rule, beside the HTTP policies' (one bounded label value).
  service::RuleCounters* outcomes = metrics.policy("envoy_rls");
  f->service_ = std::make_unique<rls::RateLimitService>(decisions, f->rules_, config.envoy_api,
                                                        f->stats_, outcomes);
  metrics.add_extra([stats = &f->stats_](std::string& out) { stats->render(out); });
  const ListenAddress& at = *config.grpc_listen;
  const std::string host = at.host.find(':') != std::string::npos ? "[" + at.host + "]" : at.host;
  grpc_api::GrpcServerOptions options;
  options.address = host + ":" + std::to_string(at.port);
  options.threads = threads;
  auto server = grpc_api::GrpcServer::start(options, *f->service_);
  if (!server) return server.status();
  f->server_ = std::move(*server);
  f->address_ = host + ":" + std::to_string(f->server_->port());
  return f;
}

void GrpcFrontend::reload(const Config& config) {
  rules_.replace(config.domains);
  service_->refresh();
}

}  // namespace ratelimit::server
