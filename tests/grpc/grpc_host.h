// grpc_host.h — ratelimitd's own gRPC port in process, for the gRPC tests: the daemon's
// transport (tests/server/transport_rig.h: its Listener, Workers, caps and the h2c takeover)
// with the gRPC methods plugged in as ratelimitd plugs them (src/server/api/grpc_streams.h),
// serving a rls::RateLimitService the test builds. The tests thus exercise the one HTTP/2 host
// ratelimitd runs — its grpc_listen port: every connection h2c from its first byte, a stream
// that is not gRPC answered 415 — not a second one.
//
// Differences from ratelimitd, as a test rig: fixed connection limits, no configuration, no
// metrics. Health: drain() and set_serving() change what Check answers at once; a Watch learns
// of it at its worker's next sweep (every 250 ms), as on ratelimitd.
// Thread-safety: construction, drain, set_serving and the destructor from the test's thread.
#pragma once

#include <memory>

#include "answers.h"
#include "grpc_streams.h"
#include "h2c.h"
#include "rls_service.h"
#include "transport_rig.h"

namespace ratelimit::grpc_test {

struct GrpcHostOptions {
  unsigned threads = 1;              // workers (one I/O thread each)
  server::ConnectionLimits limits;  // as limits.* in ratelimitd's configuration
};

class GrpcHost {
 public:
  // Serves `service` (which must outlive the host) on 127.0.0.1 at a free port.
  explicit GrpcHost(rls::RateLimitService& service, const GrpcHostOptions& options = {});
  // Health NOT_SERVING, then stops as ratelimitd does, waiting (bounded) for calls the store
  // still holds.
  ~GrpcHost();

  int port() const { return rig_->port(); }
  // Health turns NOT_SERVING; calls are still served (as ratelimitd while it drains).
  void drain() { set_serving(false); }
  void set_serving(bool serving) { grpc_.set_serving(serving); }

 private:
  server::GrpcStreams grpc_;
  server::H2cTakeover h2c_{&grpc_};
  server::TextHandler not_grpc_{415, "this port speaks gRPC: content-type must be application/grpc\n"};
  server::Served served_;
  std::unique_ptr<server::testing::TransportRig> rig_;  // last: stopped before the rest goes
};

}  // namespace ratelimit::grpc_test
