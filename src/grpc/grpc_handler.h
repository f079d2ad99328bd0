// grpc_handler.h — ratelimitd's gRPC methods as an h2::Handler: one per HTTP/2 connection,
// serving
//   envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit  (rls::RateLimitService)
//   grpc.health.v1.Health/Check and /Watch
//   grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo (reflection.cc)
//   envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas (RLQS:
//     rlqs_stream.h, when GrpcContext::quota is set; else UNIMPLEMENTED). A bidirectional
//     stream: each report message is answered as it arrives; the stream stays open while its
//     client keeps sending (h2::Session::set_streaming: idle_timeout after its last message).
// on whatever connection it is given (the gRPC listener's, or an HTTP/1.1 port's h2c one).
//
// The wire (gRPC over HTTP/2): a request is a POST with content-type application/grpc*, its
// body 5-byte-prefixed messages (grpc_wire.h); the answer is `:status 200`, the message, and
// trailers grpc-status/grpc-message — or, when refused before any message, one HEADERS frame
// with both (trailers-only). Codes: an unknown method UNIMPLEMENTED; a request message larger
// than max_message_bytes RESOURCE_EXHAUSTED as soon as its prefix arrives (nothing counted);
// an unparsable message, or none, or two on a unary method INTERNAL (as grpc-go); a bad request
// INVALID_ARGUMENT (RateLimitService says why); a store error UNAVAILABLE (DEADLINE_EXCEEDED
// when the store timed out); a malformed grpc-timeout INTERNAL; a call whose grpc-timeout has
// passed before it is decided DEADLINE_EXCEEDED and nothing is counted; one whose deadline
// passes while the store decides is counted (the store did) and answered DEADLINE_EXCEEDED.
// Request heads larger than the transport's limit: RESOURCE_EXHAUSTED. A non-gRPC request:
// HTTP 415 (the gRPC spec's answer), unless `fallback` takes it.
// Health: Check answers SERVING for "", "ratelimit" (envoyproxy/ratelimit's name) and
// "envoy.service.ratelimit.v3.RateLimitService" (and "envoy.service.rate_limit_quota.v3.
// RateLimitQuotaService" when RLQS is served) while GrpcContext::serving (the owner sets it:
// ratelimitd clears it while the store cannot decide and once it drains), else NOT_SERVING;
// NOT_FOUND for any other name. Watch is a server stream: the current status at once, then one
// message per change (on_serving_changed() sends only what differs from the watcher's last
// message, so calling it without a change sends nothing), open until the client cancels or the
// server stops (end_watches(): UNAVAILABLE; then GOAWAY). An unknown name is watched as
// SERVICE_UNKNOWN, as the protocol asks. A Watch holds one stream of the connection's
// SETTINGS_MAX_CONCURRENT_STREAMS like any call.
//
// Threading: the handler runs on its connection's thread. A ShouldRateLimit the store answers
// on its own thread (Redis) is posted back to the connection's executor, holding the
// connection, and answered there; answers completing in one turn share a write.
// Messages are parsed into and rendered from a per-call protobuf Arena whose first block is in
// the reused call object, so a call allocates nothing for them in the steady state.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>

#include "connection.h"
#include "quota_service.h"
#include "rls_service.h"

namespace ratelimit::grpc_api {

// What every connection of one gRPC service shares. Must outlive the connections.
struct GrpcContext {
  rls::RateLimitService* service = nullptr;
  size_t max_message_bytes = 64 * 1024;  // largest request accepted (and response sent)
  // RLQS (null: not served). Its reports list every active bucket of an Envoy, so its messages
  // have their own, larger bound (both ways).
  rlqs::QuotaService* quota = nullptr;
  size_t rlqs_max_message_bytes = 4 * 1024 * 1024;
  std::atomic<bool> serving{true};        // health: SERVING / NOT_SERVING (see above)
  // Calls the store holds (answered on its thread later): shutdown waits for them.
  std::atomic<int> awaiting_store{0};
  std::atomic<int> connections{0};        // handlers alive
};

class GrpcHandler : public h2::Handler {
 public:
  // Health may have changed (GrpcContext::serving): each watcher whose last message differs
  // from the status now is sent it; nothing is sent otherwise (cheap to call on a poll).
  virtual void on_serving_changed() = 0;
  // The server stops: watches end with UNAVAILABLE (other calls are answered as usual).
  virtual void end_watches() = 0;
};

// The handler of one connection; pass it to connection.start(). `fallback` (may be null) gets
// every stream that is not gRPC (content-type not application/grpc*): the native HTTP API over
// h2c. It must outlive the handler.
std::unique_ptr<GrpcHandler> make_grpc_handler(GrpcContext& context, h2::Connection& connection,
                                               h2::Handler* fallback = nullptr);

}  // namespace ratelimit::grpc_api
