// http_api.cc — the endpoints of ratelimitd (see http_api.h and README.md (ratelimitd)).
//
// One way to the store for every store: the request becomes service Items and goes through
// DecisionService::decide, which answers inline (memory store: rendered at once, on the I/O
// thread) or later (a networked store: the connection is resumed and calls complete() on its
// own thread). Both end in render(), so the two cannot answer differently. Shadow mode, the
// all-or-nothing group and the counting are the decision service's.
#include "http_api.h"

#include <ctime>

#include "envoy_front.h"

namespace ratelimit::server {
namespace {

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

std::string_view query_of(std::string_view target) {
  const size_t q = target.find('?');
  return q == std::string_view::npos ? std::string_view{} : target.substr(q + 1);
}

void method_not_allowed(http::Response& out, std::string_view path, std::string_view allow) {
  std::string m = "use ";
  m += allow;
  m += " for ";
  m += path;
  http::render_error(405, "method_not_allowed", m, out);
  out.fields.push_back({"Allow", std::string(allow)});
}

// A store that answered an error instead of decisions (counted by the decision service).
void store_failure(const Status& s, http::Response& out) {
  if (s.code() == StatusCode::kInvalidArgument) {
    http::render_error(400, "invalid_request", s.message(), out);
    return;
  }
  http::render_error(503, "store_error", status_code_name(s.code()), out);
}

}  // namespace

bool token_matches(std::string_view presented, std::string_view expected) {
  // Time depends only on the expected token's length, never on where the first mismatch is.
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const char p = i < presented.size() ? presented[i] : '\0';
    diff = static_cast<unsigned char>(diff | (static_cast<unsigned char>(p) ^ static_cast<unsigned char>(expected[i])));
  }
  return diff == 0;
}

std::shared_ptr<const service::Snapshot> build_rules(const Config& config, Metrics& metrics) {
  auto rules = std::make_shared<service::Snapshot>();
  for (const auto& [name, pc] : config.policies) {
    rules->rules.emplace(name, service::Rule{pc.policy, pc.shadow, metrics.policy(name)});
  }
  return rules;
}

