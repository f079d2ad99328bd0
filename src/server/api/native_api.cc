// native_api.cc — the native decision endpoints (see native_api.h).
//
// One way to the store for every store: the request becomes service Items and goes through
// DecisionService::decide, which answers inline (memory store: rendered at once, on the I/O
// thread) or later (a networked store: the exchange is resumed and complete() renders on its
// transport's thread). Both end in the same render, so the two cannot answer differently.
#include "native_api.h"

#include <optional>
#include <vector>

#include "answers.h"
#include "client_ip.h"
#include "request.h"

namespace ratelimit::server {
namespace {

// What the native handlers keep with an exchange: the decision in flight, the snapshot it is
// decided against, and reused parse buffers.
class NativeState final : public ExchangeState, public service::Pending {
 public:
  explicit NativeState(Exchange& x) : exchange_(x) {}
  void resume() override { exchange_.resume(); }

  ConfigCell::Cache cache;  // the configuration this exchange's request uses (see top)
  DecisionRequest request;
  RequestError error;
  std::vector<service::Item> items;
  std::vector<http::PolicyInfo> infos;  // views into the rules of `cache`
  std::string chain;                    // X-Forwarded-For / Forwarded, occurrences joined
  unsigned deny_status = 429;           // forward-auth: what a denial is answered with
  http::RenderOptions render;
  std::optional<Policy> own_limit;      // the request's "limit" variant, read by the store

