// listener.cc — accepting and admitting connections (see listener.h).
#include "listener.h"

#include <boost/asio/post.hpp>

#include "http1_connection.h"
#include "resp_connection.h"
#include "log.h"

namespace ratelimit::server {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

Status Listener::open(const ListenAddress& addr) {
  error_code ec;
  const auto ip = asio::ip::make_address(addr.host, ec);
  if (ec) return Status::invalid_argument("listen: bad address " + addr.host);
  const tcp::endpoint ep(ip, addr.port);
  acceptor_.open(ep.protocol(), ec);
  if (!ec) acceptor_.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor_.bind(ep, ec);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status::unavailable("cannot listen on " + addr.host + ":" + std::to_string(addr.port) + ": " + ec.message());
  return {};
}

std::string Listener::where() const {
  error_code ec;
  const tcp::endpoint ep = acceptor_.local_endpoint(ec);
  const std::string host = ep.address().to_string();
  return (ep.address().is_v6() ? "[" + host + "]" : host) + ":" + std::to_string(ep.port());
}

void Listener::close() {
  error_code ec;
  acceptor_.close(ec);
  retry_.cancel();
}

void Listener::accept() {
  Worker& w = *workers_[next_++ % workers_.size()];
  acceptor_.async_accept(w.io_context(), [this, &w](error_code ec, tcp::socket sock) {
    if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {
      // EMFILE and friends: back off briefly instead of spinning.
      log_line("warn", "accept failed: " + ec.message());
      retry_.expires_after(std::chrono::milliseconds(100));
      retry_.async_wait([this](error_code tec) {
        if (!tec) accept();
      });
      return;
    }
    error_code rec;
    const auto peer = sock.remote_endpoint(rec);
    std::optional<ConnectionSlot> slot =
        caps_.admit(rec ? std::string("unknown") : peer.address().to_string(), served_.info.admin);
    if (slot) {
      asio::post(w.io_context(), [&w, s = std::move(sock), admitted = std::move(*slot), &served = served_]() mutable {
        if (served.resp != nullptr) {
          serve_resp(w, std::move(s), std::move(admitted), served);
        } else if (served.h2c_only && served.h2c != nullptr) {
          served.h2c->adopt(w, std::move(s), {}, std::move(admitted), served);
        } else {
          serve_http1(w, std::move(s), std::move(admitted), served);
        }
      });
    } else {
      error_code cec;
      sock.close(cec);
    }
    accept();
  });
}

}  // namespace ratelimit::server
