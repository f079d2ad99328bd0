// grpc_server.h — ratelimitd's gRPC front-end: envoy.service.ratelimit.v3.RateLimitService/
// ShouldRateLimit (through rls::RateLimitService, the transport-neutral ShouldRateLimit of
// src/rls) and grpc.health.v1.Health/Check and Watch, on gRPC's completion-queue API.
//
// What this file does, and nothing else: the wire. A RateLimitRequest message becomes an
// rls::Call's request (after the checks the proto's own validation rules ask for: a descriptor
// has 1 ... kMaxEntries entries, and every key and value is non-empty); the Call's response
// becomes a RateLimitResponse message; a refused Call becomes a gRPC status with its message.
// Matching, counting, statuses and headers are RateLimitService's (one home with POST /json).
//
// Threading: one completion queue per thread, each polled by exactly that thread, so a call's
// steps never race. A call is answered on its queue's thread: inline when the store answered
// inline (memory), else the store thread's Call::done() sets a grpc::Alarm on the call's queue
// (the hand-back), so no gRPC thread ever waits for a networked store and nothing is rendered
// on a store thread.
// Status codes: a bad request INVALID_ARGUMENT (RateLimitService or the checks above say why);
// a message larger than options.max_message_bytes RESOURCE_EXHAUSTED (gRPC's own check); a
// store error UNAVAILABLE (DEADLINE_EXCEEDED when the store timed out); a call whose deadline
// passed before it was decided DEADLINE_EXCEEDED, and nothing is counted; one whose deadline
// passes while the store decides is counted (the store did) and answered DEADLINE_EXCEEDED.
// Health: Check answers SERVING for "" and "envoy.service.ratelimit.v3.RateLimitService",
// NOT_SERVING once drain() or shutdown() was called, NOT_FOUND for any other name; Watch sends
// the current status once and ends the stream (a watcher re-asks).
// Thread-safety: start/drain/shutdown from one thread; the server runs its own threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "ratelimit/status.h"
#include "rls_service.h"

namespace ratelimit::grpc_api {

struct GrpcServerOptions {
  std::string address = "127.0.0.1:8081";  // host:port, [v6]:port; port 0 = any free port
  unsigned threads = 1;                     // completion queues (one thread each)
  size_t max_message_bytes = 64 * 1024;     // largest request accepted (and response sent)
};

class GrpcServer {
 public:
  // Binds and starts serving `service` (which must outlive the server). kUnavailable when the
  // address cannot be bound.
  static Result<std::unique_ptr<GrpcServer>> start(const GrpcServerOptions& options,
                                                   rls::RateLimitService& service);
  ~GrpcServer();  // shutdown()
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // The port bound (useful with port 0).
  int port() const;
  // Health turns NOT_SERVING (load balancers and Kubernetes probes stop sending); calls are
  // still served. Idempotent.
  void drain();
  // drain(), then stops accepting; calls in flight get up to `grace` to finish (after it they
  // are cancelled); calls waiting for the store are waited for (bounded by grace + 5 s), then
  // the queues are drained and the threads joined. Idempotent.
  void shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));

  struct Impl;

 private:
  explicit GrpcServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ratelimit::grpc_api
