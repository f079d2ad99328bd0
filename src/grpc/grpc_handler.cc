// grpc_handler.cc — the per-connection gRPC handler (see grpc_handler.h). Each stream gets a
// Call object from the handler's pool: the rls::Call of a ShouldRateLimit, its message reader
// and its arena. A Call whose stream closed while the store still decides is kept until the
// store's answer comes back, then returned to the pool.
#include "grpc_handler.h"

#include <google/protobuf/arena.h>

#include <boost/asio/post.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "grpc/health/v1/health.pb.h"
#include "grpc_wire.h"
#include "reflection.h"
#include "rlqs_stream.h"
#include "rls_proto.h"

namespace ratelimit::grpc_api {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using SteadyClock = std::chrono::steady_clock;

constexpr std::string_view kShouldRateLimitPath = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
constexpr std::string_view kHealthCheckPath = "/grpc.health.v1.Health/Check";
constexpr std::string_view kHealthWatchPath = "/grpc.health.v1.Health/Watch";
constexpr std::string_view kRlsServiceName = "envoy.service.ratelimit.v3.RateLimitService";
constexpr std::string_view kRlqsServiceName = "envoy.service.rate_limit_quota.v3.RateLimitQuotaService";
constexpr std::string_view kRlqsPath = "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas";

enum class Method : uint8_t { kShouldRateLimit, kCheck, kWatch, kReflection, kRlqs };

std::optional<Method> route(std::string_view path) {
  if (path == kShouldRateLimitPath) return Method::kShouldRateLimit;
  if (path == kHealthCheckPath) return Method::kCheck;
  if (path == kHealthWatchPath) return Method::kWatch;
  if (path == kReflectionPath) return Method::kReflection;
  if (path == kRlqsPath) return Method::kRlqs;
  return std::nullopt;
}

class Handler;

// One stream's call. Reused across streams of its connection.
struct Call final : rls::Call {
  Handler* owner = nullptr;
  int32_t id = 0;
  Method method = Method::kShouldRateLimit;
  std::optional<SteadyClock::time_point> deadline;
  MessageReader reader;
  bool answered = false;  // the final answer (or refusal) is queued
  bool gone = false;      // the HTTP/2 stream closed
  bool awaiting = false;  // the store holds it (done() will come)
  bool started = false;   // the response head was sent (messages may follow)
  bool watch_known = true;  // Watch: the service name asked for is ours
  int last_health = -1;     // Watch: the status last sent (-1: none yet)
  std::shared_ptr<h2::Connection> hold;  // while awaiting: keeps the connection (and us) alive
  RlqsStream rlqs;  // StreamRateLimitQuotas
  alignas(16) char arena_block[4096];
  std::optional<google::protobuf::Arena> arena;

  google::protobuf::Arena& fresh_arena() {
    if (arena) {
      arena->Reset();
    } else {
      google::protobuf::ArenaOptions o;
      o.initial_block = arena_block;
      o.initial_block_size = sizeof arena_block;
      arena.emplace(o);
    }
    return *arena;
  }
  bool past_deadline() const { return deadline && SteadyClock::now() >= *deadline; }
  void done() override;
};

class Handler final : public GrpcHandler {
 public:
  Handler(GrpcContext& ctx, h2::Connection& conn, h2::Handler* fallback)
      : ctx_(ctx), conn_(conn), fallback_(fallback) {
    ctx_.connections.fetch_add(1);
  }
  ~Handler() override { ctx_.connections.fetch_sub(1); }

