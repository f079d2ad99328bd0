// connection.h — one h2c (HTTP/2 over cleartext TCP, prior knowledge) connection on Boost.Asio:
// a read loop feeding a Session, and a writer that sends everything the Session has queued in
// one write. Frames and streams only, no API: the Handler given to start() is the application.
//
// Writes: whatever the handlers answered while one read was processed leaves in one write
// after it; answers that arrive later (a store thread's, posted to this connection's executor)
// ask for flush_soon(), which writes once at the end of the current event-loop turn, so
// answers completing together share a write. While a write is in flight nothing else is
// written; what accumulates meanwhile leaves in the next one.
// Timeouts: the connection keeps no timer of its own; whoever owns its thread calls
// check_deadline() on a sweep (ratelimitd's Worker every 250 ms, as for HTTP/1.1). No stream open and nothing read for idle_timeout → GOAWAY(NO_ERROR), then
// close; a stream whose request has not ended within request_timeout → RST_STREAM CANCEL
// (half-open streams cannot hold the stream budget; a streaming call, Session::set_streaming:
// nothing of its request for idle_timeout); a write the peer has not taken within
// request_timeout (it stopped reading) → close; an answer whose bytes the peer's flow-control
// window has held for request_timeout → RST_STREAM CANCEL, and when every open stream is so
// stalled, GOAWAY(NO_ERROR) and close (a peer that never sends WINDOW_UPDATE holds nothing for
// longer; what it holds meanwhile is bounded by Limits::max_held_bytes).
// Closing: when the Session is no longer alive (GOAWAY exchanged and streams done, a fatal
// protocol error) and its last bytes are written, the socket closes. When the socket closes
// (that, the peer's EOF or reset, a failed write), every stream still open is closed for the
// handler (on_close, CANCEL) right after, even while an answer pending holds the connection.
// Lifetime: shared_ptr; the read, write and timer handlers hold it, and so may an application
// waiting for an answer (keep_alive()).
// Thread-safety: every method on the connection's executor (its io_context's thread), except
// executor().
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/ip/tcp.hpp>

#include "session.h"

namespace ratelimit::h2 {

struct ConnectionOptions {
  Limits limits;
  std::chrono::milliseconds idle_timeout{60'000};
  std::chrono::milliseconds request_timeout{10'000};
  // A connection that has sent no byte at all (no preface: the gRPC port, where nothing was
  // read before start()) is closed after this, as HTTP/1.1's first_byte_timeout.
  std::chrono::milliseconds first_byte_timeout{5'000};
  // Counts what flow control holds and cuts (shared by a server's connections); may be null.
  FlowStats* stats = nullptr;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(boost::asio::ip::tcp::socket socket, const ConnectionOptions& options);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Starts serving with `handler` (owned from now on). `already_read`: bytes a listener read
  // before handing the socket over (the client preface, when it chose by the preface).
  void start(std::unique_ptr<Handler> handler, std::string_view already_read = {});
  Session& session() { return *session_; }
  boost::asio::any_io_executor executor() { return socket_.get_executor(); }
  // Writes what the session queued at the end of this event-loop turn (no-op while a read is
  // being processed: its write follows anyway).
  void flush_soon();
  // Graceful: GOAWAY (shutdown notice, then the last stream id a moment later); open streams
  // are answered, then the connection closes.
  void drain();
  // The deadlines above, as of `now` (a sweep calls it; cheap when nothing is due).
  void check_deadline(std::chrono::steady_clock::time_point now);
  // Closes the socket now.
  void close();
  bool closed() const { return closed_; }

 private:
  void read();
  void write();

  boost::asio::ip::tcp::socket socket_;
  ConnectionOptions options_;
  std::unique_ptr<Handler> handler_;  // declared before session_: outlives it
  std::optional<Session> session_;
  std::chrono::steady_clock::time_point last_read_;
  std::chrono::steady_clock::time_point write_started_;  // of the write in flight
  std::string in_;    // read buffer
  std::string out_;   // bytes of the write in flight
  bool in_receive_ = false;
  bool writing_ = false;
  bool flush_posted_ = false;
  bool draining_ = false;
  bool closed_ = false;
  bool got_byte_ = false;  // any byte read from the peer (or handed over by start())
  bool stalled_out_ = false;  // every stream was stalled and reset: GOAWAY at the next sweep
};

}  // namespace ratelimit::h2