 private:
  Exchange& exchange_;
};

void refuse(const NativeState& st, http::Response& out) {
  http::render_error(st.error.status, st.error.error, st.error.message, out);
}

// The admin token check of /v1/reset (and of /v1/peek with peek_requires_admin_token): true when
// the request carries "Authorization: Bearer <admin_token>"; otherwise `out` holds the 403 (no
// token configured) or 401.
bool admin_authorized(const Request& req, const Config& cfg, std::string_view path, http::Response& out) {
  if (!cfg.admin_token) {
    http::render_error(403, "admin_disabled", "no admin_token is configured, so " + std::string(path) + " is disabled", out);
    return false;
  }
  constexpr std::string_view kBearer = "bearer ";
  bool ok = false;
  const std::optional<std::string_view> authorization = req.headers->first("authorization");
  if (authorization && authorization->size() > kBearer.size()) {
    std::string_view a = *authorization;
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

RequestBounds bounds_of(const Config& cfg) { return {cfg.limits.max_key_length, cfg.limits.max_cost}; }

void render_decision(const NativeState& st, http::Response& out) {
  if (!st.status.is_ok()) {
    render_store_failure(st.status, out);
    return;
  }
  http::render_decisions(st.decisions, st.infos, out, st.render);
  // Same headers and body, another status: nginx's auth_request passes only 2xx/401/403 on.
  if (out.status == 429) out.status = st.deny_status;
}

// The request's own "limit" for its one policy (own_limit_policy). False: refused, `out` holds
// the 400.
bool own_limit(NativeState& st, http::Response& out) {
  service::Item& item = st.items.front();
  st.own_limit = own_limit_policy(*item.rule, st.request.limit, out);
  if (!st.own_limit) return false;
  item.policy = &*st.own_limit;
  st.infos.front() = http::PolicyInfo{st.own_limit->name(), st.own_limit->limit(), st.own_limit->window()};
  return true;
}

// Priority classes on a rate policy (docs/throttling.md "Priority classes"): the request's class
// decides against its own limit (rule.class_policies: the same counter, a limit lowered by the
// class's headroom), so the lowest classes are refused first (priority_class says which).
// Reports take no class (they record usage; no limit applies). False: an error answer is in
// `out`. A class with headroom never waits (`budget` 0), as for leases.
bool apply_class(NativeState& st, std::string_view header, DecisionVerb verb, Micros& budget, http::Response& out) {
  service::Item& item = st.items.back();
  const service::Rule& rule = *item.rule;
  if (verb == DecisionVerb::kReport) return true;
  const auto klass = priority_class(rule, st.request.priority, header, st.request.limit != 0, out);
  if (!klass) return false;
  if (*klass == SIZE_MAX) return true;
  item.policy = &rule.class_policies[*klass];
  item.priority = static_cast<uint8_t>(*klass);
  st.infos.back() = http::PolicyInfo::of(rule.class_policies[*klass]);
  if (rule.classes[*klass].headroom > 0) budget = Micros{0};
  return true;
}

// Decides st.request's policies for its key (acquire, peek or report) against `snap`; an acquire
// on a policy with max_wait may wait (the waiting service decides; this passes the budget).
// `priority_header`: the request's RateLimit-Priority (apply_class).
bool decide(const NativeApi& api, NativeState& st, const Published& snap, DecisionVerb verb,
            std::string_view priority_header, http::Response& out) {
  const bool peek = verb == DecisionVerb::kPeek;
  const DecisionRequest& r = st.request;
  st.items.clear();
  st.infos.clear();
  Micros budget = wait_budget(r.max_wait_ms);
  for (size_t i = 0; i < r.policy_count; ++i) {
    const service::Rule* rule = snap.rules->find(r.policies[i]);
    if (rule == nullptr) {
      http::render_error(400, "unknown_policy", "unknown policy '" + r.policies[i] + "'", out);
      return true;
    }
    if (rule->policy.is_concurrency() && verb == DecisionVerb::kReport) {
      http::render_error(400, "concurrency_policy",
                         "policy '" + r.policies[i] + "' is a concurrency policy: its usage is the "
                         "leases it holds (POST /v1/leases), not reports",
                         out);
      return true;
    }
    if (rule->policy.is_concurrency() && !peek) {
      // Nothing here could ever release the unit: the lease API holds and frees it by id.
      http::render_error(400, "concurrency_policy",
                         "policy '" + r.policies[i] + "' is a concurrency policy: take a lease with "
                         "POST /v1/leases and release it with DELETE /v1/leases/{id} (acquire and "
                         "forward-auth cannot release; see docs/throttling.md)",
                         out);
      return true;
    }
    st.items.push_back({rule, r.key, r.cost,
                        peek ? StoreOp::Kind::kPeek
                             : verb == DecisionVerb::kReport ? StoreOp::Kind::kReport : StoreOp::Kind::kAcquire});
    st.infos.push_back(http::PolicyInfo::of(rule->policy));
    if (!apply_class(st, priority_header, verb, budget, out)) return true;
  }
  // One policy only: parse_request_body refuses "limit" beside "policies".
  if (r.limit != 0 && !own_limit(st, out)) return true;
  st.render = snap.config->render;
  // Several policies are all or nothing (a report to several: all recorded at once); peeks
  // change nothing, so they need no group. Only an acquire may wait.
  const Atomicity atomicity = r.multi && !peek ? Atomicity::kAllOrNothing : Atomicity::kIndependent;
  const bool now = verb != DecisionVerb::kAcquire ? api.decisions.decide(*snap.rules, st.items, atomicity, st)
                        : api.waiting.decide(*snap.rules, st.items, atomicity, budget, st);
  if (!now) return false;
  render_decision(st, out);
  return true;
}

}  // namespace

std::optional<Policy> own_limit_policy(const service::Rule& rule, int64_t limit, http::Response& out) {
  const std::string& name = rule.policy.name();
  if (rule.request_limit_max == 0) {
    http::render_error(400, "limit_not_allowed", "policy '" + name + "' takes no per-request limit "
                       "(its configuration sets no request_limit)", out);
    return std::nullopt;
  }
  if (limit < rule.request_limit_min || limit > rule.request_limit_max) {
    http::render_error(400, "invalid_limit", "limit must be between " + std::to_string(rule.request_limit_min) +
                       " and " + std::to_string(rule.request_limit_max) + " for policy '" + name +
                       "', got " + std::to_string(limit), out);
    return std::nullopt;
  }
  auto with = rule.policy.with_limit(limit);  // valid: both bounds were checked at load
  if (!with) {
    http::render_error(400, "invalid_limit", with.status().message(), out);
    return std::nullopt;
  }
  return std::move(*with);
}

std::optional<size_t> priority_class(const service::Rule& rule, std::string_view body, std::string_view header,
                                     bool own_limit, http::Response& out) {
  const std::string& policy = rule.policy.name();
  const std::string_view name = !body.empty() || rule.classes.empty() ? body : header;
  const std::string shown(name.substr(0, 32));
  if (rule.classes.empty()) {
    if (name.empty()) return SIZE_MAX;
    http::render_error(400, "unknown_priority", "policy '" + policy + "' has no priority classes (its "
                       "configuration lists no classes), got priority '" + shown + "'", out);
    return std::nullopt;
  }
  if (own_limit) {
    http::render_error(400, "invalid_request", "'limit' and a priority class both set the request's limit "
                       "on policy '" + policy + "': give one", out);
    return std::nullopt;
  }
  if (name.empty()) return rule.classes.size() - 1;
  for (size_t i = 0; i < rule.classes.size(); ++i) {
    if (rule.classes[i].name == name) return i;
  }
  std::string listed;
  for (const auto& c : rule.classes) listed += (listed.empty() ? "" : ", ") + c.name;
  http::render_error(400, "unknown_priority", "unknown priority '" + shown + "' for policy '" + policy +
                     "' (its classes, highest first: " + listed + ")", out);
  return std::nullopt;
}

bool token_matches(std::string_view presented, std::string_view expected) {
  // Time depends only on the expected token's length, never on where the first mismatch is.
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    const char p = i < presented.size() ? presented[i] : '\0';
    diff = static_cast<unsigned char>(diff | (static_cast<unsigned char>(p) ^ static_cast<unsigned char>(expected[i])));
  }
  return diff == 0;
}

bool DecisionHandler::handle(Exchange& x) {
  NativeState& st = x.state<NativeState>();
  const Published& snap = api_.config.get(st.cache);
  const Config& cfg = *snap.config;
  if (x.request.method != Method::kPost) {
    method_not_allowed(x.response, x.request.path(), "POST");
    return true;
  }
  if (verb_ == DecisionVerb::kPeek && cfg.peek_requires_admin_token &&
      !admin_authorized(x.request, cfg, x.request.path(), x.response)) {
    return true;
  }
  const BodyKind body = verb_ == DecisionVerb::kReport ? BodyKind::kReport : BodyKind::kDecision;
  if (!parse_request_body(x.request.body, body, bounds_of(cfg), st.request, st.error)) {
    refuse(st, x.response);
    return true;
  }
  st.deny_status = 429;
  return decide(api_, st, snap, verb_, x.request.headers->first("ratelimit-priority").value_or(""), x.response);
}

void DecisionHandler::complete(Exchange& x) { render_decision(x.state<NativeState>(), x.response); }

void DecisionHandler::cancel(Exchange& x) { api_.waiting.cancel(x.state<NativeState>()); }

bool ForwardAuthHandler::handle(Exchange& x) {
  // Envoy's ext_authz (HTTP) appends the original request path to the configured prefix, so
  // the route is a subtree; the appended path is not read.
  NativeState& st = x.state<NativeState>();
  const Published& snap = api_.config.get(st.cache);
  const Config& cfg = *snap.config;
  if (!parse_forward_auth_query(x.request.query(), st.request, st.error)) {
    refuse(st, x.response);
    return true;
  }
  if (!cfg.forward_auth_key_header.empty()) {
    const std::optional<std::string_view> key = x.request.headers->first(cfg.forward_auth_key_header);
    if (!key) {
      http::render_error(400, "missing_key", "the request has no " + cfg.forward_auth_key_header + " header to take the key from", x.response);
      return true;
    }
    st.request.key.assign(*key);
  } else {
    const bool forwarded = cfg.client_header == ClientHeader::kForwarded;
    const bool present = x.request.headers->list(forwarded ? "forwarded" : "x-forwarded-for", st.chain);
    client_address(x.request.peer, present ? &st.chain : nullptr, cfg.client_header, cfg.trusted_proxies, st.request.key);
  }
  if (!check_key(st.request.key, bounds_of(cfg), st.error)) {
    refuse(st, x.response);
    return true;
  }
  st.deny_status = st.request.deny_status != 0 ? st.request.deny_status : cfg.forward_auth_deny_status;
  return decide(api_, st, snap, DecisionVerb::kAcquire, x.request.headers->first("ratelimit-priority").value_or(""),
                x.response);
}

void ForwardAuthHandler::complete(Exchange& x) { render_decision(x.state<NativeState>(), x.response); }

void ForwardAuthHandler::cancel(Exchange& x) { api_.waiting.cancel(x.state<NativeState>()); }

namespace {

void render_reset(const NativeState& st, http::Response& out) {
  if (!st.status.is_ok()) {
    render_store_failure(st.status, out);
    return;
  }
  out.clear();
  out.body = R"({"reset":true,"policy":)";
  http::append_json_string(out.body, st.infos.front().name);
  out.body += '}';
}

}  // namespace

bool ResetHandler::handle(Exchange& x) {
  if (x.request.method != Method::kPost) {
    method_not_allowed(x.response, x.request.path(), "POST");
    return true;
  }
  NativeState& st = x.state<NativeState>();
  const Published& snap = api_.config.get(st.cache);
  const Config& cfg = *snap.config;
  if (!admin_authorized(x.request, cfg, "/v1/reset", x.response)) return true;
  if (!parse_request_body(x.request.body, BodyKind::kReset, bounds_of(cfg), st.request, st.error)) {
    refuse(st, x.response);
    return true;
  }
  const service::Rule* rule = snap.rules->find(st.request.policies[0]);
  if (rule == nullptr) {
    http::render_error(400, "unknown_policy", "unknown policy '" + st.request.policies[0] + "'", x.response);
    return true;
  }
  st.infos.clear();
  st.infos.push_back(http::PolicyInfo::of(rule->policy));
  if (!api_.decisions.reset(*rule, st.request.key, st)) return false;
  render_reset(st, x.response);
  return true;
}

void ResetHandler::complete(Exchange& x) { render_reset(x.state<NativeState>(), x.response); }

}  // namespace ratelimit::server
