// grpc_host.cc — ratelimitd's gRPC port in process (see grpc_host.h).
#include "grpc_host.h"

namespace ratelimit::grpc_test {

GrpcHost::GrpcHost(rls::RateLimitService& service, const GrpcHostOptions& options) : grpc_(service) {
  served_.info = server::ListenerInfo{"gRPC", false};
  served_.routes.fallback(not_grpc_);
  served_.h2c = &h2c_;
  served_.h2c_only = true;
  rig_ = std::make_unique<server::testing::TransportRig>(served_, server::testing::RigOptions{options.threads, options.limits});
}

GrpcHost::~GrpcHost() {
  drain();
  rig_->stop([this] { return grpc_.awaiting_store() == 0; });
}

}  // namespace ratelimit::grpc_test
