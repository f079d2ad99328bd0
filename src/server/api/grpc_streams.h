// grpc_streams.h — Envoy's rate-limit API over gRPC as the protocol h2c connections speak first
// (transport/h2c.h: StreamProtocols): every stream whose content-type is application/grpc* goes
// to src/grpc's methods (ShouldRateLimit through rls::RateLimitService, Health, reflection, RLQS
// through rlqs::QuotaService when set_quota() gave one), every
// other stream on to the listener's routes.
//
// Why here: the transport knows no gRPC method and no service; the composition root plugs this
// in when Envoy's API is configured (without one, no gRPC methods are served on h2c).
// Thread-safety: open() on any worker thread; set_serving() from any thread; each connection's
// protocol lives on its worker's thread.
#pragma once

#include <cstddef>
#include <memory>

#include "grpc_handler.h"
#include "h2c.h"
#include "rls_service.h"

namespace ratelimit::server {

class GrpcStreams final : public StreamProtocols {
 public:
  // `rls` must outlive the connections' last call into it.
  explicit GrpcStreams(rls::RateLimitService& rls, size_t max_message_bytes = 64 * 1024);
  std::unique_ptr<StreamProtocol> open(h2::Connection& connection, h2::Handler& routes) override;
  // Health of the gRPC methods: SERVING or NOT_SERVING (the store cannot decide, the server
  // drains). Watchers learn of a change at their worker's next sweep. Any thread.
  void set_serving(bool serving) { grpc_.serving.store(serving); }
  // Serves RLQS's StreamRateLimitQuotas with `quota` (must outlive the connections); before
  // any connection opens.
  void set_quota(rlqs::QuotaService* quota) { grpc_.quota = quota; }
  // Calls waiting for the store (answered on its thread later): a shutdown waits for them.
  int awaiting_store() const { return grpc_.awaiting_store.load(); }

 private:
  grpc_api::GrpcContext grpc_;
};

}  // namespace ratelimit::server
