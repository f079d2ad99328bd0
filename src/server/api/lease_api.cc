// lease_api.cc — the lease endpoints (see lease_api.h). Like native_api.cc, every store call
// goes through the decision service (one item: an acquire, a release or a renew, carrying the
// lease id), answered inline (memory store) or later (complete() on the transport's thread);
// both end in the same render.
#include "lease_api.h"

#include <vector>

#include "answers.h"
#include "lease_token.h"
#include "metrics.h"
#include "request.h"

namespace ratelimit::server {
namespace {

enum class LeaseOp : uint8_t { kAcquire, kRenew, kRelease };

class LeaseState final : public ExchangeState, public service::Pending {
 public:
  explicit LeaseState(Exchange& x) : exchange_(x) {}
  void resume() override { exchange_.resume(); }

  ConfigCell::Cache cache;
  DecisionRequest request;
  RequestError error;
  LeaseToken token;
  LeaseOp op = LeaseOp::kAcquire;
  std::string policy;  // the rule's name, for the answer and the metrics
  Micros ttl{0};
  http::PolicyInfo info;
  std::optional<Policy> own_limit;  // an acquire's own "limit" (own_limit_policy); read by the store
  adaptive::ReleaseReport report;   // a release's outcome / latency (parse_release_body)
  bool adaptive = false;            // the policy's limit is learned (the metrics' gauge)
  size_t klass = SIZE_MAX;          // an acquire's priority class (priority_class); MAX: none
  std::string klass_name;           // ... its name, for the metrics
  LeaseMetrics::Clock::time_point started{};  // when a classed acquire arrived (its wait)
  std::vector<service::Item> items;
  http::RenderOptions render;

