// grpc_streams.cc — src/grpc's handler as an h2c connection's StreamProtocol (see grpc_streams.h).
#include "grpc_streams.h"

namespace ratelimit::server {
namespace {

class GrpcProtocol final : public StreamProtocol {
 public:
  explicit GrpcProtocol(std::unique_ptr<grpc_api::GrpcHandler> grpc) : grpc_(std::move(grpc)) {}

  void on_headers(h2::Session& s, int32_t id, const h2::RequestHead& head) override { grpc_->on_headers(s, id, head); }
  void on_data(h2::Session& s, int32_t id, std::string_view b) override { grpc_->on_data(s, id, b); }
  void on_end(h2::Session& s, int32_t id) override { grpc_->on_end(s, id); }
  void on_close(h2::Session& s, int32_t id, uint32_t code) override { grpc_->on_close(s, id, code); }
  // Health is polled on the sweep, so a change of readiness (set_serving) reaches this
  // connection's watchers within one sweep.
  void on_sweep() override { grpc_->on_serving_changed(); }
  void on_drain() override {
    grpc_->on_serving_changed();
    grpc_->end_watches();
  }

 private:
  std::unique_ptr<grpc_api::GrpcHandler> grpc_;
};

}  // namespace

GrpcStreams::GrpcStreams(rls::RateLimitService& rls, size_t max_message_bytes) {
  grpc_.service = &rls;
  grpc_.max_message_bytes = max_message_bytes;
}

std::unique_ptr<StreamProtocol> GrpcStreams::open(h2::Connection& connection, h2::Handler& routes) {
  return std::make_unique<GrpcProtocol>(grpc_api::make_grpc_handler(grpc_, connection, &routes));
}

}  // namespace ratelimit::server
