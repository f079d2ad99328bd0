// session.h — one server-side HTTP/2 connection's protocol state (Debian's libnghttp2), with no
// I/O: bytes read from the peer go in through receive(), bytes to write come out of
// collect(). It knows frames, streams, HPACK, flow control, SETTINGS, PING and GOAWAY; it knows
// nothing of any API (gRPC, the native HTTP API): those are a Handler's, told of each stream's
// head, data and end, and answering through respond()/send_data()/finish().
//
// Why apart from the socket (as hiredis' reader is apart from its event loop): the fuzz target
// and the unit tests drive exactly this code with bytes, and the Asio side (connection.h) stays
// a short read/write loop.
//
// What the peer can make us hold is bounded (Limits):
//   - open streams: SETTINGS_MAX_CONCURRENT_STREAMS (nghttp2 refuses the excess with
//     RST_STREAM REFUSED_STREAM); resets are rate-limited (nghttp2's burst 1000, 33/s, then
//     GOAWAY), CONTINUATION frames per header block too (8);
//   - a request head: max_header_bytes counted as RFC 9113 §6.5.2 does (name + value + 32 per
//     field); beyond it the fields are dropped and the stream's head says `oversized`, so the
//     handler answers (431, or RESOURCE_EXHAUSTED for gRPC) instead of the stream being cut;
//   - request bodies: flow control (initial_window per stream); the handler bounds what it
//     buffers and answers early when a body is too large (the stream is then reset with
//     NO_ERROR once the answer is sent, so the peer stops sending);
//   - answers the peer's flow control holds back (it never opens its windows): at most
//     max_held_bytes per connection after each collect() — beyond it the streams holding the
//     most are reset (CANCEL) — and reset_stalled() resets any whose answer made no progress for
//     the request timeout (Connection::check_deadline; every stream stalled: GOAWAY). Counted in
//     FlowStats when one is given;
//   - bad frames, bad HPACK, a bad preface: nghttp2 answers GOAWAY with the RFC's error code;
//     fatal() then says so and the connection closes once that GOAWAY is written.
// Responses queued during one call of receive() (or between two collect()s) leave in one
// collect(): the caller writes them with one write.
// Thread-safety: none; one thread (the connection's) uses a Session.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct nghttp2_session;

