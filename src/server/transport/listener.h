// listener.h — one listening socket of ratelimitd: accepts on the control thread, admits each
// connection through the caps (caps.h), and hands it to the next worker, where the HTTP/1.1
// transport serves it with the listener's routes (transport.h: Served) — or, on the gRPC
// listener (Served::h2c_only), the h2c transport from the first byte.
//
// Why accept on the control thread: one acceptor, round-robin over the workers, so no worker
// starves and no accept races another. An accept error (EMFILE...) backs off 100 ms instead
// of spinning.
// Thread-safety: open/start/close on the control thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "transport.h"

namespace ratelimit::server {

class Listener {
 public:
  // `workers`, `caps` and `served` must outlive the listener.
  Listener(boost::asio::io_context& control, std::vector<std::unique_ptr<Worker>>& workers, ConnectionCaps& caps,
           const Served& served)
      : acceptor_(control), retry_(control), workers_(workers), caps_(caps), served_(served) {}

  // Binds and listens. kInvalidArgument for an address that is not an IP literal, kUnavailable
  // when it cannot be bound.
  Status open(const ListenAddress& address);
  // "host:port" as bound ("[v6]:port"), the port resolved when 0 was asked.
  std::string where() const;
  const Served& served() const { return served_; }
  void start() { accept(); }
  void close();

 private:
  void accept();

  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_;
  std::vector<std::unique_ptr<Worker>>& workers_;
  ConnectionCaps& caps_;
  const Served& served_;
  size_t next_ = 0;
};

}  // namespace ratelimit::server
