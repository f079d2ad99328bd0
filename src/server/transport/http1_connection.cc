// http1_connection.cc — the HTTP/1.1 connection (see http1_connection.h).
#include "http1_connection.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <optional>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>

#include "http1_fast.h"
#include "http1_parser.h"
#include "http1_writer.h"
#include "head_scan.h"

namespace ratelimit::server {
namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;
using boost::system::error_code;

// A deadline `after` from now, read from CLOCK_MONOTONIC_COARSE (steady_clock's own clock, kept
// at the tick: a third of the precise read's cost, twice per request) plus one tick, so a
// deadline is never earlier than the precise one and at most a tick (4 ms at HZ=250) later —
// far inside the sweep's 250 ms.
SteadyClock::time_point deadline_after(SteadyClock::duration after) {
  static const std::chrono::nanoseconds tick = [] {
    timespec res{};
    clock_getres(CLOCK_MONOTONIC_COARSE, &res);
    return std::chrono::seconds(res.tv_sec) + std::chrono::nanoseconds(res.tv_nsec);
  }();
  timespec ts{};
  if (clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0) return SteadyClock::now() + after;
  const auto now = std::chrono::seconds(ts.tv_sec) + std::chrono::nanoseconds(ts.tv_nsec);
  return SteadyClock::time_point(std::chrono::duration_cast<SteadyClock::duration>(now + tick)) + after;
}

class Connection final : public std::enable_shared_from_this<Connection>,
                         public Exchange,
                         public TrackedConnection {
 public:
  Connection(Worker& worker, tcp::socket socket, ConnectionSlot slot, const Served& served)
      : w_(worker), sock_(std::move(socket)), slot_(std::move(slot)), served_(served) {
    w_.track(*this);
    request.headers = &req_.headers;
    request.peer = slot_.address();
    request.listener = &served_.info;
  }
  ~Connection() override { w_.untrack(*this); }

  void start() {
    error_code ec;
    sock_.set_option(tcp::no_delay(true), ec);
    sock_.non_blocking(true, ec);  // send_response() writes without blocking (see there)
    wait_for_request();
  }

  void check_deadline(SteadyClock::time_point now) override {
    if (state_ == State::kHandling || state_ == State::kClosed) return;
    if (now < deadline_) return;
    if (!got_byte_) w_.counters().connection_first_byte_timeout();
    close();
  }
  void on_drain() override {
    if (state_ == State::kIdle) close();
  }

  // The handler's answer is ready (a store thread): render and send on the worker's thread.
  // `keepalive_` was set before dispatch() and is not touched by the worker until this runs.
  void resume() override {
    asio::post(w_.io_context(), [self = keepalive_] {
      self->keepalive_.reset();
      self->stop_watching();
      complete(*self);
      self->send_response();
    });
  }

 private:
  enum class State : uint8_t { kIdle, kReading, kHandling, kWriting, kClosed };

  const ConnectionLimits& limits() { return w_.limits(); }

  void close() {
    if (state_ == State::kClosed) return;
    state_ = State::kClosed;
    close_socket(sock_);
  }

  void wait_for_request() {
    if (state_ == State::kClosed) return;
    if (w_.draining()) {
      close();
      return;
    }
    if (buf_.size() > 0) {  // a pipelined request is already buffered
      read_request();
      return;
    }
    state_ = State::kIdle;
    // Until its first byte a connection gets the short first_byte_timeout: idle sockets that
    // never speak cannot hold the connection caps for idle_timeout.
    const ConnectionLimits& l = limits();
    deadline_ = deadline_after(got_byte_ ? l.idle_timeout : std::min(l.first_byte_timeout, l.idle_timeout));
    sock_.async_read_some(buf_.prepare(4096), [self = shared_from_this()](error_code ec, size_t n) {
      if (ec || self->state_ == State::kClosed) {
        self->close();
        return;
      }
      self->got_byte_ = true;
      self->buf_.commit(n);
      self->read_request();
    });
  }

  void read_request() {
    const ConnectionLimits& l = limits();
    state_ = State::kReading;
    deadline_ = deadline_after(l.request_timeout);
    req_.clear();
    read_head();
  }

  // Another transport's connection preface (h2c prior knowledge) on a fresh connection: the
  // listener's takeover gets the socket. True when the bytes are (or may still become) the
  // preface: then either the connection was handed over or more bytes are being read.
  bool take_over(std::string_view have) {
    if (served_.h2c == nullptr || !first_request_) return false;
    const size_t n = std::min(have.size(), kH2Preface.size());
    if (std::memcmp(have.data(), kH2Preface.data(), n) != 0) return false;
    if (n == kH2Preface.size()) {
      state_ = State::kClosed;  // the socket is no longer ours
      error_code ec;
      sock_.non_blocking(false, ec);  // handed over as accepted
      served_.h2c->adopt(w_, std::move(sock_), have, std::move(slot_), served_);
      return true;
    }
    read_more();
    return true;
  }

  // The head is screened (scan_request_head) before it is parsed, so a bare LF, obs-fold or
  // control character is refused even where Beast would accept it. The common request (a short
  // head, its body buffered) is then parsed by parse_common_request (http1_fast.h) and handled
  // at once; anything it declines, Beast parses as before: the whole head in one put(), from
  // the same bytes (the fast path consumed nothing).
  void read_head() {
    const std::string_view have(static_cast<const char*>(buf_.data().data()), buf_.size());
    if (take_over(have)) return;
    const HeadScan scan = scan_request_head(have);
    if (scan.state == HeadScan::State::kMalformed) {
      req_.refusal = scan.reason;
      return on_read_error(bhttp::error::bad_field);
    }
    if (scan.state == HeadScan::State::kNeedMore) {
      if (have.size() >= limits().max_header_bytes || buf_.size() == buf_.max_size()) {
        return on_read_error(bhttp::error::header_limit);
      }
      read_more();
      return;
    }
    first_request_ = false;
    const ConnectionLimits& l = limits();
    FastParse fast;
    if (parse_common_request(have, scan.length, l.max_header_bytes, l.max_body_bytes, req_, fast)) {
      buf_.consume(fast.consumed);
      keep_alive_ = fast.keep_alive;
      return on_request();
    }
    parser_.emplace(req_, l.max_header_bytes);
    parser_->header_limit(static_cast<std::uint32_t>(l.max_header_bytes));
    parser_->body_limit(l.max_body_bytes);
    error_code ec;
    const size_t used = parser_->put(asio::buffer(have.data(), scan.length), ec);
    buf_.consume(used);
    if (!ec && !parser_->is_header_done()) ec = bhttp::error::bad_field;  // cannot happen: the head was whole
    on_header(ec);
  }

  void read_more() {
    const size_t room = std::min<size_t>(4096, buf_.max_size() - buf_.size());
    sock_.async_read_some(buf_.prepare(room), [self = shared_from_this()](error_code ec, size_t n) {
      if (ec) return self->on_read_error(ec == asio::error::eof && self->buf_.size() > 0 ? bhttp::error::partial_message : ec);
      self->buf_.commit(n);
      self->read_head();
    });
  }

  void on_header(error_code ec) {
    if (ec) return on_read_error(ec);
    if (parser_->is_done()) return on_parsed();
    if (req_.expect_continue) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      asio::async_write(sock_, asio::buffer(kContinue.data(), kContinue.size()),
                        [self = shared_from_this()](error_code wec, size_t) {
                          if (wec) return self->close();
                          self->read_body();
                        });
      return;
    }
    read_body();
  }

