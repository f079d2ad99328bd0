// grpc_server.cc — the gRPC listener's acceptor and workers (see grpc_server.h). The acceptor
// runs on worker 0 and accepts each socket straight onto the next worker's io_context
// (round robin); the worker starts the connection. Each worker lists its connections (weak
// references, pruned as it accepts) so drain and shutdown can reach them on their own thread.
#include "grpc_server.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "connection.h"
#include "grpc_handler.h"

namespace ratelimit::grpc_api {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

namespace {

struct Served {
  std::weak_ptr<h2::Connection> connection;
  GrpcHandler* handler;  // valid while `connection` is alive (it owns the handler)
};

// How often a worker asks its connections to check their deadlines (h2::Connection's idle,
// half-open and write timeouts), as ratelimitd's HTTP workers do (src/server/worker.h).
constexpr std::chrono::milliseconds kSweep{250};

struct Worker {
  asio::io_context ioc{1};
  asio::executor_work_guard<asio::io_context::executor_type> guard{ioc.get_executor()};
  asio::steady_timer sweep{ioc};
  std::vector<Served> served;  // touched on this worker's thread only
  std::thread thread;

  void arm_sweep() {
    sweep.expires_after(kSweep);
    sweep.async_wait([this](error_code ec) {
      if (ec) return;
      const auto now = std::chrono::steady_clock::now();
      std::erase_if(served, [](const Served& s) { return s.connection.expired(); });
      each([now](h2::Connection& c, GrpcHandler&) { c.check_deadline(now); });
      arm_sweep();
    });
  }

  template <typename F>
  void each(F&& f) {
    for (Served& s : served) {
      if (auto c = s.connection.lock(); c && !c->closed()) f(*c, *s.handler);
    }
  }
};

// "host:port" or "[v6]:port" → endpoint (the host a literal address or a resolvable name).
Result<tcp::endpoint> parse_endpoint(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return Status::invalid_argument("expected host:port, got " + address);
  std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  unsigned long p = 0;
  try {
    p = std::stoul(port);
  } catch (...) {
    return Status::invalid_argument("bad port in " + address);
  }
  if (p > 65535) return Status::invalid_argument("bad port in " + address);
  error_code ec;
  const auto ip = asio::ip::make_address(host, ec);
  if (!ec) return tcp::endpoint(ip, static_cast<uint16_t>(p));
  asio::io_context ioc;
  tcp::resolver r(ioc);
  auto results = r.resolve(host, port, ec);
  if (ec || results.empty()) return Status::unavailable("cannot resolve " + host + ": " + ec.message());
  return results.begin()->endpoint();
}

}  // namespace

struct GrpcServer::Impl {
  GrpcContext ctx;
  h2::ConnectionOptions connection;
  std::vector<std::unique_ptr<Worker>> workers;
  std::optional<tcp::acceptor> acceptor;
  size_t next = 0;
  int port = 0;
  bool stopped = false;

  void accept() {
    Worker& w = *workers[next];
    next = (next + 1) % workers.size();
    acceptor->async_accept(w.ioc, [this, &w](error_code ec, tcp::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor->is_open()) return;
      if (!ec) {
        asio::post(w.ioc, [this, &w, s = std::move(socket)]() mutable { serve(w, std::move(s)); });
      }
      accept();
    });
  }

  void serve(Worker& w, tcp::socket socket) {
    std::erase_if(w.served, [](const Served& s) { return s.connection.expired(); });
    auto conn = std::make_shared<h2::Connection>(std::move(socket), connection);
    auto handler = make_grpc_handler(ctx, *conn);
    w.served.push_back({conn, handler.get()});
    conn->start(std::move(handler));
  }
};

Result<std::unique_ptr<GrpcServer>> GrpcServer::start(const GrpcServerOptions& options,
                                                      rls::RateLimitService& service) {
  auto endpoint = parse_endpoint(options.address);
  if (!endpoint) return Status::unavailable("cannot listen on " + options.address + ": " + endpoint.status().message());
  auto impl = std::make_unique<Impl>();
  impl->ctx.service = &service;
  impl->ctx.max_message_bytes = options.max_message_bytes;
  impl->connection = options.connection;
  const unsigned threads = std::max(1u, options.threads);
  for (unsigned i = 0; i < threads; ++i) impl->workers.push_back(std::make_unique<Worker>());
  error_code ec;
  impl->acceptor.emplace(impl->workers[0]->ioc);
  impl->acceptor->open(endpoint->protocol(), ec);
  if (!ec) impl->acceptor->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl->acceptor->bind(*endpoint, ec);
  if (!ec) impl->acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Status::unavailable("cannot listen on " + options.address + ": " + ec.message());
  impl->port = impl->acceptor->local_endpoint().port();
  impl->accept();
  for (auto& w : impl->workers) {
    w->arm_sweep();
    w->thread = std::thread([io = &w->ioc] { io->run(); });
  }
  return std::unique_ptr<GrpcServer>(new GrpcServer(std::move(impl)));
}

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GrpcServer::~GrpcServer() { shutdown(); }

int GrpcServer::port() const { return impl_->port; }

void GrpcServer::drain() { set_serving(false); }

void GrpcServer::set_serving(bool serving) {
  if (impl_->ctx.serving.exchange(serving) == serving) return;
  for (auto& w : impl_->workers) {
    asio::post(w->ioc, [w = w.get()] { w->each([](h2::Connection&, GrpcHandler& h) { h.on_serving_changed(); }); });
  }
}

void GrpcServer::shutdown(std::chrono::milliseconds grace) {
  Impl& impl = *impl_;
  if (impl.stopped) return;
  impl.stopped = true;
  drain();
  asio::post(impl.workers[0]->ioc, [&impl] {
    error_code ec;
    impl.acceptor->close(ec);
  });
  for (auto& w : impl.workers) {
    asio::post(w->ioc, [w = w.get()] {
      w->each([](h2::Connection& c, GrpcHandler& h) {
        h.end_watches();
        c.drain();
      });
    });
  }
  // Connections close once their streams are answered (GOAWAY exchanged); bounded by grace.
  const auto now = std::chrono::steady_clock::now();
  const auto until = now + grace;
  while (impl.ctx.connections.load() > 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // The store answers within its own timeouts; bounded anyway.
  const auto store_until = until + std::chrono::seconds(5);
  while (impl.ctx.awaiting_store.load() > 0 && std::chrono::steady_clock::now() < store_until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& w : impl.workers) {
    asio::post(w->ioc, [w = w.get()] {
      w->each([](h2::Connection& c, GrpcHandler&) { c.close(); });
      w->sweep.cancel();
      w->guard.reset();
    });
  }
  for (auto& w : impl.workers) {
    // Closed sockets' handlers finish promptly; stop() bounds it should any remain.
    if (w->thread.joinable()) {
      const auto join_until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (!w->ioc.stopped() && std::chrono::steady_clock::now() < join_until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
      w->ioc.stop();
      w->thread.join();
    }
  }
  // Destroying the io_contexts (with the Impl) frees what is left of the connections.
}

}  // namespace ratelimit::grpc_api
