// byte_stream.h — the byte pipe under a RESP connection: open, write, read, close. The plain
// implementation (TCP or a unix socket) lives here; a TLS stream is another implementation of
// the same interface, so RespConnection never knows which one it drives.
//
// Why an interface rather than a templated socket: the connection's logic (pipelining, replies
// in order, timeouts, reconnection) is the same for every stream, and a virtual call per
// read/write is nothing beside a system call.
// Invariants:
//   - a stream is opened at most once; a reconnection makes a new stream (TLS needs fresh
//     session state anyway), so an old stream's late handlers can never touch the new one;
//   - every handler is called exactly once, on the io_context the stream was made on;
//   - close() cancels pending operations (their handlers see an error) and may be called twice;
//   - a stream keeps itself alive (shared_from_this) while an operation of its is pending.
// Thread-safety: none; every call on the stream's io_context thread.
#pragma once

#include <boost/asio/buffer.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "ratelimit/status.h"

namespace ratelimit::redis_detail {

// Where one connection goes and how it opens its session (AUTH, SELECT).
struct Endpoint {
  bool is_unix = false;
  std::string host;  // TCP: name or address (IPv6 without brackets)
  uint16_t port = 6379;
  std::string path;  // unix socket path
  std::string user;  // empty: AUTH with the password only
  std::string password;
  bool has_password = false;
  int db = 0;  // SELECT when non-zero

  // "host:port" ([v6]:port) or the socket path: a node's name in messages and maps.
  std::string address() const;
};

class ByteStream {
 public:
  using IoHandler = std::function<void(const boost::system::error_code& ec, size_t bytes)>;
  using OpenHandler = std::function<void(Status)>;

  virtual ~ByteStream() = default;
  // Resolves, connects and (for TLS) handshakes. `display` names the server in error messages
  // ("cannot connect to <display>: ..."). OK status: ready for reads and writes.
  virtual void async_open(const Endpoint& to, const std::string& display, OpenHandler done) = 0;
  // Writes the whole buffer (which must stay valid until the handler runs).
  virtual void async_write(boost::asio::const_buffer data, IoHandler done) = 0;
  // Reads what is available, at least one byte, into `into` (valid until the handler runs).
  virtual void async_read_some(boost::asio::mutable_buffer into, IoHandler done) = 0;
  // Cancels everything pending; no further I/O.
  virtual void close() = 0;
  // True when bytes from the server are waiting to be read (in the kernel's receive buffer,
  // or decrypted but unread): a reply has arrived even if no read handler has seen it yet.
  // The connection asks this before it declares a command timed out (issue 23 item 7).
  virtual bool has_unread_bytes() const = 0;
};

// Makes the stream for one connection attempt, on `io`.
using StreamFactory = std::function<std::shared_ptr<ByteStream>(boost::asio::io_context& io)>;

// TCP (TCP_NODELAY on) or a unix socket, chosen by Endpoint::is_unix.
std::shared_ptr<ByteStream> make_plain_stream(boost::asio::io_context& io);

}  // namespace ratelimit::redis_detail