  void on_headers(h2::Session& s, int32_t id, const h2::RequestHead& head) override {
    if (!head.content_type.starts_with("application/grpc")) {
      if (fallback_ != nullptr) {
        fallback_streams_.insert(id);
        return fallback_->on_headers(s, id, head);
      }
      const h2::Header h[] = {{":status", "415"}, {"content-type", "text/plain"}};
      s.respond(id, h, false);
      s.send_data(id, "this port speaks gRPC: content-type must be application/grpc\n");
      s.finish(id);
      return;
    }
    Call* c = acquire(id);
    if (head.oversized) {
      return refuse(s, *c, GrpcCode::kResourceExhausted, "the request header fields are larger than the limit");
    }
    if (head.method != "POST") return refuse(s, *c, GrpcCode::kUnimplemented, "gRPC calls are POST requests");
    const std::optional<Method> m = route(head.path);
    if (!m) return refuse(s, *c, GrpcCode::kUnimplemented, "unknown method " + head.path);
    c->method = *m;
    if (c->method == Method::kRlqs) {
      if (ctx_.quota == nullptr) return refuse(s, *c, GrpcCode::kUnimplemented, "RLQS is not configured (rlqs:)");
      s.set_streaming(id);
      c->reader.reset(ctx_.rlqs_max_message_bytes);
      c->rlqs.reset(ctx_.quota->new_client());
    }
    if (!head.grpc_timeout.empty()) {
      const auto t = parse_timeout(head.grpc_timeout);
      if (!t) return refuse(s, *c, GrpcCode::kInternal, "malformed grpc-timeout: " + head.grpc_timeout);
      c->deadline = SteadyClock::now() + std::chrono::duration_cast<SteadyClock::duration>(*t);
    }
  }

  void on_data(h2::Session& s, int32_t id, std::string_view bytes) override {
    if (fallback_streams_.contains(id)) return fallback_->on_data(s, id, bytes);
    Call* c = find(id);
    if (c == nullptr || c->answered) return;
    if (!c->reader.feed(bytes)) return refuse(s, *c, c->reader.error_code(), c->reader.error().message());
    if (c->method == Method::kReflection || c->method == Method::kRlqs) {
      while (auto m = c->reader.next()) {
        if (!answer_streamed(s, *c, *m)) return;
      }
      if (c->reader.error_code() != GrpcCode::kOk) refuse(s, *c, c->reader.error_code(), c->reader.error().message());
    }
  }

  void on_end(h2::Session& s, int32_t id) override {
    if (fallback_streams_.contains(id)) return fallback_->on_end(s, id);
    Call* c = find(id);
    if (c == nullptr || c->answered) return;
    if (c->method == Method::kReflection || c->method == Method::kRlqs) {
      if (c->reader.partial() > 0) return refuse(s, *c, GrpcCode::kInternal, "the request ended inside a message");
      if (!c->started) {
        const h2::Header h[] = {{":status", "200"}, {"content-type", "application/grpc"}};
        s.respond(id, h, false);
      }
      return finish(s, *c, GrpcCode::kOk, {});
    }
    const std::optional<std::string_view> m = c->reader.next();
    if (c->reader.error_code() != GrpcCode::kOk) {
      return refuse(s, *c, c->reader.error_code(), c->reader.error().message());
    }
    if (!m || c->reader.partial() > 0) return refuse(s, *c, GrpcCode::kInternal, "a unary call needs exactly one request message");
    if (c->method == Method::kShouldRateLimit) return should_rate_limit(s, *c, *m);
    if (c->method == Method::kCheck || c->method == Method::kWatch) return health(s, *c, *m);
  }

  void on_close(h2::Session& s, int32_t id, uint32_t error_code) override {
    if (fallback_streams_.erase(id) > 0) return fallback_->on_close(s, id, error_code);
    auto it = calls_.find(id);
    if (it == calls_.end()) return;
    Call* c = it->second;
    calls_.erase(it);
    watchers_.erase(id);
    c->gone = true;
    if (!c->awaiting) release(c);
  }

  void on_serving_changed() override {
    if (watchers_.empty()) return;
    h2::Session& s = conn_.session();
    bool sent = false;
    for (int32_t id : watchers_) {
      Call* c = find(id);
      if (c == nullptr || health_status(c->watch_known) == c->last_health) continue;
      send_health(s, *c, c->watch_known);
      sent = true;
    }
    if (sent) conn_.flush_soon();
  }

  void end_watches() override {
    h2::Session& s = conn_.session();
    const std::vector<int32_t> ids(watchers_.begin(), watchers_.end());
    for (int32_t id : ids) {
      if (Call* c = find(id)) finish(s, *c, GrpcCode::kUnavailable, "the server is shutting down");
    }
    watchers_.clear();
    conn_.flush_soon();
  }

