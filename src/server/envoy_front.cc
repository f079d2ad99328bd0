// envoy_front.cc — envoyproxy/ratelimit's HTTP endpoints on RateLimitService (see envoy_front.h).
#include "envoy_front.h"

#include "rls_json.h"

namespace ratelimit::server {
namespace {

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

// The connection's rls::Call: its asynchronous completion resumes the connection, which posts to
// its own thread and calls HttpApi::complete() -> EnvoyFront::render().
class ExchangeCall final : public rls::Call {
 public:
  explicit ExchangeCall(HttpApi::Exchange& exchange) : exchange_(exchange) {}
  void done() override { exchange_.resume(); }

 private:
  HttpApi::Exchange& exchange_;
};

void text(http::Response& out, unsigned status, std::string body) {
  out.clear();
  out.status = status;
  out.body = std::move(body);
  out.content_type = "text/plain; charset=utf-8";
}

bool get_or_head(const RequestView& req) { return req.method == Method::kGet || req.method == Method::kHead; }

}  // namespace

EnvoyFront::EnvoyFront(rls::RateLimitService& service, Metrics& metrics, const HttpApi& api,
                       std::string prometheus_path)
    : service_(service), metrics_(metrics), api_(api), prometheus_path_(std::move(prometheus_path)) {}

bool EnvoyFront::handle(const RequestView& req, http::Response& out, HttpApi::Exchange& exchange,
                        Endpoint& endpoint) {
  const std::string_view path = path_of(req.target);
  endpoint = Endpoint::kOther;
  if (req.listener == kMain) {
    if (path == "/json") {
      // Any method, as envoyproxy/ratelimit's handler: the body is the request.
      endpoint = Endpoint::kJson;
      if (!exchange.envoy_call_) exchange.envoy_call_ = std::make_unique<ExchangeCall>(exchange);
      rls::Call& call = *exchange.envoy_call_;
      if (Status s = rls::parse_rate_limit_request_json(req.body, call.request); !s.is_ok()) {
        http::render_error(400, "invalid_request", s.message(), out);
        return true;
      }
      exchange.kind_ = HttpApi::Exchange::Kind::kEnvoy;
      if (!service_.should_rate_limit(call)) return false;
      render(exchange, out);
      return true;
    }
    if (path == "/healthcheck") {
      endpoint = Endpoint::kHealthcheck;
      if (api_.draining()) text(out, 500, "");
      else text(out, 200, "OK");
      return true;
    }
    http::render_error(404, "not_found", "no such endpoint (POST /json, GET /healthcheck)", out);
    return true;
  }
  if (req.listener == kDebug) {
    if (path == "/rlconfig") {
      endpoint = Endpoint::kRlconfig;
      text(out, 200, service_.dump());
      return true;
    }
    if (path == "/metrics" && get_or_head(req)) {
      endpoint = Endpoint::kMetrics;
      text(out, 200, metrics_.render());
      out.content_type = "text/plain; version=0.0.4; charset=utf-8";
      return true;
    }
    if (path == "/") {
      text(out, 200,
           "/metrics: Prometheus metrics\n"
           "/rlconfig: print out the currently loaded configuration for debugging\n");
      return true;
    }
    text(out, 404, "404 page not found\n");
    return true;
  }
  if (path == prometheus_path_ && get_or_head(req)) {
    endpoint = Endpoint::kMetrics;
    text(out, 200, metrics_.render());
    out.content_type = "text/plain; version=0.0.4; charset=utf-8";
    return true;
  }
  text(out, 404, "404 page not found\n");
  return true;
}

void EnvoyFront::render(const HttpApi::Exchange& exchange, http::Response& out) const {
  const rls::Call& call = *exchange.envoy_call_;
  out.clear();
  if (!call.status.is_ok()) {
    if (call.status.code() == StatusCode::kInvalidArgument) {
      http::render_error(400, "invalid_request", call.status.message(), out);
    } else {
      http::render_error(503, "store_error", status_code_name(call.status.code()), out);
    }
    return;
  }
  switch (call.response.overall_code) {
    case rls::Code::kOk: out.status = 200; break;
    case rls::Code::kOverLimit: out.status = 429; break;
    default: out.status = 500; break;
  }
  rls::append_rate_limit_response_json(call.response, out.body);
}

}  // namespace ratelimit::server
