// byte_stream.cc — the plain byte stream (TCP or unix socket) on Boost.Asio; see byte_stream.h.
#include "byte_stream.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/write.hpp>
#include <vector>

namespace ratelimit::redis_detail {
namespace asio = boost::asio;

std::string Endpoint::address() const {
  if (is_unix) return path;
  const bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

namespace {

class PlainStream final : public ByteStream, public std::enable_shared_from_this<PlainStream> {
 public:
  explicit PlainStream(asio::io_context& io) : socket_(io), resolver_(io) {}

  void async_open(const Endpoint& to, const std::string& display, OpenHandler done) override {
    auto self = shared_from_this();
    auto connected = [self, display, done, tcp = !to.is_unix](const boost::system::error_code& ec) {
      if (ec) return done(Status::unavailable("cannot connect to " + display + ": " + ec.message()));
      if (tcp) {
        boost::system::error_code ignored;
        self->socket_.set_option(asio::ip::tcp::no_delay(true), ignored);
      }
      done(Status());
    };
    if (to.is_unix) {
      socket_.async_connect(asio::local::stream_protocol::endpoint(to.path), connected);
      return;
    }
    resolver_.async_resolve(
        to.host, std::to_string(to.port),
        [self, host = to.host, done, connected](
            const boost::system::error_code& ec,
            const asio::ip::tcp::resolver::results_type& results) {
          if (ec) return done(Status::unavailable("cannot resolve " + host + ": " + ec.message()));
          std::vector<asio::generic::stream_protocol::endpoint> endpoints;
          for (const auto& r : results) endpoints.emplace_back(r.endpoint());
          asio::async_connect(self->socket_, endpoints,
                              [connected](const boost::system::error_code& e, const auto&) {
                                connected(e);
                              });
        });
  }

  void async_write(asio::const_buffer data, IoHandler done) override {
    asio::async_write(socket_, data,
                      [self = shared_from_this(), done = std::move(done)](
                          const boost::system::error_code& ec, size_t n) { done(ec, n); });
  }

  void async_read_some(asio::mutable_buffer into, IoHandler done) override {
    socket_.async_read_some(into, [self = shared_from_this(), done = std::move(done)](
                                      const boost::system::error_code& ec, size_t n) {
      done(ec, n);
    });
  }

  void close() override {
    boost::system::error_code ignored;
    resolver_.cancel();
    socket_.close(ignored);
  }

  bool has_unread_bytes() const override {
    boost::system::error_code ec;
    return socket_.is_open() && socket_.available(ec) > 0 && !ec;
  }

 private:
  asio::generic::stream_protocol::socket socket_;
  asio::ip::tcp::resolver resolver_;
};

}  // namespace

std::shared_ptr<ByteStream> make_plain_stream(asio::io_context& io) {
  return std::make_shared<PlainStream>(io);
}

}  // namespace ratelimit::redis_detail
