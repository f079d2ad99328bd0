// h2c.cc — an h2c connection on a worker (see h2c.h): H2cHandler is the connection's
// h2::Handler; it hands every stream to the plugged StreamProtocol (gRPC), if any, which passes
// the others to HttpStreams, which runs each one as an Exchange through the listener's
// RouteTable.
#include "h2c.h"

#include <boost/asio/post.hpp>

#include <algorithm>
#include <cctype>
#include <unordered_map>
#include <vector>

#include "metric_families.h"  // src/common: the families' names and help, data only

namespace ratelimit::server {
namespace {

constexpr uint32_t kMaxStreams = 100;

Method method_of(std::string_view m) {
  if (m == "GET") return Method::kGet;
  if (m == "HEAD") return Method::kHead;
  if (m == "POST") return Method::kPost;
  if (m == "DELETE") return Method::kDelete;
  return Method::kOther;
}

class HttpStreams;

// One stream's request and answer. Reused by the connection's later streams (with its
// handler state, so a stream allocates nothing in the steady state).
class StreamExchange final : public Exchange {
 public:
  explicit StreamExchange(HttpStreams& owner) : owner_(owner) {}
  void resume() override;

  int32_t id = 0;
  HeaderFields fields;
  std::string body;
  bool head_only = false;
  bool answered = false;  // sent, or refused by the transport
  bool pending = false;   // a handler answers later (resume())
  bool gone = false;      // the stream closed

 private:
  HttpStreams& owner_;
};

class HttpStreams final : public h2::Handler {
 public:
  HttpStreams(Worker& w, const Served& served, const ConnectionSlot& slot, h2::Connection& conn)
      : w_(w), served_(served), slot_(slot), conn_(conn) {}

  void on_headers(h2::Session& s, int32_t id, const h2::RequestHead& head) override {
    StreamExchange& ex = acquire(id);
    Request& r = ex.request;
    r.method = method_of(head.method);
    r.protocol = Protocol::kHttp2;
    r.peer = slot_.address();
    r.listener = &served_.info;
    ex.head_only = r.method == Method::kHead;
    ex.fields.clear();
    if (!head.authority.empty()) ex.fields.add("host", head.authority);
    if (!head.content_type.empty()) ex.fields.add("content-type", head.content_type);
    for (const auto& [n, v] : head.fields) ex.fields.add(n, v);
    r.headers = &ex.fields;
    target_[id] = head.path;
    if (head.oversized) {
      refuse(s, ex, 431, "headers_too_large", "the request header exceeds limits.max_header_bytes");
    }
  }

  void on_data(h2::Session& s, int32_t id, std::string_view bytes) override {
    StreamExchange* ex = find(id);
    if (ex == nullptr || ex->answered) return;
    const size_t max = w_.limits().max_body_bytes;
    if (ex->body.size() + bytes.size() > max) {
      return refuse(s, *ex, 413, "body_too_large", "the request body exceeds limits.max_body_bytes");
    }
    ex->body.append(bytes);
  }

  void on_end(h2::Session& s, int32_t id) override {
    StreamExchange* ex = find(id);
    if (ex == nullptr || ex->answered) return;
    ex->request.target = target_[id];
    ex->request.body = ex->body;
    ex->pending = true;
    if (dispatch(served_.routes, *ex)) {
      ex->pending = false;
      send(s, *ex);
    } else {
      // Answered later (resume(), posted here): the connection must outlive that answer.
      holds_.push_back(conn_.shared_from_this());
    }
  }

  // The stream closed: answered, reset by the client (RST_STREAM), or its connection gone. An
  // answer still pending reaches no one: its handler is told (a waiting request leaves its
  // queue and costs nothing, as over HTTP/1.1); its resume() still comes and is dropped.
  void on_close(h2::Session&, int32_t id, uint32_t) override {
    target_.erase(id);
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    StreamExchange* ex = it->second;
    streams_.erase(it);
    ex->gone = true;
    if (ex->pending) {
      cancel(*ex);
    } else {
      free_.push_back(ex);
    }
  }

