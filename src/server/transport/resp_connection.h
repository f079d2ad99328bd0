// resp_connection.h — one Redis-protocol connection of ratelimitd (resp_listen), and the
// interface between it and the commands an API serves over it (RespHandler), the RESP
// counterpart of handler.h's Exchange and Handler.
//
// What the connection does: reads bytes, frames commands (resp_parser.h), hands each to the
// listener's RespHandler in order, and writes the replies; a pipeline (many commands in one
// read) is answered in the order sent, its replies written together. It answers on its own
// only a protocol error (Redis's message, then close).
// What it does not know: any command. Names, arguments, AUTH, the protocol version are the
// handler's; the connection keeps them in RespCall::session between commands.
// Completion (as handler.h): handle() returns true when its reply is written on return;
// otherwise it calls call.resume() exactly once, later, from any thread, and the connection
// calls complete() on its own thread to write the reply. One command at a time: the next one
// is not parsed before the reply of the one before is written, so replies keep their order and
// the arguments' views stay valid until complete() returns. While a reply is pending the socket
// is still read (into a side buffer, at most 16 KiB): a client that goes away is seen at once and
// the handler's cancel() called, so a waiting command leaves its queue.
// Bounds (limits.*, read per command): a command of at most max_body_bytes and 1024 arguments;
// timeouts as HTTP: first_byte_timeout before the first byte, idle_timeout between commands,
// request_timeout from a command's first byte to its last and for writing its replies. Replies
// of a pipeline are flushed every 64 KiB, and no more is read until they are written, so a
// client that sends without reading holds at most one flush.
// Thread-safety: runs on its worker's thread; RespCall::resume() may be called from any thread.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include <boost/asio/ip/tcp.hpp>

#include "resp_parser.h"
#include "transport.h"

namespace ratelimit::server {

// What a connection remembers between commands, set by the handler (HELLO, AUTH).
struct RespSession {
  int protocol = 2;            // 2 or 3 (HELLO 3)
  bool authenticated = false;  // AUTH with the password or the admin token
  bool admin = false;          // AUTH with the admin token
};

// What a handler keeps with a connection between commands (see RespCall::state).
class RespCallState {
 public:
  virtual ~RespCallState() = default;
};

// One command and its reply, owned by the connection (one per connection, reused).
class RespCall {
 public:
  RespCall() = default;
  RespCall(const RespCall&) = delete;
  RespCall& operator=(const RespCall&) = delete;
  virtual ~RespCall() = default;

  std::span<const std::string_view> args;  // args[0] the command name as sent; non-empty
  RespSession session;
  std::string_view peer;                   // the client's IP address as text
  const ListenerInfo* listener = nullptr;  // never null while a handler runs
  // Set by the handler for the metrics: the endpoint label and the status class of its reply
  // (200 answered, 429 limited, 400 refused, 401 not authenticated, 503 store unavailable).
  Endpoint endpoint{};
  unsigned status = 200;
  bool close_after = false;  // QUIT: close once this reply is written

  // The reply is appended here, in session.protocol.
  RespReply reply() { return RespReply(*out_, session.protocol); }

  // Implemented by the connection: called exactly once, from any thread, after handle()
  // returned false and the reply may be written (see top).
  virtual void resume() = 0;

  // The handler's state of type T (constructed from this RespCall&), made on first use and
  // kept for the next command; replaced when a handler asks for another type.
  template <typename T>
  T& state() {
    return state_.get<T>(*this);
  }

 protected:
  std::string* out_ = nullptr;  // set by the connection

 private:
  StateSlot<RespCallState> state_;
};

class RespHandler {
 public:
  virtual ~RespHandler() = default;
  // Answers call.args into call.reply() (see top). Must not throw; bad input is an error reply.
  virtual bool handle(RespCall& call) = 0;
  // Writes the reply handle() left pending, on the connection's thread, after call.resume().
  virtual void complete(RespCall& /*call*/) {}
  // The client went away while handle()'s reply was pending (on the connection's thread): the
  // handler may stop waiting for it (a waiter leaves its queue). resume() must still come
  // exactly once; the reply is then dropped. Default: nothing (the reply comes when it comes).
  virtual void cancel(RespCall& /*call*/) {}
};

// Serves a connection accepted by a listener whose Served::resp is set (on `worker`'s thread).
// The connection keeps itself alive while it has work; `served` and `worker` outlive it.
void serve_resp(Worker& worker, boost::asio::ip::tcp::socket socket, ConnectionSlot slot, const Served& served);

}  // namespace ratelimit::server
