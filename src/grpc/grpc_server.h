// grpc_server.h — a stand-alone gRPC server for an embedding process and the in-process tests
// (ratelimitd itself serves its gRPC port on its HTTP workers: src/server/h2c.h, a Listener with
// Served::h2c_only, so the connection caps and the idle sweep apply there): h2c (HTTP/2 over
// cleartext TCP with prior
// knowledge, what Envoy's gRPC clusters speak) on our own HTTP/2 transport (src/h2, Debian's
// libnghttp2) and Boost.Asio, serving the methods of grpc_handler.h:
// envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit (through rls::RateLimitService,
// the transport-neutral ShouldRateLimit of src/rls), grpc.health.v1.Health Check and Watch, and
// server reflection. Status codes and health answers: grpc_handler.h.
//
// Why not libgrpc++: it cost 31.8 µs of server CPU per ShouldRateLimit against 11.2 µs for our
// HTTP/1.1 POST /v1/acquire (docs/BENCHMARKS.md section 5): its per-call objects, threads and
// one sendmsg per response. Here a connection's answers of one event-loop turn leave in one
// write, and a call's objects are reused.
//
// Threading: `threads` Asio workers, each one io_context run by one thread; an accepted
// connection stays on one worker, so its streams never race. A call is answered on its
// connection's worker: inline when the store answered inline (memory), else the store thread's
// Call::done() posts the answer back.
// Thread-safety: start/drain/shutdown from one thread; the server runs its own threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include "connection.h"
#include "ratelimit/status.h"
#include "rls_service.h"

namespace ratelimit::grpc_api {

struct GrpcServerOptions {
  std::string address = "127.0.0.1:8081";  // host:port, [v6]:port; port 0 = any free port
  unsigned threads = 1;                     // Asio workers (one thread each)
  size_t max_message_bytes = 64 * 1024;     // largest request accepted (and response sent)
  h2::ConnectionOptions connection;         // HTTP/2 limits and timeouts per connection
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
  // Health turns NOT_SERVING (load balancers and Kubernetes probes stop sending; watchers are
  // told); calls are still served. Idempotent. Same as set_serving(false).
  void drain();
  // Health SERVING or NOT_SERVING from now on (ratelimitd: NOT_SERVING while the store cannot
  // decide); on a change every watcher is sent the new status. Any thread.
  void set_serving(bool serving);
  // drain(), then stops accepting; every connection gets GOAWAY, watches end UNAVAILABLE, and
  // calls in flight get up to `grace` to be answered (after it their connections close); calls
  // waiting for the store are waited for (bounded by grace + 5 s), then the threads are joined.
  // Idempotent.
  void shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));

  struct Impl;

 private:
  explicit GrpcServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ratelimit::grpc_api
