// server.cc — the Beast/Asio side of ratelimitd: acceptor, connections, I/O threads, timeouts,
// signals (graceful shutdown, reload).
//
// Threading model: one io_context per I/O thread ("worker"), each running single-threaded, so
// a connection's handlers never race and need no strand; the acceptor and the signal handling
// run on the main thread's own io_context and hand each accepted socket to the next worker.
// Every decision goes through the decision service (src/service); with a store that answers
// inline (the memory store) a request is parsed, decided and answered on its worker thread with
// no hand-off and no lock other than the store's shard lock; an answer that arrives on a store
// thread is posted back to the connection's worker before it is rendered.
//
// Parsing: a basic_parser subclass keeps only what the endpoints need (target, body, three
// headers) in per-connection buffers that are reused, so a kept-alive connection serving small
// requests does not allocate per request. Responses are serialised by hand into a reused
// buffer (status line, RateLimit fields, Content-Length).
//
// Timeouts: each connection records a deadline (idle_timeout while waiting for a request,
// request_timeout from its first byte to the end of the response); a per-worker sweep every
// 250 ms closes connections past their deadline, so a slow or silent client (slowloris) cannot
// hold a connection, at the cost of one integer store per request rather than a timer. A
// connection that has not sent its first byte gets first_byte_timeout (if shorter than
// idle_timeout) instead.
//
// Connection caps: limits.max_connections over the API listener, and per client address
// limits.max_connections_per_client (ConnectionTable); the optional admin listener
// (admin_listen) counts its connections apart (at most kAdminMaxConnections) and serves the
// operator endpoints only, so a flood on the API port cannot lock out health checks.
//
// Shutdown (SIGTERM/SIGINT): stop accepting; idle connections are closed; each connection with
// a request in flight finishes it, answers with "Connection: close" and closes; when every
// worker is done the process exits 0. A grace period (request_timeout + 2 s) bounds it.
#include "server.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/basic_parser.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/read.hpp>

#include "envoy_front.h"
#include "envoy_startup.h"
#include "grpc_frontend.h"
#include "grpc_server.h"
#include "log.h"
#include "http_api.h"
#include "store_factory.h"
#include "systemd_notify.h"

namespace ratelimit::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;
using boost::system::error_code;

// The parts of a request the endpoints read. Reused across requests of a connection.
struct RequestHead {
  Method method = Method::kOther;
  unsigned version = 11;
  std::string target;
  std::string body;
  std::string authorization, forwarded_for, forwarded, key_header;
  bool has_authorization = false, has_forwarded_for = false, has_forwarded = false, has_key_header = false;
  bool expect_continue = false;
  // Framing (RFC 9112 §6): the Transfer-Encoding fields seen, and whether Content-Length was.
  unsigned transfer_encodings = 0;
  std::string transfer_encoding;
  bool has_content_length = false;
  // Why the parser refused the request, when the reason is more precise than Beast's
  // error code (a static string).
  std::string_view refusal;

  void clear() {
    method = Method::kOther;
    target.clear();
    body.clear();
    authorization.clear();
    forwarded_for.clear();
    forwarded.clear();
    key_header.clear();
    has_authorization = has_forwarded_for = has_forwarded = has_key_header = expect_continue = false;
    transfer_encodings = 0;
    transfer_encoding.clear();
    has_content_length = false;
    refusal = {};
  }
};

// Beast's parser with the framing rules it leaves lenient made strict (a request a proxy in
// front could frame differently is refused, never guessed at): at most one Transfer-Encoding
// field, whose only coding is `chunked`, never beside Content-Length, never in HTTP/1.0; chunk
// extensions and trailer fields bounded like the header (limits.max_header_bytes), trailer
// fields otherwise ignored (an X-Forwarded-For in a trailer must not pick the key).
class RequestParser final : public bhttp::basic_parser<true> {
 public:
  RequestParser(RequestHead& head, std::string_view key_header_name, size_t max_header_bytes)
      : head_(head), key_header_name_(key_header_name), max_header_bytes_(max_header_bytes) {}