  // A store thread's answer, back on the connection's thread.
  void completed(Call* c) {
    c->awaiting = false;
    c->hold.reset();
    if (c->gone) {
      release(c);
      return;
    }
    answer_rls(conn_.session(), *c);
    conn_.flush_soon();
  }

  GrpcContext& ctx() { return ctx_; }
  h2::Connection& conn() { return conn_; }

 private:
  Call* acquire(int32_t id) {
    Call* c = nullptr;
    if (free_.empty()) {
      owned_.push_back(std::make_unique<Call>());
      c = owned_.back().get();
      c->owner = this;
    } else {
      c = free_.back();
      free_.pop_back();
    }
    c->id = id;
    c->deadline.reset();
    c->reader.reset(ctx_.max_message_bytes);
    c->answered = c->gone = c->awaiting = c->started = false;
    c->watch_known = true;
    c->last_health = -1;
    calls_[id] = c;
    return c;
  }
  void release(Call* c) { free_.push_back(c); }
  Call* find(int32_t id) {
    auto it = calls_.find(id);
    return it == calls_.end() ? nullptr : it->second;
  }

  // Trailers-only: the call fails before any message was sent.
  void refuse(h2::Session& s, Call& c, GrpcCode code, const std::string& message) {
    if (c.answered) return;
    if (c.started) return finish(s, c, code, message);
    c.answered = true;
    const std::string encoded = percent_encode(message);
    const h2::Header h[] = {{":status", "200"},
                            {"content-type", "application/grpc"},
                            {"grpc-status", code_text(code)},
                            {"grpc-message", encoded}};
    s.respond(c.id, h, true);
  }

  // After respond(..., false): the trailers end the call.
  void finish(h2::Session& s, Call& c, GrpcCode code, std::string_view message) {
    c.answered = true;
    if (message.empty()) {
      const h2::Header t[] = {{"grpc-status", code_text(code)}};
      s.finish(c.id, t);
      return;
    }
    const std::string encoded = percent_encode(message);
    const h2::Header t[] = {{"grpc-status", code_text(code)}, {"grpc-message", encoded}};
    s.finish(c.id, t);
  }

  // The response head (200, application/grpc), once per call, before its first message.
  void start_response(h2::Session& s, Call& c) {
    if (c.started) return;
    c.started = true;
    const h2::Header h[] = {{":status", "200"}, {"content-type", "application/grpc"}};
    s.respond(c.id, h, false);
  }

