// transport.h — what a listener serves, and the hook through which another transport (HTTP/2
// with prior knowledge, h2c) takes over a connection the HTTP/1.1 transport accepted.
//
// How a listener gets its routes: the composition root (app.h) builds one Served per listener —
// its identity and its RouteTable (handler.h) — before serving; listeners and connections
// hold a const reference for their whole life.
// How a connection changes transport: the HTTP/1.1 connection reads the first bytes of a new
// connection; when they are the HTTP/2 client preface (kH2Preface) and the listener has a
// ConnectionTakeover, it hands over the socket, every byte read so far and its ConnectionSlot
// (the caps), and steps aside. Without a takeover, the preface is answered as any malformed
// HTTP/1.1 request (400).
// Thread-safety: Served is read-only while serving (any thread); adopt() runs on the worker
// thread that owns the socket.
#pragma once

#include <string_view>

#include <boost/asio/ip/tcp.hpp>

#include "caps.h"
#include "handler.h"
#include "worker.h"

namespace ratelimit::server {

// Closes a connection's socket both ways, ignoring errors (the peer may be gone already).
inline void close_socket(boost::asio::ip::tcp::socket& socket) {
  boost::system::error_code ec;
  socket.shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
  socket.close(ec);
}

// The client connection preface of HTTP/2 (RFC 9113 §3.4).
inline constexpr std::string_view kH2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

class ConnectionTakeover;
class RespHandler;  // resp_connection.h

// What one listener serves.
struct Served {
  ListenerInfo info;
  RouteTable routes;
  ConnectionTakeover* h2c = nullptr;  // takes connections that open with kH2Preface; may be null
  // The gRPC listener (grpc_listen): every connection is h2c from its first byte (prior
  // knowledge, what Envoy's gRPC clusters speak) and goes to `h2c` at once, no HTTP/1.1.
  bool h2c_only = false;
  // The Redis-protocol listener (resp_listen): every connection speaks RESP to this handler
  // (resp_connection.h); `routes` is unused.
  RespHandler* resp = nullptr;
};

class ConnectionTakeover {
 public:
  virtual ~ConnectionTakeover() = default;
  // Serves `socket` from now on, on `worker`'s thread (the caller's). `received` holds every
  // byte read from it so far, starting with kH2Preface; `slot` keeps the connection counted in
  // the caps until the new transport destroys it; `served` outlives the connection.
  virtual void adopt(Worker& worker, boost::asio::ip::tcp::socket socket, std::string_view received,
                     ConnectionSlot slot, const Served& served) = 0;
};

}  // namespace ratelimit::server