namespace {

std::shared_ptr<const Published> make_published(std::shared_ptr<const Config> config,
                                                Metrics& metrics) {
  auto rules = build_rules(*config, metrics);
  return std::make_shared<const Published>(Published{std::move(config), std::move(rules)});
}

// The admin token check of /v1/reset (and of /v1/peek with peek_requires_admin_token): true
// when the request carries "Authorization: Bearer <admin_token>"; otherwise `out` holds the
// 403 (no token configured) or 401.
bool admin_authorized(const RequestView& req, const Config& cfg, std::string_view path, http::Response& out) {
  if (!cfg.admin_token) {
    http::render_error(403, "admin_disabled", "no admin_token is configured, so " + std::string(path) + " is disabled", out);
    return false;
  }
  constexpr std::string_view kBearer = "bearer ";
  bool ok = false;
  if (req.authorization != nullptr && req.authorization->size() > kBearer.size()) {
    std::string_view a = *req.authorization;
    bool scheme = true;
    for (size_t i = 0; i < kBearer.size(); ++i) {
      char c = a[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      scheme = scheme && c == kBearer[i];
    }
    a.remove_prefix(kBearer.size());
    while (!a.empty() && a.front() == ' ') a.remove_prefix(1);
    while (!a.empty() && a.back() == ' ') a.remove_suffix(1);
    ok = scheme && token_matches(a, *cfg.admin_token);
  }
  if (!ok) {
    http::render_error(401, "unauthorized", std::string(path) + " needs 'Authorization: Bearer <admin_token>'", out);
    out.fields.push_back({"WWW-Authenticate", "Bearer realm=\"ratelimitd\""});
  }
  return ok;
}
}  // namespace

HttpApi::HttpApi(service::DecisionService& decisions, Metrics& metrics,
                 std::shared_ptr<const Config> config)
    : decisions_(decisions), metrics_(metrics), published_(make_published(std::move(config), metrics)) {
  metrics_.set_config_generation(published_.generation());
}

void HttpApi::publish(std::shared_ptr<const Config> config) {
  metrics_.set_config_generation(published_.publish(make_published(std::move(config), metrics_)));
}

Status HttpApi::reload(const std::string& path, const Overrides& overrides) {
  std::lock_guard serial(reload_mu_);
  auto finish_reload = [&](Status s) {
    metrics_.record_reload(s.is_ok(), static_cast<int64_t>(std::time(nullptr)));
    return s;
  };
  auto next = load_config(path);
  if (!next) return finish_reload(next.status());
  if (Status s = apply_overrides(*next, overrides); !s.is_ok()) return finish_reload(s);
  if (Status s = check_reloadable(*config(), *next); !s.is_ok()) return finish_reload(s);
  publish(std::make_shared<const Config>(std::move(*next)));
  return finish_reload(Status());
}

void HttpApi::error(ThreadContext& tc, http::Response& out) const {
  http::render_error(tc.error.status, tc.error.error, tc.error.message, out);
}

bool HttpApi::handle(const RequestView& req, ThreadContext& tc, http::Response& out,
                     Exchange& exchange, Endpoint& endpoint) {
  if (envoy_ != nullptr) return envoy_->handle(req, out, exchange, endpoint);
  const Published& snap = snapshot(tc);
  const std::string_view path = path_of(req.target);
  const Config& cfg = *snap.config;
  const RequestBounds bounds{cfg.limits.max_key_length, cfg.limits.max_cost};

  // The admin listener serves the operator's endpoints only.
  if (req.admin_listener && path != "/healthz" && path != "/readyz" && path != "/metrics" && path != "/v1/reset") {
    endpoint = Endpoint::kOther;
    http::render_error(404, "not_found", "the admin listener serves /healthz, /readyz, /metrics and /v1/reset only", out);
    return true;
  }
  if (path == "/v1/acquire" || path == "/v1/peek") {
    const bool peek = path == "/v1/peek";
    endpoint = peek ? Endpoint::kPeek : Endpoint::kAcquire;
    if (req.method != Method::kPost) {
      method_not_allowed(out, path, "POST");
      return true;
    }
    if (peek && cfg.peek_requires_admin_token && !admin_authorized(req, cfg, path, out)) return true;
    if (!parse_request_body(req.body, BodyKind::kDecision, bounds, tc.request, tc.error)) {
      error(tc, out);
      return true;
    }
    exchange.deny_status_ = 429;
    return decide(tc, snap, peek, out, exchange);
  }
  // Envoy's ext_authz (HTTP) appends the original request path to the configured prefix, so
  // anything below /v1/forward-auth/ is the same endpoint; the appended path is not read.
  if (path == "/v1/forward-auth" || path.starts_with("/v1/forward-auth/")) {
    // Any method: proxies differ in what they send (Traefik and Caddy: GET; others may
    // forward the original method). No body is read for the decision.
    endpoint = Endpoint::kForwardAuth;
    if (!parse_forward_auth_query(query_of(req.target), tc.request, tc.error)) {
      error(tc, out);
      return true;
    }
    if (!cfg.forward_auth_key_header.empty()) {
      if (req.key_header == nullptr) {
        http::render_error(400, "missing_key", "the request has no " + cfg.forward_auth_key_header + " header to take the key from", out);
        return true;
      }
      tc.request.key.assign(*req.key_header);
    } else {
      const std::string* chain = cfg.client_header == ClientHeader::kForwarded ? req.forwarded : req.forwarded_for;
      client_address(req.peer, chain, cfg.client_header, cfg.trusted_proxies, tc.request.key);
    }
    if (!check_key(tc.request.key, bounds, tc.error)) {
      error(tc, out);
      return true;
    }
    exchange.deny_status_ = tc.request.deny_status != 0 ? tc.request.deny_status : cfg.forward_auth_deny_status;
    return decide(tc, snap, false, out, exchange);
  }
  if (path == "/v1/reset") {
    endpoint = Endpoint::kReset;
    if (req.method != Method::kPost) {
      method_not_allowed(out, path, "POST");
      return true;
    }
    return reset(req, tc, snap, out, exchange);
  }
  if (path == "/healthz") {
    endpoint = Endpoint::kHealthz;
    if (req.method != Method::kGet && req.method != Method::kHead) {
      method_not_allowed(out, path, "GET, HEAD");
      return true;
    }
    out.clear();
    out.body = R"({"status":"ok"})";
    return true;
  }
  if (path == "/readyz") {
    // Readiness, not liveness: a load balancer takes us out while the store cannot decide or
    // the server drains; /healthz stays 200 so a supervisor does not restart a live process.
    endpoint = Endpoint::kReadyz;
    if (req.method != Method::kGet && req.method != Method::kHead) {
      method_not_allowed(out, path, "GET, HEAD");
      return true;
    }
    if (draining_.load(std::memory_order_relaxed)) {
      http::render_error(503, "draining", "the server is shutting down", out);
      return true;
    }
    if (readiness_) {
      if (const Status s = readiness_(); !s.is_ok()) {
        http::render_error(503, "store_unavailable", s.message(), out);
        return true;
      }
    }
    out.clear();
    out.body = R"({"status":"ready"})";
    return true;
  }
  if (path == "/metrics") {
    endpoint = Endpoint::kMetrics;
    if (req.method != Method::kGet && req.method != Method::kHead) {
      method_not_allowed(out, path, "GET, HEAD");
      return true;
    }
    out.clear();
    out.body = metrics_.render();
    out.content_type = "text/plain; version=0.0.4; charset=utf-8";
    return true;
  }
  endpoint = Endpoint::kOther;
  http::render_error(404, "not_found",
                     "no such endpoint (POST /v1/acquire, /v1/peek, /v1/reset; GET "
                     "/v1/forward-auth[/...], /healthz, /readyz, /metrics)",
                     out);
  return true;
}

bool HttpApi::decide(ThreadContext& tc, const Published& snap, bool peek, http::Response& out,
                     Exchange& exchange) {
  const DecisionRequest& r = tc.request;
  tc.items.clear();
  exchange.infos_.clear();
  for (size_t i = 0; i < r.policy_count; ++i) {
    const service::Rule* rule = snap.rules->find(r.policies[i]);
    if (rule == nullptr) {
      http::render_error(400, "unknown_policy", "unknown policy '" + r.policies[i] + "'", out);
      return true;
    }
    tc.items.push_back({rule, r.key, r.cost, peek ? StoreOp::Kind::kPeek : StoreOp::Kind::kAcquire});
    exchange.infos_.push_back(http::PolicyInfo::of(rule->policy));
  }
  exchange.kind_ = Exchange::Kind::kDecision;
  exchange.render_ = snap.config->render;
  // Several policies are all or nothing; peeks change nothing, so they need no group.
  const Atomicity atomicity = r.multi && !peek ? Atomicity::kAllOrNothing : Atomicity::kIndependent;
  if (decisions_.decide(*snap.rules, tc.items, atomicity, exchange)) {
    render(exchange, out);
    return true;
  }
  // Rendered later (complete()), from the infos' views into this configuration: keep it.
  exchange.hold_ = tc.cache.value;
  return false;
}

void HttpApi::render(const Exchange& exchange, http::Response& out) const {
  if (exchange.kind_ == Exchange::Kind::kEnvoy) {
    envoy_->render(exchange, out);
    return;
  }
  if (!exchange.status.is_ok()) {
    store_failure(exchange.status, out);
    return;
  }
  if (exchange.kind_ == Exchange::Kind::kReset) {
    out.clear();
    out.body = R"({"reset":true,"policy":)";
    http::append_json_string(out.body, exchange.infos_.front().name);
    out.body += '}';
    return;
  }
  http::render_decisions(exchange.decisions, exchange.infos_, out, exchange.render_);
  // Same headers and body, another status: nginx's auth_request passes only 2xx/401/403 on.
  if (out.status == 429) out.status = exchange.deny_status_;
}

void HttpApi::complete(Exchange& exchange, http::Response& out) const {
  render(exchange, out);
  exchange.hold_.reset();
}

bool HttpApi::reset(const RequestView& req, ThreadContext& tc, const Published& snap,
                    http::Response& out, Exchange& exchange) {
  const Config& cfg = *snap.config;
  if (!admin_authorized(req, cfg, "/v1/reset", out)) return true;
  const RequestBounds bounds{cfg.limits.max_key_length, cfg.limits.max_cost};
  if (!parse_request_body(req.body, BodyKind::kReset, bounds, tc.request, tc.error)) {
    error(tc, out);
    return true;
  }
  const service::Rule* rule = snap.rules->find(tc.request.policies[0]);
  if (rule == nullptr) {
    http::render_error(400, "unknown_policy", "unknown policy '" + tc.request.policies[0] + "'", out);
    return true;
  }
  exchange.kind_ = Exchange::Kind::kReset;
  exchange.infos_.clear();
  exchange.infos_.push_back(http::PolicyInfo::of(rule->policy));
  if (decisions_.reset(*rule, tc.request.key, exchange)) {
    render(exchange, out);
    return true;
  }
  exchange.hold_ = tc.cache.value;
  return false;
}

}  // namespace ratelimit::server