  // The body usually arrived with the head (a small POST is one segment): parse what is
  // buffered here, and read from the socket only for what is still missing. The parser is the
  // same and bounds the body the same (body_limit, chunk extensions, trailers) either way; this
  // only spares a composed read operation and its posted completion per request.
  void read_body() {
    parser_->eager(true);
    while (buf_.size() > 0 && !parser_->is_done()) {
      error_code ec;
      const size_t used = parser_->put(buf_.data(), ec);
      buf_.consume(used);
      if (ec == bhttp::error::need_more) break;
      if (ec) return on_read_error(ec);
      if (used == 0) break;
    }
    if (parser_->is_done()) return on_parsed();
    bhttp::async_read(sock_, buf_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->on_read_error(ec);
      self->on_parsed();
    });
  }

  void on_read_error(error_code ec) {
    if (state_ == State::kClosed) return;
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof || ec == asio::error::connection_reset ||
        ec == asio::error::operation_aborted || ec == bhttp::error::partial_message) {
      close();
      return;
    }
    // The request cannot be understood: answer and close (the stream position is lost).
    framing_.version = req_.version;
    framing_.keep_alive = false;
    framing_.head_only = false;
    endpoint = Endpoint{};  // no route saw it
    if (ec == bhttp::error::body_limit) {
      http::render_error(413, "body_too_large",
                         "the request body exceeds limits.max_body_bytes (" + std::to_string(limits().max_body_bytes) + ")",
                         response);
    } else if (ec == bhttp::error::header_limit) {
      http::render_error(431, "headers_too_large",
                         std::string(req_.refusal.empty() ? "the request header exceeds limits.max_header_bytes" : req_.refusal) +
                             " (" + std::to_string(limits().max_header_bytes) + ")",
                         response);
    } else {
      http::render_error(400, "bad_http",
                         "malformed HTTP request: " + (req_.refusal.empty() ? ec.message() : std::string(req_.refusal)),
                         response);
    }
    send_response();
  }

  // Beast parsed the request (the fast path declined it).
  void on_parsed() {
    keep_alive_ = parser_->keep_alive();
    on_request();
  }

  void on_request() {
    state_ = State::kHandling;
    framing_.version = req_.version;
    framing_.keep_alive = keep_alive_;
    framing_.head_only = req_.method == Method::kHead;
    request.method = req_.method;
    request.target = req_.target;
    request.body = req_.body;
    keepalive_ = shared_from_this();  // until the answer is rendered (see resume())
    if (dispatch(served_.routes, *this)) {
      keepalive_.reset();
      send_response();
      return;
    }
    watch_client();
  }

  // While an answer is pending (it may wait in a queue for seconds), a readable socket means
  // the client either sent its next request (pipelining: read after the answer) or went away
  // (EOF, reset): then the handler is told (cancel: a waiter leaves its queue) and the
  // connection closes. A client that half-closes its side while waiting is taken as gone, as
  // nginx does by default.
  void watch_client() {
    const uint64_t seq = ++watch_seq_;
    sock_.async_wait(tcp::socket::wait_read, [self = shared_from_this(), seq](error_code ec) {
      if (ec || self->state_ != State::kHandling || self->watch_seq_ != seq) return;
      char c = 0;
      error_code pec;
      const size_t n = self->sock_.receive(asio::buffer(&c, 1), tcp::socket::message_peek, pec);
      if (pec == asio::error::would_block || pec == asio::error::try_again) return self->watch_client();
      if (!pec && n > 0) return;  // a pipelined request
      cancel(*self);
      self->close();
    });
  }
  void stop_watching() {
    ++watch_seq_;
    error_code ec;
    if (state_ == State::kHandling) sock_.cancel(ec);
  }

  void send_response() {
    if (state_ == State::kClosed) return;
    w_.counters().count_request(endpoint, response.status);
    if (w_.draining()) framing_.keep_alive = false;
    write_http1_response(response, framing_, out_);
    state_ = State::kWriting;
    // An answer fits the socket's send buffer almost always: one non-blocking send, and the
    // connection goes straight back to reading. Only what did not fit waits for an
    // asynchronous write (under request_timeout, as before).
    error_code ec;
    const size_t sent = sock_.write_some(asio::buffer(out_), ec);
    if (ec && ec != asio::error::would_block && ec != asio::error::try_again) return close();
    if (!ec && sent == out_.size()) return after_write();
    deadline_ = deadline_after(limits().request_timeout);
    asio::async_write(sock_, asio::buffer(out_.data() + sent, out_.size() - sent),
                      [self = shared_from_this()](error_code wec, size_t) {
                        if (wec) return self->close();
                        self->after_write();
                      });
  }

  void after_write() {
    if (!framing_.keep_alive) return close();
    // A pipelined request already buffered is served from the event loop, not from this
    // stack: a client pipelining many requests cannot deepen the recursion.
    if (buf_.size() > 0) {
      asio::post(w_.io_context(), [self = shared_from_this()] { self->wait_for_request(); });
      return;
    }
    wait_for_request();
  }

  Worker& w_;
  tcp::socket sock_;
  ConnectionSlot slot_;
  const Served& served_;
  boost::beast::flat_buffer buf_{64 * 1024};
  Http1Request req_;
  std::optional<Http1Parser> parser_;  // emplaced for each request the fast path declines
  bool keep_alive_ = false;            // the parsed request's (Beast's keep_alive())
  Http1Framing framing_;
  std::string out_;
  bool got_byte_ = false;
  bool first_request_ = true;  // nothing parsed yet: the bytes may be another transport's preface
  uint64_t watch_seq_ = 0;  // the current watch_client() wait; older ones are stale
  State state_ = State::kIdle;
  SteadyClock::time_point deadline_{};
  std::shared_ptr<Connection> keepalive_;  // set while an answer is pending
};

}  // namespace

void serve_http1(Worker& worker, boost::asio::ip::tcp::socket socket, ConnectionSlot slot, const Served& served) {
  std::make_shared<Connection>(worker, std::move(socket), std::move(slot), served)->start();
}

}  // namespace ratelimit::server
