// envoy_http.cc — POST /json and /rlconfig on RateLimitService (see envoy_http.h).
#include "envoy_http.h"

#include "answers.h"
#include "rls_json.h"

namespace ratelimit::server {
namespace {

// The exchange's rls::Call: its asynchronous completion resumes the exchange, whose transport
// posts to its own thread and calls JsonHandler::complete().
class JsonCall final : public ExchangeState, public rls::Call {
 public:
  explicit JsonCall(Exchange& x) : exchange_(x) {}
  void done() override { exchange_.resume(); }

 private:
  Exchange& exchange_;
};

void render(const rls::Call& call, http::Response& out) {
  out.clear();
  if (!call.status.is_ok()) {
    render_store_failure(call.status, out);
    return;
  }
  switch (call.response.overall_code) {
    case rls::Code::kOk: out.status = 200; break;
    case rls::Code::kOverLimit: out.status = 429; break;
    default: out.status = 500; break;
  }
  rls::append_rate_limit_response_json(call.response, out.body);
}

}  // namespace

bool JsonHandler::handle(Exchange& x) {
  // Any method, as envoyproxy/ratelimit's handler: the body is the request.
  JsonCall& call = x.state<JsonCall>();
  if (Status s = rls::parse_rate_limit_request_json(x.request.body, call.request); !s.is_ok()) {
    http::render_error(400, "invalid_request", s.message(), x.response);
    return true;
  }
  if (!service_.should_rate_limit(call)) return false;
  render(call, x.response);
  return true;
}

void JsonHandler::complete(Exchange& x) { render(x.state<JsonCall>(), x.response); }

bool RlconfigHandler::handle(Exchange& x) {
  render_text(x.response, 200, service_.dump());
  return true;
}

}  // namespace ratelimit::server
