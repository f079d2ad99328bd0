// connection.cc — the Asio loop of an h2c connection (see connection.h).
#include "connection.h"

#include <algorithm>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

#include <nghttp2/nghttp2.h>

namespace ratelimit::h2 {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {
constexpr size_t kReadSize = 16 * 1024;
}

Connection::Connection(asio::ip::tcp::socket socket, const ConnectionOptions& options)
    : socket_(std::move(socket)), options_(options) {}

Connection::~Connection() {
  session_.reset();  // tells the handler of streams still open, while it exists
}

void Connection::start(std::unique_ptr<Handler> handler, std::string_view already_read) {
  handler_ = std::move(handler);
  session_.emplace(*handler_, options_.limits, options_.stats);
  error_code ec;
  socket_.set_option(asio::ip::tcp::no_delay(true), ec);
  last_read_ = std::chrono::steady_clock::now();
  got_byte_ = !already_read.empty();
  if (!already_read.empty()) {
    in_receive_ = true;
    const bool ok = session_->receive(already_read);
    in_receive_ = false;
    write();
    if (!ok) return;
  } else {
    write();  // our SETTINGS
  }
  read();
}

void Connection::read() {
  if (closed_) return;
  in_.resize(kReadSize);
  socket_.async_read_some(asio::buffer(in_.data(), in_.size()), [self = shared_from_this()](error_code ec, size_t n) {
    if (ec || self->closed_) {
      self->close();
      return;
    }
    self->last_read_ = std::chrono::steady_clock::now();
    self->got_byte_ = true;
    self->in_receive_ = true;
    const bool ok = self->session_->receive(std::string_view(self->in_.data(), n));
    self->in_receive_ = false;
    self->write();
    if (ok && self->session_->alive()) self->read();
  });
}

void Connection::flush_soon() {
  if (in_receive_ || flush_posted_ || closed_) return;
  flush_posted_ = true;
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    self->flush_posted_ = false;
    self->write();
  });
}

void Connection::write() {
  if (closed_ || writing_) return;
  out_.clear();
  session_->collect(out_);
  if (out_.empty()) {
    if (!session_->alive()) close();
    return;
  }
  writing_ = true;
  write_started_ = std::chrono::steady_clock::now();
  asio::async_write(socket_, asio::buffer(out_), [self = shared_from_this()](error_code ec, size_t) {
    self->writing_ = false;
    if (ec) {
      self->close();
      return;
    }
    self->write();  // what was queued meanwhile, or close when the session is done
  });
}

void Connection::drain() {
  if (draining_ || closed_) return;
  draining_ = true;
  session_->shutdown_notice();
  write();
  // The final GOAWAY a moment later, so streams the peer opened meanwhile are still served.
  auto t = std::make_shared<asio::steady_timer>(socket_.get_executor(), std::chrono::milliseconds(100));
  t->async_wait([self = shared_from_this(), t](error_code) {
    if (self->closed_) return;
    self->session_->go_away();
    self->write();
  });
}

void Connection::close() {
  if (closed_) return;
  closed_ = true;
  error_code ec;
  socket_.shutdown(asio::ip::tcp::socket::shutdown_both, ec);
  socket_.close(ec);
  // The streams end with the socket, not when the last holder lets the connection go (an
  // answer still pending holds it): posted, so no handler is told from inside its own call.
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    if (self->session_) self->session_->close_streams();
  });
}

void Connection::check_deadline(std::chrono::steady_clock::time_point now) {
  if (closed_ || !session_) return;
  if (writing_ && now - write_started_ >= options_.request_timeout) {
    close();  // the peer stopped reading: nothing more can reach it
    return;
  }
  Session& s = *session_;
  if (stalled_out_) {
    stalled_out_ = false;
    s.terminate(NGHTTP2_NO_ERROR);
    if (options_.stats != nullptr) options_.stats->stalled_connections_closed.fetch_add(1, std::memory_order_relaxed);
    write();
    return;
  }
  const auto idle = got_byte_ ? options_.idle_timeout : std::min(options_.first_byte_timeout, options_.idle_timeout);
  if (s.open_streams() == 0 && now - last_read_ >= idle) {
    s.terminate(NGHTTP2_NO_ERROR);  // GOAWAY; write() closes once it is out
    write();
    return;
  }
  const auto cutoff = now - options_.request_timeout;
  bool every_stream_stalled = false;
  const size_t stalled = s.reset_stalled(cutoff, every_stream_stalled);
  // Nothing on this connection can move until the peer opens a window it has not opened for
  // request_timeout: its streams are reset now, the GOAWAY follows at the next sweep (after the
  // RST_STREAMs were written: a GOAWAY queued with them could leave first and end the session).
  if (stalled > 0 && every_stream_stalled) stalled_out_ = true;
  // A streaming call (RLQS) may stay open while its client keeps sending: idle_timeout after its
  // last message, as a connection with nothing open.
  if (s.reset_unfinished(cutoff, now - options_.idle_timeout) + stalled > 0) write();
}

}  // namespace ratelimit::h2