  // Sends one message (the response head first, when not yet sent).
  bool send_message(h2::Session& s, Call& c, const google::protobuf::MessageLite& m) {
    const size_t size = m.ByteSizeLong();
    if (size > ctx_.max_message_bytes) {
      refuse(s, c, GrpcCode::kResourceExhausted, "the response is larger than the message limit");
      return false;
    }
    start_response(s, c);
    out_.clear();
    append_prefix(out_, static_cast<uint32_t>(size));
    out_.resize(5 + size);
    m.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out_.data() + 5));
    s.send_data(c.id, out_);
    return true;
  }

  void should_rate_limit(h2::Session& s, Call& c, std::string_view body) {
    if (c.past_deadline()) {
      return refuse(s, c, GrpcCode::kDeadlineExceeded, "the call's deadline passed before it was decided");
    }
    auto* req = google::protobuf::Arena::CreateMessage<PbRequest>(&c.fresh_arena());
    if (!req->ParseFromArray(body.data(), static_cast<int>(body.size()))) {
      return refuse(s, c, GrpcCode::kInternal, "the request is not a RateLimitRequest message");
    }
    translate(*req, c.request);
    c.awaiting = true;
    c.hold = conn_.shared_from_this();
    ctx_.awaiting_store.fetch_add(1, std::memory_order_relaxed);
    if (ctx_.service->should_rate_limit(c)) {
      ctx_.awaiting_store.fetch_sub(1, std::memory_order_relaxed);
      c.awaiting = false;
      c.hold.reset();
      answer_rls(s, c);
    }
  }

  void answer_rls(h2::Session& s, Call& c) {
    if (c.past_deadline()) {
      return refuse(s, c, GrpcCode::kDeadlineExceeded, "the call's deadline passed while it was decided");
    }
    if (!c.status.is_ok()) return refuse(s, c, grpc_code(c.status), c.status.message());
    auto* resp = google::protobuf::Arena::CreateMessage<PbResponse>(&c.fresh_arena());
    render(c.response, *resp);
    if (send_message(s, c, *resp)) finish(s, c, GrpcCode::kOk, {});
  }

  void health(h2::Session& s, Call& c, std::string_view body) {
    HealthCheckRequest req;
    if (!req.ParseFromArray(body.data(), static_cast<int>(body.size()))) {
      return refuse(s, c, GrpcCode::kInternal, "the request is not a HealthCheckRequest message");
    }
    const std::string& name = req.service();
    const bool known = name.empty() || name == "ratelimit" || name == kRlsServiceName ||
                       (ctx_.quota != nullptr && name == kRlqsServiceName);
    if (c.method == Method::kCheck) {
      if (!known) return refuse(s, c, GrpcCode::kNotFound, "unknown service");
      if (send_health(s, c, true)) finish(s, c, GrpcCode::kOk, {});
      return;
    }
    c.watch_known = known;
    if (send_health(s, c, known)) watchers_.insert(c.id);
  }

  int health_status(bool known) const {
    return !known                 ? HealthCheckResponse::SERVICE_UNKNOWN
           : ctx_.serving.load() ? HealthCheckResponse::SERVING
                                 : HealthCheckResponse::NOT_SERVING;
  }

  bool send_health(h2::Session& s, Call& c, bool known) {
    HealthCheckResponse resp;
    c.last_health = health_status(known);
    resp.set_status(static_cast<HealthCheckResponse::ServingStatus>(c.last_health));
    return send_message(s, c, resp);
  }

  // One message of a streaming method (reflection, RLQS) answered with at most one message.
  bool answer_streamed(h2::Session& s, Call& c, std::string_view body) {
    const bool rlqs = c.method == Method::kRlqs;
    const Status st = rlqs ? answer_rlqs(*ctx_.quota, c.rlqs, body, reply_) : reflect(body, reply_, ctx_.quota != nullptr);
    if (!st.is_ok()) {
      refuse(s, c, grpc_code(st), st.message());
      return false;
    }
    if (reply_.size() > (rlqs ? ctx_.rlqs_max_message_bytes : ctx_.max_message_bytes * 16)) {
      refuse(s, c, GrpcCode::kResourceExhausted, "the answer is larger than the message limit");
      return false;
    }
    if (rlqs && reply_.empty()) return true;  // nothing to assign: no message
    start_response(s, c);
    out_.clear();
    append_prefix(out_, static_cast<uint32_t>(reply_.size()));
    out_ += reply_;
    s.send_data(c.id, out_);
    return true;
  }

  GrpcContext& ctx_;
  h2::Connection& conn_;
  h2::Handler* fallback_;
  std::unordered_map<int32_t, Call*> calls_;
  std::unordered_set<int32_t> watchers_;
  std::unordered_set<int32_t> fallback_streams_;
  std::vector<std::unique_ptr<Call>> owned_;
  std::vector<Call*> free_;
  std::string out_;    // one message being framed
  std::string reply_;  // a streamed method's answer before framing
};

void Call::done() {
  // From a store thread. Everything read of the call is read before the post: once posted,
  // the connection's thread may answer and reuse it.
  std::shared_ptr<h2::Connection> conn = std::move(hold);
  Handler* h = owner;
  GrpcContext& ctx = h->ctx();
  Call* self = this;
  boost::asio::post(conn->executor(), [conn, h, self] { h->completed(self); });
  ctx.awaiting_store.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace

std::unique_ptr<GrpcHandler> make_grpc_handler(GrpcContext& context, h2::Connection& connection,
                                               h2::Handler* fallback) {
  return std::make_unique<Handler>(context, connection, fallback);
}

}  // namespace ratelimit::grpc_api