  // A handler's answer is ready (any thread): render and send it on the connection's thread.
  void resume(StreamExchange& ex) {
    boost::asio::post(conn_.executor(), [this, &ex] {
      complete(ex);
      ex.pending = false;
      const std::shared_ptr<h2::Connection> hold = std::move(holds_.back());  // one per pending answer
      holds_.pop_back();
      if (ex.gone) {
        free_.push_back(&ex);
        return;
      }
      send(conn_.session(), ex);
      conn_.flush_soon();
    });
  }

 private:
  StreamExchange& acquire(int32_t id) {
    StreamExchange* ex = nullptr;
    if (free_.empty()) {
      owned_.push_back(std::make_unique<StreamExchange>(*this));
      ex = owned_.back().get();
    } else {
      ex = free_.back();
      free_.pop_back();
    }
    ex->id = id;
    ex->body.clear();
    ex->response.clear();
    ex->trailers.clear();
    ex->endpoint = Endpoint{};  // no route yet: a refusal (413, 431) counts unlabelled
    ex->answered = ex->pending = ex->gone = false;
    streams_[id] = ex;
    return *ex;
  }
  StreamExchange* find(int32_t id) {
    auto it = streams_.find(id);
    return it == streams_.end() ? nullptr : it->second;
  }

  void refuse(h2::Session& s, StreamExchange& ex, unsigned status, std::string_view error, std::string_view message) {
    ex.response.clear();
    ex.response.status = status;
    ex.response.body = std::string("{\"error\":\"") + std::string(error) + "\",\"message\":\"" + std::string(message) + "\"}";
    send(s, ex);
  }

