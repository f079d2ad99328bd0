// h2c.h — HTTP/2 with prior knowledge (h2c) on ratelimitd's HTTP ports: the ConnectionTakeover
// (transport.h) that the HTTP/1.1 transport hands a connection whose first bytes are the HTTP/2
// client preface. One port thus serves both: HTTP/1.1 clients as before, and clients with an
// HTTP/2 connection pool (Envoy's gRPC clusters, a service's h2c pool) with many requests in
// flight on one connection and their answers coalesced into one write per event-loop turn.
//
// Decided: by the preface only (RFC 9113 §3.3, prior knowledge). No `Upgrade: h2c` (RFC 9113
// removed it; its HTTP/1.1 request-then-switch costs a round trip and a second parser), no TLS
// ALPN (ratelimitd speaks cleartext; TLS ends at the proxy in front). The dedicated gRPC listener
// (grpc_listen, GRPC_PORT) is h2c only: its Listener (Served::h2c_only) hands every connection to
// adopt() at once, on the same workers, caps and sweep; a non-gRPC stream there gets 415.
// What an h2c connection serves: every stream goes first to the StreamProtocol the composition
// root plugged in (gRPC: api/grpc_streams.h, whose streams of content-type application/grpc*
// are src/grpc's ShouldRateLimit, Health, reflection), which passes every other stream on to
// the listener's RouteTable through the same handlers as HTTP/1.1 (/v1/acquire, /json,
// /healthz, /metrics ...), one Exchange per stream. Without one, every stream is the routes'.
// The transport thus knows no gRPC method and no service: the arrow points from the API in.
// Limits: the listener's limits (max_header_bytes → 431, max_body_bytes → 413,
// request_timeout for a request's body, idle_timeout), at most 100 streams per connection, and
// the connection keeps its place in the connection caps (its ConnectionSlot) until it closes.
// Timeouts are the worker's sweep, as for HTTP/1.1 (TrackedConnection::check_deadline): a
// connection with no stream open that read nothing for idle_timeout gets GOAWAY and is closed;
// a stream whose request has not ended after request_timeout is reset (CANCEL), and so is one
// whose answer the client's flow-control window has held for request_timeout (a connection
// whose every stream is so stalled gets GOAWAY and is closed); at most h2::Limits'
// max_held_bytes (256 KiB) of answers wait per connection. Counted: render_metrics().
// Drain: the worker's drain sends GOAWAY; streams in flight are answered, watches end.
// Thread-safety: adopt() on the worker's thread; the connection then lives on that thread.
#pragma once

#include <memory>

#include "connection.h"
#include "transport.h"

namespace ratelimit::server {

// Another protocol on an h2c connection's streams (gRPC), one per connection: it sees every
// stream first and hands those it does not serve to `routes` (given to open()).
class StreamProtocol : public h2::Handler {
 public:
  // The worker's sweep (every 250 ms): e.g. tell health watchers of a change.
  virtual void on_sweep() = 0;
  // The server drains: e.g. end long-lived watches.
  virtual void on_drain() = 0;
};

// Makes each connection's StreamProtocol. Any worker thread.
class StreamProtocols {
 public:
  virtual ~StreamProtocols() = default;
  // `connection` and `routes` outlive the returned handler.
  virtual std::unique_ptr<StreamProtocol> open(h2::Connection& connection, h2::Handler& routes) = 0;
};

class H2cTakeover final : public ConnectionTakeover {
 public:
  // `protocols` (null: every stream goes to the routes) must outlive every connection.
  explicit H2cTakeover(StreamProtocols* protocols) : protocols_(protocols) {}
  void adopt(Worker& worker, boost::asio::ip::tcp::socket socket, std::string_view received, ConnectionSlot slot,
             const Served& served) override;
  // The ratelimitd_h2_* families (flow control: bytes held for clients' windows, streams reset,
  // connections closed), for /metrics. Any thread.
  void render_metrics(std::string& out) const;

 private:
  h2::FlowStats flow_;
  StreamProtocols* protocols_;
};

}  // namespace ratelimit::server