 private:
  void on_request_impl(bhttp::verb method, beast::string_view, beast::string_view target,
                       int version, error_code&) override {
    switch (method) {
      case bhttp::verb::get: head_.method = Method::kGet; break;
      case bhttp::verb::head: head_.method = Method::kHead; break;
      case bhttp::verb::post: head_.method = Method::kPost; break;
      default: head_.method = Method::kOther; break;
    }
    head_.version = static_cast<unsigned>(version);
    head_.target.assign(target.data(), target.size());
  }
  void on_response_impl(int, beast::string_view, int, error_code& ec) override {
    ec = bhttp::error::bad_method;  // never called for a request parser
  }
  void on_field_impl(bhttp::field f, beast::string_view name, beast::string_view value,
                     error_code& ec) override {
    if (header_done_) {  // a trailer field
      trailer_bytes_ += name.size() + value.size() + 4;
      if (trailer_bytes_ > max_header_bytes_) {
        head_.refusal = "the trailer fields exceed limits.max_header_bytes";
        ec = bhttp::error::header_limit;
      }
      return;
    }
    if (f == bhttp::field::transfer_encoding) {
      ++head_.transfer_encodings;
      head_.transfer_encoding.assign(value.data(), value.size());
    } else if (f == bhttp::field::content_length) {
      head_.has_content_length = true;
    }
    // The first occurrence wins; later duplicates are ignored.
    if (!key_header_name_.empty() && !head_.has_key_header &&
        beast::iequals(name, beast::string_view(key_header_name_.data(), key_header_name_.size()))) {
      head_.key_header.assign(value.data(), value.size());
      head_.has_key_header = true;
    }
    if (f == bhttp::field::authorization && !head_.has_authorization) {
      head_.authorization.assign(value.data(), value.size());
      head_.has_authorization = true;
    } else if (beast::iequals(name, "x-forwarded-for")) {
      append_list(head_.forwarded_for, head_.has_forwarded_for, value);
    } else if (f == bhttp::field::forwarded) {
      append_list(head_.forwarded, head_.has_forwarded, value);
    } else if (f == bhttp::field::expect && beast::iequals(value, "100-continue")) {
      head_.expect_continue = true;
    }
  }
  // A list header sent several times is one list (RFC 9110 5.3): the client-address walk
  // must see the last occurrence's elements last, so a forged first copy cannot hide them.
  static void append_list(std::string& to, bool& has, beast::string_view value) {
    if (has) to += ", ";
    to.append(value.data(), value.size());
    has = true;
  }
  void on_header_impl(error_code& ec) override {
    header_done_ = true;
    if (head_.transfer_encodings == 0) return;
    if (head_.transfer_encodings > 1) {
      head_.refusal = "Transfer-Encoding is given more than once";
    } else if (head_.has_content_length) {
      head_.refusal = "both Transfer-Encoding and Content-Length are given";
    } else if (head_.version < 11) {
      head_.refusal = "Transfer-Encoding in an HTTP/1.0 request";
    } else if (!beast::iequals(trim(head_.transfer_encoding), "chunked")) {
      head_.refusal = "the only transfer coding accepted is 'chunked'";
    } else {
      return;
    }
    ec = bhttp::error::bad_transfer_encoding;
  }
  static beast::string_view trim(beast::string_view v) {
    while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
    while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
    return v;
  }
  void on_body_init_impl(const boost::optional<std::uint64_t>& length, error_code&) override {
    if (length) head_.body.reserve(static_cast<size_t>(*length));
  }
  size_t on_body_impl(beast::string_view body, error_code&) override {
    head_.body.append(body.data(), body.size());
    return body.size();
  }
  void on_chunk_header_impl(std::uint64_t, beast::string_view extensions, error_code& ec) override {
    extension_bytes_ += extensions.size();
    if (extension_bytes_ > max_header_bytes_) {
      head_.refusal = "the chunk extensions exceed limits.max_header_bytes";
      ec = bhttp::error::header_limit;
    }
  }
  size_t on_chunk_body_impl(std::uint64_t, beast::string_view body, error_code&) override {
    head_.body.append(body.data(), body.size());
    return body.size();
  }
  void on_finish_impl(error_code&) override {}

  RequestHead& head_;
  std::string_view key_header_name_;
  size_t max_header_bytes_;
  bool header_done_ = false;
  size_t trailer_bytes_ = 0, extension_bytes_ = 0;
};

// "Date" header value, recomputed at most once per second per thread.
std::string_view http_date() {
  thread_local std::time_t cached_at = 0;
  thread_local char buf[64] = {};
  const std::time_t now = std::time(nullptr);
  if (now != cached_at) {
    std::tm tm{};
    gmtime_r(&now, &tm);
    std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    cached_at = now;
  }
  return buf;
}

class Connection;

// Open API connections per client address (limits.max_connections_per_client). Accepts run
// on the control thread and closes on the workers: one mutex, taken once per open and close.
// Every API connection is counted (even with the cap off), so a reload that turns the cap on
// sees the connections already open.
class ConnectionTable {
 public:
  bool try_add(const std::string& address, size_t cap) {
    std::lock_guard lock(mu_);
    size_t& n = counts_[address];
    if (cap != 0 && n >= cap) return false;  // n > 0 here: the entry existed
    ++n;
    return true;
  }
  void release(const std::string& address) {
    std::lock_guard lock(mu_);
    auto it = counts_.find(address);
    if (it != counts_.end() && --it->second == 0) counts_.erase(it);
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, size_t> counts_;
};

// Connections the admin listener holds at most: outside limits.max_connections, so a flood on
// the API port never locks the operator out, yet bounded itself.
constexpr int64_t kAdminMaxConnections = 64;

struct Shared {
  HttpApi* api = nullptr;
  Metrics* metrics = nullptr;
  ConnectionTable* per_client = nullptr;
  std::atomic<int64_t>* admin_open = nullptr;
};

class Worker {
 public:
  explicit Worker(Shared shared) : shared_(shared) {}