  // The Response as HTTP/2: `:status`, content-type, the fields with lower-case names (HTTP/2
  // requires it), content-length, the body, then the trailers if any.
  void send(h2::Session& s, StreamExchange& ex) {
    ex.answered = true;
    const http::Response& resp = ex.response;
    w_.counters().count_request(ex.endpoint, resp.status);
    status_ = std::to_string(resp.status);
    length_ = std::to_string(resp.body.size());
    names_.resize(resp.fields.size());
    headers_.clear();
    headers_.push_back({":status", status_});
    headers_.push_back({"content-type", resp.content_type});
    headers_.push_back({"content-length", length_});
    for (size_t i = 0; i < resp.fields.size(); ++i) {
      names_[i].assign(resp.fields[i].name);
      std::transform(names_[i].begin(), names_[i].end(), names_[i].begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      headers_.push_back({names_[i], resp.fields[i].value});
    }
    const bool body = !ex.head_only && !resp.body.empty();
    if (!body && ex.trailers.empty()) {
      s.respond(ex.id, headers_, true);
      return;
    }
    s.respond(ex.id, headers_, false);
    if (body) s.send_data(ex.id, resp.body);
    trailer_names_.resize(ex.trailers.size());
    trailers_.clear();
    for (size_t i = 0; i < ex.trailers.size(); ++i) {
      trailer_names_[i].assign(ex.trailers[i].name);
      std::transform(trailer_names_[i].begin(), trailer_names_[i].end(), trailer_names_[i].begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      trailers_.push_back({trailer_names_[i], ex.trailers[i].value});
    }
    s.finish(ex.id, trailers_);
  }

  Worker& w_;
  const Served& served_;
  const ConnectionSlot& slot_;
  h2::Connection& conn_;
  std::unordered_map<int32_t, StreamExchange*> streams_;
  std::unordered_map<int32_t, std::string> target_;  // :path until the request ends
  std::vector<std::unique_ptr<StreamExchange>> owned_;
  std::vector<StreamExchange*> free_;
  // One hold of the connection per answer pending (a handler's resume() posts to it).
  std::vector<std::shared_ptr<h2::Connection>> holds_;
  // Buffers of the response being sent.
  std::string status_, length_;
  std::vector<std::string> names_, trailer_names_;
  std::vector<h2::Header> headers_, trailers_;
};

void StreamExchange::resume() { owner_.resume(*this); }

// The connection's handler: every stream to the plugged protocol (gRPC) if any, the others to
// HttpStreams; a tracked connection of its worker (drain).
class H2cHandler final : public h2::Handler, public TrackedConnection {
 public:
  H2cHandler(Worker& w, ConnectionSlot slot, const Served& served, h2::Connection& conn,
             StreamProtocols* protocols)
      : w_(w), slot_(std::move(slot)), conn_(conn), http_(w, served, slot_, conn) {
    if (protocols != nullptr) first_ = protocols->open(conn, http_);
    w_.track(*this);
  }
  ~H2cHandler() override { w_.untrack(*this); }

  h2::Handler& first() { return first_ ? static_cast<h2::Handler&>(*first_) : http_; }
  void on_headers(h2::Session& s, int32_t id, const h2::RequestHead& head) override { first().on_headers(s, id, head); }
  void on_data(h2::Session& s, int32_t id, std::string_view b) override { first().on_data(s, id, b); }
  void on_end(h2::Session& s, int32_t id) override { first().on_end(s, id); }
  void on_close(h2::Session& s, int32_t id, uint32_t code) override { first().on_close(s, id, code); }

  // The worker's sweep (every 250 ms, as for HTTP/1.1): the connection's idle, half-open and
  // write deadlines (h2::Connection::check_deadline); and the protocol's own (gRPC polls health
  // here, so a change of readiness reaches this connection's watchers within one sweep).
  void check_deadline(std::chrono::steady_clock::time_point now) override {
    conn_.check_deadline(now);
    if (first_) first_->on_sweep();
  }
  void on_drain() override {
    if (first_) first_->on_drain();
    conn_.drain();
  }

 private:
  Worker& w_;
  ConnectionSlot slot_;
  h2::Connection& conn_;
  HttpStreams http_;                        // declared before first_: outlives it
  std::unique_ptr<StreamProtocol> first_;
};

}  // namespace

void H2cTakeover::render_metrics(std::string& out) const {
  // The families are declared in the one table (metric_families.h).
  const int64_t held = flow_.held_bytes.load(std::memory_order_relaxed);
  metrics::append_family(out, metrics::kH2HeldBytes, static_cast<uint64_t>(held < 0 ? 0 : held));
  metrics::append_family(out, metrics::kH2StalledStreamsReset,
                         flow_.stalled_streams_reset.load(std::memory_order_relaxed));
  metrics::append_family(out, metrics::kH2HeldStreamsReset, flow_.held_streams_reset.load(std::memory_order_relaxed));
  metrics::append_family(out, metrics::kH2StalledConnectionsClosed,
                         flow_.stalled_connections_closed.load(std::memory_order_relaxed));
}

void H2cTakeover::adopt(Worker& worker, boost::asio::ip::tcp::socket socket, std::string_view received,
                        ConnectionSlot slot, const Served& served) {
  const ConnectionLimits& l = worker.limits();
  h2::ConnectionOptions o;
  o.limits.max_concurrent_streams = kMaxStreams;
  o.limits.max_header_bytes = static_cast<uint32_t>(l.max_header_bytes);
  o.idle_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(l.idle_timeout);
  o.request_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(l.request_timeout);
  o.first_byte_timeout = std::chrono::duration_cast<std::chrono::milliseconds>(l.first_byte_timeout);
  o.stats = &flow_;
  if (worker.draining()) return;  // the socket closes with this scope; the slot counts it out
  auto conn = std::make_shared<h2::Connection>(std::move(socket), o);
  auto handler = std::make_unique<H2cHandler>(worker, std::move(slot), served, *conn, protocols_);
  conn->start(std::move(handler), received);
}

}  // namespace ratelimit::server
