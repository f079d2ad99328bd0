// main.cc — a tiny Boost.Beast server (one thread, synchronous) with RateLimitMiddleware in
// front of a hello-world handler: 5 requests per 10 s per X-Api-Key (or client address).
//
//   build/bin/beast_middleware_example 127.0.0.1 8090 &
//   curl -i -H 'X-Api-Key: alice' http://127.0.0.1:8090/      # 200 ... then 429
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>

#include "rate_limit_middleware.h"
#include "ratelimit/memory_store.h"

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <address> <port>\n", argv[0]);
    return 2;
  }
  auto policy = ratelimit::Policy::sliding_window_log(5, std::chrono::seconds(10)).value().with_name("hello").value();
  auto store = std::make_shared<ratelimit::MemoryStore>();
  ratelimit::Limiter limiter(policy, store);

  std::string peer;  // the current connection's client address (one thread: no race)
  example::RateLimitMiddleware app(
      limiter,
      [&peer](const example::Request& req) {
        auto it = req.find("X-Api-Key");
        return it != req.end() ? std::string(it->value()) : peer;
      },
      [](const example::Request& req) {
        example::Response res{boost::beast::http::status::ok, req.version()};
        res.set(boost::beast::http::field::content_type, "text/plain");
        res.body() = "hello\n";
        res.keep_alive(req.keep_alive());
        res.prepare_payload();
        return res;
      });

  asio::io_context ioc;
  boost::system::error_code ec;
  tcp::acceptor acceptor(ioc, {asio::ip::make_address(argv[1]), static_cast<unsigned short>(std::atoi(argv[2]))});
  std::fprintf(stderr, "listening on %s:%d\n", argv[1], acceptor.local_endpoint().port());
  for (;;) {
    tcp::socket socket(ioc);
    acceptor.accept(socket, ec);
    if (ec) continue;
    peer = socket.remote_endpoint(ec).address().to_string();
    boost::beast::flat_buffer buffer;
    for (;;) {
      example::Request req;
      boost::beast::http::read(socket, buffer, req, ec);
      if (ec) break;
      example::Response res = app(req);
      boost::beast::http::write(socket, res, ec);
      if (ec || !res.keep_alive()) break;
    }
    socket.shutdown(tcp::socket::shutdown_both, ec);
  }
}