namespace ratelimit::h2 {

struct Limits {
  uint32_t max_concurrent_streams = 100;  // SETTINGS_MAX_CONCURRENT_STREAMS
  uint32_t initial_window = 1 << 20;      // SETTINGS_INITIAL_WINDOW_SIZE (per stream, bytes)
  uint32_t max_header_bytes = 16 * 1024;  // SETTINGS_MAX_HEADER_LIST_SIZE, enforced per stream
  // Answer bytes a connection holds for a peer whose flow-control windows do not let them out
  // (four default 64 KiB windows): beyond it, after a collect(), streams are reset.
  size_t max_held_bytes = 256 * 1024;
};

// What the peers' flow control makes the sessions that share it hold and cut (a process's
// metrics: ratelimitd_h2_*). Any thread reads; each session adds its own changes.
struct FlowStats {
  std::atomic<int64_t> held_bytes{0};                // answer bytes waiting for a window, now
  std::atomic<uint64_t> stalled_streams_reset{0};    // no progress within the request timeout
  std::atomic<uint64_t> held_streams_reset{0};       // beyond max_held_bytes
  std::atomic<uint64_t> stalled_connections_closed{0};  // every stream stalled: GOAWAY
};

struct Header {
  std::string_view name;  // lower case (HTTP/2)
  std::string_view value;
};

// A request head as received. Pseudo-headers and the fields every API reads are split out;
// every other field is kept in `fields` (bounded by max_header_bytes).
struct RequestHead {
  std::string method, scheme, authority, path;
  std::string content_type, te, grpc_timeout;
  std::vector<std::pair<std::string, std::string>> fields;  // the rest, in order
  bool oversized = false;  // fields beyond Limits::max_header_bytes were dropped
  // The value of `name` (lower case) among `fields`; null when absent.
  const std::string* find(std::string_view name) const;
  void clear();
};

class Session;

// The application above the transport. Calls arrive on the session's thread, from receive()
// (or from the Session's destructor for on_close). A stream id is never reused on a connection.
class Handler {
 public:
  virtual ~Handler() = default;
  // The request head is complete. `head` stays valid until on_close(stream).
  virtual void on_headers(Session& s, int32_t stream, const RequestHead& head) = 0;
  // Request body bytes (flow control has already been applied).
  virtual void on_data(Session& s, int32_t stream, std::string_view bytes) = 0;
  // The peer ended its side of the stream (END_STREAM).
  virtual void on_end(Session& s, int32_t stream) = 0;
  // The stream is gone (answered and closed, reset by the peer, or the connection ended);
  // `error_code` is the HTTP/2 code (0 = NO_ERROR). Nothing may be sent on it afterwards.
  virtual void on_close(Session& s, int32_t stream, uint32_t error_code) = 0;
};

class Session {
 public:
  // Queues the server preface (SETTINGS) for the first collect(). `handler` must outlive the
  // session.
  Session(Handler& handler, const Limits& limits, FlowStats* stats = nullptr);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Feeds bytes read from the peer. false when the connection is beyond repair (bad preface,
  // a connection error); whatever collect() still gives (a GOAWAY) should be written, then the
  // connection closed.
  bool receive(std::string_view bytes);
  // Appends every frame ready to send to `out`; returns false when nothing was added.
  bool collect(std::string& out);
  // False once the session has nothing left to do: GOAWAY exchanged and every stream closed,
  // or a fatal error. (After collect() gave its last bytes, the connection may close.)
  bool alive() const;
  // Open streams (answered or not).
  size_t open_streams() const;

  // The stream is open and may still be answered.
  bool is_open(int32_t stream) const;
  // Sends the response head (`:status` first, then `headers`). With end_stream nothing follows
  // (a trailers-only gRPC answer is this); else send_data()/finish() complete it. Once.
  void respond(int32_t stream, std::span<const Header> headers, bool end_stream);
  // Queues body bytes after respond(..., false). Flow control paces them.
  void send_data(int32_t stream, std::string_view bytes);
  // Ends the response after the queued data, with `trailers` (none: END_STREAM on the data).
  void finish(int32_t stream, std::span<const Header> trailers = {});
  // Resets a stream (RST_STREAM with `error_code`).
  void reset(int32_t stream, uint32_t error_code);
  // Resets (CANCEL) every stream opened before `cutoff` whose request has not ended: a peer
  // that opens streams and never finishes them cannot hold them. A streaming stream (below) is
  // reset instead when nothing of its request arrived since `streaming_cutoff`. Returns how many.
  size_t reset_unfinished(std::chrono::steady_clock::time_point cutoff,
                          std::chrono::steady_clock::time_point streaming_cutoff);
  size_t reset_unfinished(std::chrono::steady_clock::time_point cutoff) { return reset_unfinished(cutoff, cutoff); }
  // The handler serves `stream` as a streaming call (gRPC client or bidirectional streaming:
  // its request body is a sequence of messages with no end in sight): reset_unfinished then
  // measures the time since its request's last bytes, not since it opened.
  void set_streaming(int32_t stream);
  // Resets (CANCEL) every stream whose answer has bytes (or its end) waiting and made no
  // progress since `cutoff`: the peer's flow-control window holds it (or it stopped reading).
  // Returns how many; `every_stream_stalled` tells whether each open stream is then waiting on
  // the peer's window — the connection serves nothing and should end (Connection does); then
  // those not yet due are reset as well, so every stream hears RST_STREAM before the GOAWAY.
  size_t reset_stalled(std::chrono::steady_clock::time_point cutoff, bool& every_stream_stalled);
  // Answer bytes held for the peer's windows (as of the last collect()).
  size_t held_bytes() const { return held_; }

  // Graceful shutdown, step 1: a GOAWAY announcing the end (last stream id 2^31-1): the peer
  // stops opening streams. Step 2, go_away(): the final GOAWAY with the last stream processed;
  // streams already open are still answered, then alive() turns false.
  void shutdown_notice();
  void go_away();
  // Ends the connection now with GOAWAY(`error_code`) (idle timeout, overload).
  void terminate(uint32_t error_code);
  // The connection is gone (its socket closed): every open stream's handler hears
  // on_close(CANCEL) now, as at destruction, so an answer still pending is known to reach no
  // one (a waiting request leaves its queue). Not from inside a Handler callback.
  void close_streams();

  struct Stream;  // session.cc

 private:
  friend struct Callbacks;
  Stream* stream(int32_t id) const;
  Stream* acquire_stream();
  void release_stream(Stream* s);
  void trim_held();
  void report_held();

  Handler& handler_;
  Limits limits_;
  nghttp2_session* ng_ = nullptr;
  bool fatal_ = false;
  FlowStats* stats_ = nullptr;
  size_t held_ = 0;           // sum of the live streams' unsent answer bytes
  int64_t held_reported_ = 0;  // held_ as last added to stats_
  // Streams whose state is reused (a stream's strings keep their capacity).
  std::vector<std::unique_ptr<Stream>> free_;
  std::vector<Stream*> live_;  // every stream with state (owned; released on close)
};

}  // namespace ratelimit::h2
