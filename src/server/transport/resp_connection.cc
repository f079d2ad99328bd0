// resp_connection.cc — the Redis-protocol connection (see resp_connection.h).
#include "resp_connection.h"

#include <algorithm>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>

namespace ratelimit::server {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;
using boost::system::error_code;

constexpr size_t kReadChunk = 16 * 1024;
constexpr size_t kFlushAt = 64 * 1024;  // replies of a pipeline written at least this often

class Connection final : public std::enable_shared_from_this<Connection>,
                         public RespCall,
                         public TrackedConnection {
 public:
  Connection(Worker& worker, tcp::socket socket, ConnectionSlot slot, const Served& served)
      : w_(worker), sock_(std::move(socket)), slot_(std::move(slot)), served_(served) {
    w_.track(*this);
    out_ = &replies_;
    peer = slot_.address();
    listener = &served_.info;
  }
  ~Connection() override { w_.untrack(*this); }

  void start() {
    error_code ec;
    sock_.set_option(tcp::no_delay(true), ec);
    read();
  }

  void check_deadline(SteadyClock::time_point now) override {
    if (state_ == State::kHandling || state_ == State::kClosed || now < deadline_) return;
    if (!got_byte_) w_.counters().connection_first_byte_timeout();
    close();
  }
  void on_drain() override {
    if (state_ == State::kReading && buf_.size() == 0) close();
  }

  // A pending reply is ready (any thread): write it on the worker's thread. When the client went
  // away meanwhile (watch_client), the reply is dropped and, as HTTP's, not counted.
  void resume() override {
    asio::post(w_.io_context(), [self = keepalive_] {
      self->keepalive_.reset();
      served_handler(*self).complete(*self);
      if (self->state_ == State::kClosed) return;
      if (self->finish_command()) self->process();
    });
  }

 private:
  enum class State : uint8_t { kReading, kHandling, kWriting, kClosed };

  static RespHandler& served_handler(Connection& c) { return *c.served_.resp; }

  void close() {
    if (state_ == State::kClosed) return;
    state_ = State::kClosed;
    close_socket(sock_);
  }

  // Waits for more bytes: between commands idle_timeout (first_byte_timeout before the first
  // byte), within a command request_timeout (a slow sender cannot hold the connection).
  void read() {
    if (state_ == State::kClosed) return;
    if (w_.draining() && buf_.size() == 0) return close();
    state_ = State::kReading;
    const ConnectionLimits& l = w_.limits();
    const auto wait = buf_.size() > 0 ? l.request_timeout
                      : got_byte_     ? l.idle_timeout
                                      : std::min(l.first_byte_timeout, l.idle_timeout);
    deadline_ = SteadyClock::now() + wait;
    if (watching_) return;  // watch_client's read is still out: its completion goes on
    sock_.async_read_some(buf_.prepare(kReadChunk), [self = shared_from_this()](error_code ec, size_t n) {
      if (ec || self->state_ == State::kClosed) return self->close();
      self->got_byte_ = true;
      self->buf_.commit(n);
      self->process();
    });
  }

  // While a reply is pending (a waiting RL.ACQUIRE or RL.LEASE.ACQUIRE may wait for seconds),
  // the socket is still read, into ahead_ (the command's arguments are views into buf_, which
  // must not move): a client that went away (EOF, reset) is seen at once — the handler is told
  // (cancel: a waiter leaves its queue, a lease it took is released) and the connection closes.
  // Bytes of pipelined commands behind it are kept, up to kReadChunk; beyond that nothing more is
  // read until the reply is written (memory stays bounded), and a disconnect is seen then. A
  // client that half-closes while waiting is taken as gone, as Redis (and HTTP here) does.
  void watch_client() {
    if (watching_ || state_ != State::kHandling || ahead_.size() >= kReadChunk) return;
    watching_ = true;
    if (chunk_.empty()) chunk_.resize(kReadChunk);
    sock_.async_read_some(asio::buffer(chunk_.data(), kReadChunk - ahead_.size()),
                          [self = shared_from_this()](error_code ec, size_t n) {
                            self->watching_ = false;
                            if (self->state_ == State::kClosed) return;
                            if (ec) {
                              if (self->state_ == State::kHandling) served_handler(*self).cancel(*self);
                              return self->close();
                            }
                            self->ahead_.append(self->chunk_.data(), n);
                            if (self->state_ == State::kHandling) return self->watch_client();
                            if (self->state_ == State::kReading) self->process();
                            // kWriting: the write's completion processes what came
                          });
  }

  // Answers every whole command buffered, in order, then writes the replies and reads on.
  void process() {
    if (!ahead_.empty()) {  // what watch_client read while a reply was pending
      buf_.commit(asio::buffer_copy(buf_.prepare(ahead_.size()), asio::buffer(ahead_)));
      ahead_.clear();
      got_byte_ = true;
    }
    while (state_ != State::kClosed) {
      if (replies_.size() >= kFlushAt) return flush(false);
      const std::string_view have(static_cast<const char*>(buf_.data().data()), buf_.size());
      const ConnectionLimits& l = w_.limits();
      const RespBounds bounds{l.max_body_bytes, 1024};
      std::string error;
      switch (parse_resp_command(have, bounds, command_, error)) {
        case RespParse::kNeedMore:
          return replies_.empty() ? read() : flush(false);
        case RespParse::kSkip:
          buf_.consume(command_.length);
          continue;
        case RespParse::kMalformed:
          reply().error("ERR " + error);
          w_.counters().count_request(Endpoint{}, 400);
          return flush(true);
        case RespParse::kCommand:
          break;
      }
      args = command_.args;
      endpoint = Endpoint{};
      status = 200;
      state_ = State::kHandling;
      keepalive_ = shared_from_this();  // until the reply is written (see resume())
      if (!served_handler(*this).handle(*this)) return watch_client();
      keepalive_.reset();
      if (!finish_command()) return;
    }
  }

  // Counts the command's reply and drops its bytes. False when the connection is closing (QUIT).
  bool finish_command() {
    state_ = State::kReading;
    w_.counters().count_request(endpoint, status);
    buf_.consume(command_.length);
    command_.clear();
    if (!close_after) return true;
    flush(true);
    return false;
  }

  // Writes the replies gathered so far; then closes (`then_close`) or goes on with the buffer.
  void flush(bool then_close) {
    if (state_ == State::kClosed) return;
    close_after = close_after || then_close;
    state_ = State::kWriting;
    deadline_ = SteadyClock::now() + w_.limits().request_timeout;
    writing_.swap(replies_);
    replies_.clear();
    asio::async_write(sock_, asio::buffer(writing_), [self = shared_from_this()](error_code ec, size_t) {
      self->writing_.clear();
      if (ec || self->close_after) return self->close();
      self->state_ = State::kReading;
      self->process();
    });
  }

  Worker& w_;
  tcp::socket sock_;
  ConnectionSlot slot_;
  const Served& served_;
  boost::beast::flat_buffer buf_;  // bounded by the parser: one partial command + one read
  RespCommand command_;
  std::string replies_;  // written by the handlers (RespCall::out_)
  std::string writing_;  // the replies being written
  std::string ahead_;    // read by watch_client while a reply was pending (< kReadChunk)
  std::string chunk_;    // watch_client's read buffer (kReadChunk, allocated on first use)
  bool watching_ = false;  // watch_client's read is in flight (then read() starts none)
  bool got_byte_ = false;
  State state_ = State::kReading;
  SteadyClock::time_point deadline_{};
  std::shared_ptr<Connection> keepalive_;  // set while a reply is pending
};

}  // namespace

void serve_resp(Worker& worker, boost::asio::ip::tcp::socket socket, ConnectionSlot slot, const Served& served) {
  std::make_shared<Connection>(worker, std::move(socket), std::move(slot), served)->start();
}

}  // namespace ratelimit::server
