// ops_api.cc — health, readiness and metrics handlers (see ops_api.h).
#include "ops_api.h"

namespace ratelimit::server {

bool HealthzHandler::handle(Exchange& x) {
  if (!get_or_head(x.request)) {
    method_not_allowed(x.response, x.request.path(), "GET, HEAD");
    return true;
  }
  x.response.clear();
  x.response.body = R"({"status":"ok"})";
  return true;
}

bool ReadyzHandler::handle(Exchange& x) {
  // Readiness, not liveness: a load balancer takes us out while the store cannot decide or the
  // server drains; /healthz stays 200 so a supervisor does not restart a live process.
  if (!get_or_head(x.request)) {
    method_not_allowed(x.response, x.request.path(), "GET, HEAD");
    return true;
  }
  if (state_.draining.load(std::memory_order_relaxed)) {
    http::render_error(503, "draining", "the server is shutting down", x.response);
    return true;
  }
  if (state_.store_ready) {
    if (const Status s = state_.store_ready(); !s.is_ok()) {
      http::render_error(503, "store_unavailable", s.message(), x.response);
      return true;
    }
  }
  x.response.clear();
  x.response.body = R"({"status":"ready"})";
  return true;
}

bool HealthcheckHandler::handle(Exchange& x) {
  if (state_.draining.load(std::memory_order_relaxed)) render_text(x.response, 500, "");
  else render_text(x.response, 200, "OK");
  return true;
}

bool MetricsHandler::handle(Exchange& x) {
  if (!get_or_head(x.request)) {
    if (otherwise_ != nullptr) {
      x.endpoint = Endpoint::kOther;
      return otherwise_->handle(x);
    }
    method_not_allowed(x.response, x.request.path(), "GET, HEAD");
    return true;
  }
  render_text(x.response, 200, metrics_.render());
  x.response.content_type = "text/plain; version=0.0.4; charset=utf-8";
  return true;
}

}  // namespace ratelimit::server