 private:
  Exchange& exchange_;
};

constexpr std::string_view kPrefix = "/v1/leases";

// The answer's RateLimit-Policy (qu="concurrent-requests") and RateLimit fields, as the
// decision renderer writes them, onto a body of our own.
void lease_fields(const LeaseState& st, const Decision& d, http::Response& out) {
  http::Response fields;
  Decision shown = d;
  shown.allowed = true;  // only the fields are kept: render them as for an admitted answer
  shown.retry_after = Micros{0};
  http::render_decisions({&shown, 1}, {&st.info, 1}, fields, st.render);
  out.clear();
  for (auto& f : fields.fields) out.fields.push_back(std::move(f));
}

void append_lease_members(std::string& b, const LeaseState& st, const Decision& d, const LeaseId& id) {
  b += R"("lease_id":)";
  if (id.empty()) {
    b += "null";  // admitted by the store's fail-open policy: nothing to release or renew
  } else {
    http::append_json_string(b, encode_lease_token(st.policy, st.token.key, id));
  }
  b += R"(,"expires_ms":)";
  b += std::to_string(http::ceil_millis(st.ttl));
  b += R"(,"policy":)";
  http::append_json_string(b, st.policy);
  b += R"(,"limit":)";
  b += std::to_string(d.limit);
  b += R"(,"remaining":)";
  b += std::to_string(d.remaining);
}

void render_lease(LeaseState& st, LeaseMetrics& metrics, http::Response& out) {
  if (!st.status.is_ok()) {
    render_store_failure(st.status, out);
    return;
  }
  const Decision& d = st.decisions.front();
  if (st.adaptive && d.limit > 0) metrics.learned(st.policy, d.limit);
  switch (st.op) {
    case LeaseOp::kAcquire: {
      if (d.reason == DecisionReason::kOverLimit) metrics.denied(st.policy);
      if (st.klass != SIZE_MAX) {
        const auto waited = std::chrono::duration_cast<Micros>(LeaseMetrics::Clock::now() - st.started);
        metrics.classed(st.policy, st.klass_name, d.allowed, d.reason == DecisionReason::kOverLimit, st.queued, waited);
      }
      if (!d.allowed) {
        http::render_decisions({&d, 1}, {&st.info, 1}, out, st.render);  // 429 / 400, Retry-After
        return;
      }
      if (!d.lease.empty()) metrics.acquired(st.policy, d.lease, st.ttl);
      http::render_decisions({&d, 1}, {&st.info, 1}, out, st.render);
      out.body = R"({"allowed":true,)";
      append_lease_members(out.body, st, d, d.lease);
      out.body += R"(,"reason":)";
      http::append_json_string(out.body, decision_reason_name(d.reason));
      out.body += '}';
      return;
    }
    case LeaseOp::kRenew: {
      const bool held = d.reason == DecisionReason::kWithinLimit;
      if (d.reason == DecisionReason::kWithinLimit || d.reason == DecisionReason::kLeaseNotHeld) {
        metrics.renewed(st.policy, st.token.id, st.ttl, held);
      }
      if (d.reason == DecisionReason::kPolicyConflict) {  // another definition's state: 409
        http::render_decisions({&d, 1}, {&st.info, 1}, out, st.render);
        return;
      }
      if (!held && d.reason != DecisionReason::kLeaseNotHeld) {  // the store failed open/closed
        http::render_error(503, "store_error", "the store could not renew the lease", out);
        return;
      }
      lease_fields(st, d, out);
      if (!held) {
        out.status = 404;
        out.body = R"({"error":"lease_not_held","message":"the lease expired, was released, or was never issued under this key and policy: acquire a new one","renewed":false})";
        return;
      }
      out.body = R"({"renewed":true,)";
      append_lease_members(out.body, st, d, st.token.id);
      out.body += '}';
      return;
    }
    case LeaseOp::kRelease: {
      const bool held = d.reason == DecisionReason::kWithinLimit;
      if (d.reason == DecisionReason::kPolicyConflict) {
        http::render_decisions({&d, 1}, {&st.info, 1}, out, st.render);
        return;
      }
      if (!held && d.reason != DecisionReason::kLeaseNotHeld) {
        http::render_error(503, "store_error", "the store could not release the lease", out);
        return;
      }
      metrics.released(st.policy, st.token.id, held);
      lease_fields(st, d, out);
      out.body = held ? R"({"released":true,"policy":)" : R"({"released":false,"policy":)";
      http::append_json_string(out.body, st.policy);
      out.body += R"(,"remaining":)";
      out.body += std::to_string(d.remaining);
      out.body += '}';
      return;
    }
  }
}

// An acquire's priority class (docs/throttling.md "Priority classes"), named by the body or the
// RateLimit-Priority header: the class's own limit on the policy's counter goes on the request's
// item, and a class with headroom gets no wait budget (refused over its share, never queued).
// False: refused, the 400 is in x.response. A policy without classes and no class named: true,
// nothing changed.
bool apply_priority_class(LeaseState& st, const service::Rule& rule, Exchange& x, Micros& budget) {
  const auto klass = priority_class(rule, st.request.priority,
                                    x.request.headers->first("ratelimit-priority").value_or(""),
                                    st.request.limit != 0, x.response);
  if (!klass) return false;
  if (*klass == SIZE_MAX) return true;
  st.klass = *klass;
  st.items.back().policy = &rule.class_policies[st.klass];
  st.items.back().priority = static_cast<uint8_t>(st.klass);
  st.klass_name = rule.classes[st.klass].name;
  st.started = LeaseMetrics::Clock::now();
  st.info = http::PolicyInfo::of(rule.class_policies[st.klass]);
  if (rule.classes[st.klass].headroom > 0) budget = Micros{0};
  return true;
}

}  // namespace

bool LeaseHandler::handle(Exchange& x) {
  LeaseState& st = x.state<LeaseState>();
  const Published& snap = api_.config.get(st.cache);
  const Config& cfg = *snap.config;
  const RequestBounds bounds{cfg.limits.max_key_length, cfg.limits.max_cost};
  const std::string_view path = x.request.path();
  std::string_view rest = path.substr(kPrefix.size());  // "", "/{id}" or "/{id}/renew"
  st.items.clear();
  StoreOp::Kind kind = StoreOp::Kind::kAcquire;
  if (rest.empty() || rest == "/") {
    if (x.request.method != Method::kPost) {
      method_not_allowed(x.response, path, "POST");
      return true;
    }
    if (!parse_request_body(x.request.body, BodyKind::kDecision, bounds, st.request, st.error)) {
      http::render_error(st.error.status, st.error.error, st.error.message, x.response);
      return true;
    }
    if (st.request.multi) {
      http::render_error(400, "invalid_request", "a lease is taken under one policy: use \"policy\", not \"policies\"", x.response);
      return true;
    }
    st.op = LeaseOp::kAcquire;
    st.token.policy = st.request.policies[0];
    st.token.key = st.request.key;
  } else {
    rest.remove_prefix(1);
    constexpr std::string_view kRenew = "/renew";
    const bool renew = rest.size() > kRenew.size() && rest.ends_with(kRenew);
    if (renew) rest.remove_suffix(kRenew.size());
    const Method want = renew ? Method::kPost : Method::kDelete;
    if (x.request.method != want) {
      method_not_allowed(x.response, path, renew ? "POST" : "DELETE");
      return true;
    }
    auto token = decode_lease_token(rest);
    if (!token || token->key.size() > bounds.max_key_length) {
      http::render_error(400, "invalid_lease_id", "not a lease id this service issued (the lease_id of POST /v1/leases)", x.response);
      return true;
    }
    st.token = std::move(*token);
    st.report = {};
    if (!renew && !parse_release_body(x.request.body, st.report, st.error)) {
      http::render_error(st.error.status, st.error.error, st.error.message, x.response);
      return true;
    }
    st.op = renew ? LeaseOp::kRenew : LeaseOp::kRelease;
    kind = renew ? StoreOp::Kind::kRenew : StoreOp::Kind::kRelease;
  }
  const service::Rule* rule = snap.rules->find(st.token.policy);
  if (rule == nullptr) {
    // 400 as on /v1/acquire and /v1/peek (the errors table): the request names what is not there.
    http::render_error(400, "unknown_policy", "unknown policy '" + st.token.policy + "'", x.response);
    return true;
  }
  if (!rule->policy.is_concurrency()) {
    http::render_error(400, "not_a_concurrency_policy",
                       "policy '" + st.token.policy + "' is a rate (" + algorithm_name(rule->policy.algorithm()) +
                           "): leases are taken under concurrency policies; use POST /v1/acquire",
                       x.response);
    return true;
  }
  st.policy = rule->policy.name();
  st.adaptive = rule->policy.adaptive().has_value();
  st.ttl = rule->policy.lease_ttl();
  st.info = http::PolicyInfo::of(rule->policy);
  st.render = cfg.render;
  st.own_limit.reset();
  if (st.op == LeaseOp::kAcquire && st.request.limit != 0) {
    // The caller's own limit, exactly as acquire and peek apply it (never silently ignored).
    st.own_limit = own_limit_policy(*rule, st.request.limit, x.response);
    if (!st.own_limit) return true;
    st.info = http::PolicyInfo::of(*st.own_limit);
  }
  st.items.push_back({rule, st.token.key, st.op == LeaseOp::kAcquire ? st.request.cost : 1, kind,
                      st.own_limit ? &*st.own_limit : nullptr, st.token.id, st.report});
  Micros budget = wait_budget(st.request.max_wait_ms);
  st.klass = SIZE_MAX;
  if (st.op == LeaseOp::kAcquire && !apply_priority_class(st, *rule, x, budget)) return true;
  // An acquire may wait for a lease to free (the waiting service; releases and renews never wait).
  if (!api_.waiting.decide(*snap.rules, st.items, Atomicity::kIndependent, budget, st)) {
    return false;
  }
  render_lease(st, metrics_, x.response);
  return true;
}

void LeaseHandler::complete(Exchange& x) { render_lease(x.state<LeaseState>(), metrics_, x.response); }

void LeaseHandler::cancel(Exchange& x) { api_.waiting.cancel(x.state<LeaseState>()); }

}  // namespace ratelimit::server