  void start() {
    arm_sweep();
    thread_ = std::thread([this] { ioc_.run(); });
  }
  void drain();
  void stop() { ioc_.stop(); }
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  asio::io_context& ioc() { return ioc_; }
  Shared& shared() { return shared_; }
  HttpApi::ThreadContext& tc() { return tc_; }
  bool draining() const { return draining_; }
  std::unordered_set<Connection*>& connections() { return connections_; }

 private:
  void arm_sweep();

  Shared shared_;
  HttpApi::ThreadContext tc_;
  bool draining_ = false;
  // Declared before ioc_ so it outlives the handlers (and connections) the io_context
  // destroys when it is torn down.
  std::unordered_set<Connection*> connections_;
  asio::io_context ioc_{1};
  asio::steady_timer sweep_{ioc_};
  std::thread thread_;
};

class Connection final : public std::enable_shared_from_this<Connection>,
                         public HttpApi::Exchange {
 public:
  // `listener`: RequestView::listener; `address` is the peer's; `admin`: accepted on
  // admin_listen (counted apart, see Listener).
  Connection(Worker& worker, tcp::socket socket, uint8_t listener, std::string address, bool admin)
      : w_(worker), sock_(std::move(socket)), listener_(listener), peer_(std::move(address)), admin_(admin) {
    w_.connections().insert(this);
  }
  ~Connection() override {
    w_.connections().erase(this);
    if (admin_) {
      w_.shared().admin_open->fetch_sub(1, std::memory_order_relaxed);
    } else {
      w_.shared().per_client->release(peer_);
      w_.shared().metrics->connection_closed();
    }
  }

  void start() {
    error_code ec;
    sock_.set_option(tcp::no_delay(true), ec);
    wait_for_request();
  }

  // Called by the worker's sweep.
  void check_deadline(SteadyClock::time_point now) {
    if (state_ == State::kHandling || state_ == State::kClosed) return;
    if (now < deadline_) return;
    if (!got_byte_) w_.shared().metrics->connection_first_byte_timeout();
    close();
  }
  // Called when the server starts draining: an idle connection is closed now, a busy one after
  // its current answer.
  void on_drain() {
    if (state_ == State::kIdle) close();
  }

  // The decision service answered on a store thread: hand the rendering back to this
  // connection's worker. `keepalive_` was set before the decision started and is not touched
  // by the worker until this handler runs.
  void resume() override {
    asio::post(sock_.get_executor(), [self = keepalive_] {
      self->keepalive_.reset();
      self->w_.shared().api->complete(*self, self->resp_);
      self->send_response();
    });
  }

 private:
  enum class State : uint8_t { kIdle, kReading, kHandling, kWriting, kClosed };

  const Config& config() { return *w_.shared().api->snapshot(w_.tc()).config; }

  void close() {
    if (state_ == State::kClosed) return;
    state_ = State::kClosed;
    error_code ec;
    sock_.shutdown(tcp::socket::shutdown_both, ec);
    sock_.close(ec);
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
    const LimitsConfig& limits = config().limits;
    deadline_ = SteadyClock::now() +
                (got_byte_ ? limits.idle_timeout : std::min(limits.first_byte_timeout, limits.idle_timeout));
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
    const Config& cfg = config();
    state_ = State::kReading;
    deadline_ = SteadyClock::now() + cfg.limits.request_timeout;
    head_.clear();
    key_header_name_ = cfg.forward_auth_key_header;
    parser_.emplace(head_, key_header_name_, cfg.limits.max_header_bytes);
    parser_->header_limit(static_cast<std::uint32_t>(cfg.limits.max_header_bytes));
    parser_->body_limit(cfg.limits.max_body_bytes);
    read_head();
  }

  // The head is screened (scan_request_head) before Beast parses it, so a bare LF, obs-fold or
  // control character is refused even where Beast would accept it; Beast then parses the
  // whole head in one put().
  void read_head() {
    const std::string_view have(static_cast<const char*>(buf_.data().data()), buf_.size());
    const HeadScan scan = scan_request_head(have);
    if (scan.state == HeadScan::State::kMalformed) {
      head_.refusal = scan.reason;
      return on_read_error(bhttp::error::bad_field);
    }
    if (scan.state == HeadScan::State::kNeedMore) {
      if (have.size() >= config().limits.max_header_bytes || buf_.size() == buf_.max_size()) {
        return on_read_error(bhttp::error::header_limit);
      }
      const size_t room = std::min<size_t>(4096, buf_.max_size() - buf_.size());
      sock_.async_read_some(buf_.prepare(room), [self = shared_from_this()](error_code ec, size_t n) {
        if (ec) return self->on_read_error(ec == asio::error::eof && self->buf_.size() > 0 ? bhttp::error::partial_message : ec);
        self->buf_.commit(n);
        self->read_head();
      });
      return;
    }
    error_code ec;
    const size_t used = parser_->put(asio::buffer(have.data(), scan.length), ec);
    buf_.consume(used);
    if (!ec && !parser_->is_header_done()) ec = bhttp::error::bad_field;  // cannot happen: the head was whole
    on_header(ec);
  }

  void on_header(error_code ec) {
    if (ec) return on_read_error(ec);
    if (parser_->is_done()) return on_request();
    if (head_.expect_continue) {
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

  void read_body() {
    bhttp::async_read(sock_, buf_, *parser_, [self = shared_from_this()](error_code ec, size_t) {
      if (ec) return self->on_read_error(ec);
      self->on_request();
    });
  }

  void on_read_error(error_code ec) {
    if (state_ == State::kClosed) return;
    if (ec == bhttp::error::end_of_stream || ec == asio::error::eof ||
        ec == asio::error::connection_reset || ec == asio::error::operation_aborted ||
        ec == bhttp::error::partial_message) {
      close();
      return;
    }
    // The request cannot be understood: answer and close (the stream position is lost).
    keep_alive_ = false;
    head_only_ = false;
    endpoint_ = Endpoint::kOther;
    if (ec == bhttp::error::body_limit) {
      http::render_error(413, "body_too_large",
                         "the request body exceeds limits.max_body_bytes (" +
                             std::to_string(config().limits.max_body_bytes) + ")",
                         resp_);
    } else if (ec == bhttp::error::header_limit) {
      http::render_error(431, "headers_too_large",
                         std::string(head_.refusal.empty() ? "the request header exceeds limits.max_header_bytes"
                                                           : head_.refusal) +
                             " (" + std::to_string(config().limits.max_header_bytes) + ")",
                         resp_);
    } else {
      http::render_error(400, "bad_http",
                         "malformed HTTP request: " +
                             (head_.refusal.empty() ? ec.message() : std::string(head_.refusal)),
                         resp_);
    }
    send_response();
  }

  void on_request() {
    state_ = State::kHandling;
    keep_alive_ = parser_->keep_alive();
    head_only_ = head_.method == Method::kHead;
    RequestView view;
    view.method = head_.method;
    view.target = head_.target;
    view.body = head_.body;
    view.authorization = head_.has_authorization ? &head_.authorization : nullptr;
    view.forwarded_for = head_.has_forwarded_for ? &head_.forwarded_for : nullptr;
    view.forwarded = head_.has_forwarded ? &head_.forwarded : nullptr;
    view.key_header = head_.has_key_header ? &head_.key_header : nullptr;
    view.peer = peer_;
    view.listener = listener_;
    view.admin_listener = admin_;
    endpoint_ = Endpoint::kOther;
    keepalive_ = shared_from_this();  // until the answer is rendered (see resume())
    if (w_.shared().api->handle(view, w_.tc(), resp_, *this, endpoint_)) {
      keepalive_.reset();
      send_response();
    }
  }

  void send_response() {
    if (state_ == State::kClosed) return;
    w_.shared().metrics->count_request(endpoint_, resp_.status);
    if (w_.draining()) keep_alive_ = false;
    out_.clear();
    out_ += head_.version == 10 ? "HTTP/1.0 " : "HTTP/1.1 ";
    out_ += std::to_string(resp_.status);
    out_ += ' ';
    out_ += http::reason_phrase(resp_.status);
    out_ += "\r\nDate: ";
    out_ += http_date();
    for (const http::Field& f : resp_.fields) {
      out_ += "\r\n";
      out_ += f.name;
      out_ += ": ";
      out_ += f.value;
    }
    out_ += "\r\nContent-Type: ";
    out_ += resp_.content_type;
    out_ += "\r\nContent-Length: ";
    out_ += std::to_string(resp_.body.size());
    if (!keep_alive_) out_ += "\r\nConnection: close";
    else if (head_.version == 10) out_ += "\r\nConnection: keep-alive";
    out_ += "\r\n\r\n";
    if (!head_only_) out_ += resp_.body;
    state_ = State::kWriting;
    deadline_ = SteadyClock::now() + config().limits.request_timeout;
    asio::async_write(sock_, asio::buffer(out_), [self = shared_from_this()](error_code ec, size_t) {
      if (ec || !self->keep_alive_) return self->close();
      self->wait_for_request();
    });
  }

  Worker& w_;
  tcp::socket sock_;
  uint8_t listener_;  // RequestView::listener
  beast::flat_buffer buf_{64 * 1024};
  RequestHead head_;
  std::string key_header_name_;
  std::optional<RequestParser> parser_;
  http::Response resp_;
  std::string out_;
  const std::string peer_;
  const bool admin_;
  bool got_byte_ = false;
  State state_ = State::kIdle;
  SteadyClock::time_point deadline_{};
  bool keep_alive_ = true;
  bool head_only_ = false;
  Endpoint endpoint_ = Endpoint::kOther;
  std::shared_ptr<Connection> keepalive_;  // set while a decision is in flight
};

void Worker::arm_sweep() {
  sweep_.expires_after(std::chrono::milliseconds(250));
  sweep_.async_wait([this](error_code ec) {
    if (ec) return;
    const auto now = SteadyClock::now();
    // Copy: check_deadline() only closes sockets (handlers run later), but keep the loop
    // independent of that.
    std::vector<Connection*> conns(connections_.begin(), connections_.end());
    for (Connection* c : conns) c->check_deadline(now);
    if (draining_ && connections_.empty()) return;  // lets run() return
    arm_sweep();
  });
}

void Worker::drain() {
  asio::post(ioc_, [this] {
    draining_ = true;
    std::vector<Connection*> conns(connections_.begin(), connections_.end());
    for (Connection* c : conns) c->on_drain();
  });
}

class Listener {
 public:
  // `admin`: the admin listener (admin_listen): its connections are counted apart from the
  // API's, up to kAdminMaxConnections, and serve the operator endpoints only.
  Listener(asio::io_context& ioc, std::vector<std::unique_ptr<Worker>>& workers, Shared shared,
           uint8_t role = 0, bool admin = false)
      : acceptor_(ioc), retry_(ioc), workers_(workers), shared_(shared), role_(role), admin_(admin) {}

  Status open(const ListenAddress& addr) {
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
  tcp::endpoint local_endpoint() const {
    error_code ec;
    return acceptor_.local_endpoint(ec);
  }
  void start() { accept(); }
  void close() {
    error_code ec;
    acceptor_.close(ec);
    retry_.cancel();
  }

 private:
  void accept() {
    Worker& w = *workers_[next_++ % workers_.size()];
    acceptor_.async_accept(w.ioc(), [this, &w](error_code ec, tcp::socket sock) {
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
      std::string address = rec ? std::string("unknown") : peer.address().to_string();
      if (admit(address)) {
        asio::post(w.ioc(), [&w, s = std::move(sock), role = role_, a = std::move(address), admin = admin_]() mutable {
          std::make_shared<Connection>(w, std::move(s), role, std::move(a), admin)->start();
        });
      } else {
        error_code cec;
        sock.close(cec);
      }
      accept();
    });
  }

  // Counts a new connection in, or refuses it (counted in the metrics) when a cap is reached:
  // the global limits.max_connections, then the per-address cap; the admin listener's own.
  bool admit(const std::string& address) {
    if (admin_) {
      if (shared_.admin_open->load(std::memory_order_relaxed) >= kAdminMaxConnections) return false;
      shared_.admin_open->fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    const LimitsConfig& limits = shared_.api->config()->limits;
    if (shared_.metrics->open_connections() >= static_cast<int64_t>(limits.max_connections)) {
      shared_.metrics->connection_rejected();
      return false;
    }
    if (!shared_.per_client->try_add(address, limits.max_connections_per_client)) {
      shared_.metrics->connection_rejected_per_client();
      return false;
    }
    shared_.metrics->connection_opened();
    return true;
  }

  tcp::acceptor acceptor_;
  asio::steady_timer retry_;
  std::vector<std::unique_ptr<Worker>>& workers_;
  Shared shared_;
  uint8_t role_;
  const bool admin_;
  size_t next_ = 0;
};

std::string endpoint_text(const tcp::endpoint& ep) {
  std::string where = ep.address().is_v6() ? "[" + ep.address().to_string() + "]" : ep.address().to_string();
  return where + ":" + std::to_string(ep.port());
}

// --envoy-env: ratelimitd's Config for envoyproxy/ratelimit's settings (the listener of HOST:PORT,
// the store of BACKEND_TYPE/REDIS_*, room for /json bodies of 64 descriptors).
Config envoy_config(const rls::EnvoyStartup& e) {
  Config c;
  c.source = e.config_directory;
  c.listen = ListenAddress{e.settings.host, e.settings.port};
  if (e.settings.backend == rls::Backend::kRedis) {
    c.store.type = StoreType::kRedis;
    c.store.url = e.store;
    c.store.connections = static_cast<size_t>(e.settings.redis_pool_size);
  }
  c.limits.max_body_bytes = 64 * 1024;
  return c;
}

// Applies --log-level/--log-format, else (with --envoy-env) LOG_LEVEL/LOG_FORMAT, else the
// defaults. The environment values were validated by parse_envoy_env.
void apply_log_options(const ServerOptions& options, const rls::EnvoySettings* env) {
  LogLevel level = LogLevel::kInfo;
  LogFormat format = LogFormat::kText;
  if (env != nullptr) {
    level = parse_log_level(env->log_level).value_or(LogLevel::kWarn);
    format = parse_log_format(env->log_format).value_or(LogFormat::kText);
  }
  set_log_options(options.log_level.value_or(level), options.log_format.value_or(format));
}

std::string store_description(const StoreConfig& s) {
  if (s.type == StoreType::kMemory) return "memory (max_keys " + std::to_string(s.max_keys) + ")";
  // The URL may carry a password: show only what follows '@'.
  const size_t at = s.url.rfind('@');
  const size_t scheme_end = s.url.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : s.url.substr(0, scheme_end + 3);
  return "redis " + (at == std::string::npos ? s.url : scheme + "…@" + s.url.substr(at + 1));
}

}  // namespace

namespace {
int serve(const ServerOptions& options, std::shared_ptr<const Config> config,
          rls::EnvoyStartup* envoy);
}  // namespace
int run_envoy_server(const ServerOptions& options);

int run_server(const ServerOptions& options) {
  std::signal(SIGPIPE, SIG_IGN);
  if (options.envoy_env) return run_envoy_server(options);
  apply_log_options(options, nullptr);
  auto loaded = load_config(options.config_path);
  if (!loaded) {
    std::fprintf(stderr, "ratelimitd: %s\n", loaded.status().message().c_str());
    return kExitConfig;
  }
  if (Status s = apply_overrides(*loaded, options.overrides); !s.is_ok()) {
    std::fprintf(stderr, "ratelimitd: %s\n", s.message().c_str());
    return kExitConfig;
  }
  auto config = std::make_shared<const Config>(std::move(*loaded));
  if (options.check_only) {
    std::string rules;
    if (config->domains) rules = ", " + std::to_string(config->domains->rule_count()) + " descriptor rules";
    std::fprintf(stderr, "ratelimitd: %s: OK (%zu policies%s)\n", options.config_path.c_str(),
                 config->policies.size(), rules.c_str());
    if (!options.check_connect) return kExitOk;
    const std::string store = store_description(config->store);
    auto probed = probe_store(config->store, kCheckConnectBound);
    if (!probed) {
      std::fprintf(stderr, "ratelimitd: --connect: store %s %s\n", store.c_str(), probed.status().message().c_str());
      return probed.status().code() == StatusCode::kInvalidArgument ? kExitConfig : kExitRuntime;
    }
    std::fprintf(stderr, "ratelimitd: --connect: store %s OK (%s)\n", store.c_str(), probed->c_str());
    return kExitOk;
  }

  return serve(options, std::move(config), nullptr);
}

int run_envoy_server(const ServerOptions& options) {
  auto prepared = rls::prepare_envoy_env(rls::process_environment());
  if (!prepared) {
    std::fprintf(stderr, "ratelimitd: %s\n", prepared.status().message().c_str());
    return kExitConfig;
  }
  apply_log_options(options, &prepared->settings);
  // envoyproxy/ratelimit logs its start-up at warning level, so it shows with LOG_LEVEL=WARN
  // (the default); ignored settings are named the same way.
  for (const std::string& n : prepared->settings.notices) log_line(LogLevel::kWarn, n);
  auto config = std::make_shared<const Config>(envoy_config(*prepared));
  return serve(options, std::move(config), &*prepared);
}

namespace {

// The running daemon: `envoy` non-null for --envoy-env (envoyproxy/ratelimit's endpoints on
// their listeners, the watched configuration directory), else the native API of `config`.
int serve(const ServerOptions& options, std::shared_ptr<const Config> config,
          rls::EnvoyStartup* envoy) {
  // Declared first so they are destroyed last: the store's last completions may still post
  // to the workers' io_contexts while it is torn down.
  std::vector<std::unique_ptr<Worker>> workers;
  Metrics metrics;
  auto opened = open_store(config->store, metrics);
  if (!opened) {
    log_line("error", "cannot open the store: " + opened.status().message());
    return opened.status().code() == StatusCode::kInvalidArgument ? kExitConfig : kExitRuntime;
  }
  service::DecisionService decisions(opened->store, &metrics);
  HttpApi api(decisions, metrics, config);
  api.set_readiness(opened->ready);
  ConnectionTable per_client;
  std::atomic<int64_t> admin_open{0};
  Shared shared{&api, &metrics, &per_client, &admin_open};

  // --envoy-env: ShouldRateLimit on the decision service, its statistics on /metrics.
  std::optional<rls::RuleStats> rule_stats;
  std::optional<rls::RateLimitService> rls_service;
  std::optional<EnvoyFront> front;
  if (envoy != nullptr) {
    rule_stats.emplace();
    metrics.add_extra([&rule_stats](std::string& out) { rule_stats->render(out); });
    rls_service.emplace(decisions, *envoy->rules, rls::ServiceOptions::from(envoy->settings),
                        *rule_stats, metrics.policy("envoy"));
    front.emplace(*rls_service, metrics, api, envoy->settings.prometheus_path);
    api.set_envoy(&*front);
    metrics.set_config_generation(envoy->rules->generation());
  }

  unsigned threads = config->threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < threads; ++i) workers.push_back(std::make_unique<Worker>(shared));

  asio::io_context control(1);
  // The listeners: the API's (HOST:PORT with --envoy-env), then the debug and Prometheus ones.
  struct Listening {
    std::unique_ptr<Listener> listener;
    std::string what, where;
  };
  std::vector<Listening> listening;
  auto open_listener = [&](const ListenAddress& addr, uint8_t role, std::string what, bool admin = false) -> Status {
    auto l = std::make_unique<Listener>(control, workers, shared, role, admin);
    if (Status s = l->open(addr); !s.is_ok()) return s;
    const std::string where = endpoint_text(l->local_endpoint());
    listening.push_back({std::move(l), std::move(what), where});
    return {};
  };
  Status opened_listeners = open_listener(config->listen, EnvoyFront::kMain, "HTTP");
  if (opened_listeners.is_ok() && envoy != nullptr) {
    const rls::EnvoySettings& e = envoy->settings;
    opened_listeners = open_listener({e.debug_host, e.debug_port}, EnvoyFront::kDebug, "debug");
    if (opened_listeners.is_ok() && e.use_prometheus) {
      opened_listeners = open_listener({e.prometheus_host, e.prometheus_port}, EnvoyFront::kPrometheus,
                                       "Prometheus");
    }
  }
  // admin_listen: the operator endpoints, outside the API listener's connection caps.
  if (opened_listeners.is_ok() && config->admin_listen) {
    opened_listeners = open_listener(*config->admin_listen, EnvoyFront::kMain, "admin", true);
    if (!opened_listeners.is_ok()) opened_listeners = Status::unavailable("admin_listen: " + opened_listeners.message());
  }
  if (!opened_listeners.is_ok()) {
    log_line("error", opened_listeners.message());
    return kExitRuntime;
  }
  // Envoy's rate-limit API: beside the HTTP API on the same store (native: grpc_listen and
  // domains), or on GRPC_HOST:GRPC_PORT over the configuration directory (--envoy-env).
  std::unique_ptr<GrpcFrontend> grpc;
  std::unique_ptr<grpc_api::GrpcServer> envoy_grpc;
  if (envoy != nullptr) {
    const rls::EnvoySettings& e = envoy->settings;
    grpc_api::GrpcServerOptions go;
    go.address = (e.grpc_host.find(':') != std::string::npos ? "[" + e.grpc_host + "]" : e.grpc_host) + ":" +
                 std::to_string(e.grpc_port);
    go.threads = threads;
    auto started = grpc_api::GrpcServer::start(go, *rls_service);
    if (!started) {
      log_line("error", "GRPC_HOST/GRPC_PORT " + go.address + ": " + started.status().message());
      return kExitRuntime;
    }
    envoy_grpc = std::move(*started);
  } else if (config->grpc_listen) {
    auto started = GrpcFrontend::start(*config, decisions, metrics, threads);
    if (!started) {
      log_line("error", "grpc_listen: " + started.status().message());
      return kExitRuntime;
    }
    grpc = std::move(*started);
  }
  const std::string where = listening.front().where;
  auto close_listeners = [&] {
    for (auto& l : listening) l.listener->close();
  };

  // Reloads: the YAML file (native), or the Envoy configuration directory (SIGHUP and the
  // watcher, from their threads: RuleSource serialises them). A refused set changes nothing.
  auto reload_rules = [&](const std::string& why, bool only_if_changed) {
    const rls::ReloadResult r = envoy->rules->reload(only_if_changed);
    if (r.status.is_ok() && !r.changed && only_if_changed) return;  // the same bytes
    metrics.record_reload(r.status.is_ok(), static_cast<int64_t>(std::time(nullptr)));
    if (!r.status.is_ok()) {
      log_line(LogLevel::kError, why + ": configuration refused, generation " +
                                     std::to_string(r.generation) + " keeps serving: " + r.status.message());
      return;
    }
    rls_service->refresh();
    metrics.set_config_generation(r.generation);
    log_line(LogLevel::kInfo, why + ": configuration reloaded, generation " + std::to_string(r.generation) +
                                  ", " + std::to_string(envoy->rules->current()->rule_count()) + " rules");
  };

  asio::signal_set signals(control, SIGINT, SIGTERM, SIGHUP);
  asio::steady_timer grace(control);
  bool stopping = false;
  std::function<void()> wait_signal = [&] {
    signals.async_wait([&](error_code ec, int sig) {
      if (ec) return;
      if (sig == SIGHUP) {
        systemd::notify_reloading();
        if (envoy != nullptr) {
          reload_rules("SIGHUP", false);
        } else {
          log_line("info", "SIGHUP: reloading " + options.config_path);
          Status s = api.reload(options.config_path, options.overrides);
          if (s.is_ok()) {
            auto c = api.config();
            if (grpc) grpc->reload(*c);
            log_line("info", "reload ok: generation " + std::to_string(api.generation()) +
                                 ", " + std::to_string(c->policies.size()) + " policies");
          } else {
            log_line("error", "reload failed, keeping the running configuration: " + s.message());
          }
        }
        systemd::notify_ready("listening on " + where);  // the old or the new configuration
        wait_signal();
        return;
      }
      if (stopping) {  // a second signal: stop now
        log_line("warn", "second signal: stopping without waiting for requests in flight");
        for (auto& w : workers) w->stop();
        return;
      }
      stopping = true;
      systemd::notify_stopping();
      log_line("info", std::string(sig == SIGTERM ? "SIGTERM" : "SIGINT") + ": draining connections");
      close_listeners();
      api.set_draining();
      if (grpc) grpc->drain();
      if (envoy_grpc) envoy_grpc->drain();
      for (auto& w : workers) w->drain();
      const auto limit = std::chrono::duration_cast<std::chrono::milliseconds>(config->limits.request_timeout) + std::chrono::seconds(2);
      grace.expires_after(limit);
      grace.async_wait([&](error_code tec) {
        if (tec) return;
        log_line("warn", "grace period over: stopping the remaining connections");
        for (auto& w : workers) w->stop();
      });
      wait_signal();
    });
  };
  wait_signal();

  // The store-outage log (outage.h): a poll, so an outage is two lines whatever the traffic.
  asio::steady_timer outage_timer(control);
  OutageWatch outage;
  // Set on the control thread once every worker has finished. cancel() cannot stop a poll whose
  // timer already expired (its handler is queued with success), and that handler would arm the
  // next poll, keeping control.run() from ever returning: a daemon that never exits on SIGTERM.
  bool workers_done = false;
  std::function<void()> watch_store = [&] {
    outage_timer.expires_after(std::chrono::milliseconds(500));
    outage_timer.async_wait([&](error_code ec) {
      if (ec || workers_done) return;
      const Status ready = opened->ready ? opened->ready() : Status();
      if (auto line = outage.observe(ready, metrics.totals(), std::chrono::steady_clock::now())) {
        log_line("warn", *line);
      }
      watch_store();
    });
  };
  watch_store();

  // Declared after everything its callback touches, so it stops (joins) first.
  std::unique_ptr<rls::DirectoryWatcher> watcher;
  if (envoy != nullptr) {
    auto w = rls::DirectoryWatcher::start(envoy->watch_paths,
                                          [&reload_rules] { reload_rules("configuration directory changed", true); });
    if (!w) {
      log_line("error", "cannot watch " + envoy->config_directory + ": " + w.status().message());
      return kExitRuntime;
    }
    watcher = std::move(*w);
  }

  for (auto& w : workers) w->start();
  for (auto& l : listening) l.listener->start();
  if (envoy != nullptr) {
    for (const auto& l : listening) log_line(LogLevel::kWarn, "listening for " + l.what + " on " + l.where);
    const rls::EnvoySettings& e = envoy->settings;
    const std::string gh = e.grpc_host.find(':') != std::string::npos ? "[" + e.grpc_host + "]" : e.grpc_host;
    log_line(LogLevel::kWarn, "listening for gRPC on " + gh + ":" + std::to_string(envoy_grpc->port()));
    log_line(LogLevel::kWarn, "ratelimitd --envoy-env serving " +
                                  std::to_string(envoy->rules->current()->rule_count()) + " rules from " +
                                  envoy->config_directory + " (" + std::to_string(threads) +
                                  " threads, store " + store_description(config->store) + ")");
  } else {
    for (const auto& l : listening) {
      if (l.what == "admin") log_line("info", "admin listener on " + l.where + " (/healthz, /readyz, /metrics, /v1/reset)");
    }
    log_line("info", "ratelimitd listening on " + where + " (" + std::to_string(threads) +
                         " threads, store " + store_description(config->store) + ", " +
                         std::to_string(config->policies.size()) + " policies, admin " +
                         (config->admin_token ? "enabled" : "disabled") + ")");
    if (grpc) {
      log_line("info", "grpc_listen " + grpc->address() + ": Envoy's rate-limit API (" +
                           std::to_string(config->domains->rule_count()) + " descriptor rules)");
    }
  }
  systemd::notify_ready("listening on " + where);

  // The control loop ends once every worker has finished draining.
  std::thread joiner([&] {
    for (auto& w : workers) w->join();
    asio::post(control, [&] {
      error_code ec;
      workers_done = true;
      grace.cancel();
      outage_timer.cancel();
      signals.cancel(ec);
      close_listeners();
    });
  });
  control.run();
  joiner.join();
  if (grpc) grpc->shutdown(std::chrono::milliseconds(2000));
  if (envoy_grpc) envoy_grpc->shutdown(std::chrono::milliseconds(2000));
  log_line("info", "ratelimitd stopped");
  return kExitOk;
}

}  // namespace

}  // namespace ratelimit::server
