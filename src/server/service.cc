// service.cc — the endpoints of ratelimitd (see service.h and README.md (ratelimitd)).
//
// Two ways to reach the store, one way to answer: with the in-process MemoryStore the
// decision is made inline on the I/O thread (no hand-off, no allocation for a completion);
// with any other store the asynchronous forms are used and the connection is resumed from the
// store's completion. Both end in finish(), which counts outcomes, applies shadow mode and
// renders through ratelimit_http, so the two paths cannot answer differently.
//
// Shadow policies: a shadow policy is decided (and consumes) on its own, never inside the
// all-or-nothing group, so a dark-launched limit can neither block nor un-count the enforced
// ones; its denials are counted as shadow_denied and answered as admitted.
#include "service.h"

#include <chrono>
#include <ctime>

#include "ratelimit/memory_store.h"

namespace ratelimit::server {
namespace {

using Clock = std::chrono::steady_clock;

std::string_view path_of(std::string_view target) { return target.substr(0, target.find('?')); }

std::string_view query_of(std::string_view target) {
  const size_t q = target.find('?');
  return q == std::string_view::npos ? std::string_view{} : target.substr(q + 1);
}

Outcome outcome_of(const Decision& d, bool shadow) {
  switch (d.reason) {
    case DecisionReason::kStoreFailedOpen: return Outcome::kFailedOpen;
    case DecisionReason::kStoreFailedClosed: return Outcome::kFailedClosed;
    default: break;
  }
  if (d.allowed) return Outcome::kAllowed;
  return shadow ? Outcome::kShadowDenied : Outcome::kDenied;
}

void method_not_allowed(http::Response& out, std::string_view path, std::string_view allow) {
  std::string m = "use ";
  m += allow;
  m += " for ";
  m += path;
  http::render_error(405, "method_not_allowed", m, out);
  out.fields.push_back({"Allow", std::string(allow)});
}

void store_failure(Metrics& metrics, const Status& s, http::Response& out) {
  if (s.code() == StatusCode::kInvalidArgument) {
    http::render_error(400, "invalid_request", s.message(), out);
    return;
  }
  metrics.count_store_error();
  http::render_error(503, "store_error", status_code_name(s.code()), out);
}

// Counts, applies shadow mode, renders. `decisions[i]` answers `actives[i]`.
void finish(std::span<const ActivePolicy* const> actives, std::span<Decision> decisions, bool multi,
            bool peek, std::vector<http::PolicyInfo>& infos, http::Response& out) {
  for (size_t i = 0; i < actives.size(); ++i) {
    Decision& d = decisions[i];
    const bool shadow = actives[i]->config->shadow;
    if (!peek) actives[i]->counters->count(outcome_of(d, shadow));
    if (shadow && !d.allowed) {
      d.allowed = true;
      d.reason = DecisionReason::kWithinLimit;
      d.retry_after = Micros{0};
    }
  }
  if (!multi) {
    http::render_decision(decisions[0], actives[0]->info, out);
    return;
  }
  infos.clear();
  for (const ActivePolicy* a : actives) infos.push_back(a->info);
  http::render_decisions(decisions, infos, out);
}

// The state of one asynchronous decision (networked store): completions may arrive on any
// thread, each fills its own slot; the last one renders and resumes the connection.
struct Job {
  std::shared_ptr<const Snapshot> snapshot;  // keeps the policies alive
  std::vector<const ActivePolicy*> actives;
  std::vector<Decision> decisions;
  std::atomic<int> pending{0};
  std::mutex mu;
  Status error;  // first error, guarded by mu
  bool multi = false;
  bool peek = false;
  Clock::time_point start;
  http::Response* out = nullptr;
  std::shared_ptr<Waiter> waiter;
  Metrics* metrics = nullptr;

  void fail(const Status& s) {
    std::lock_guard lock(mu);
    if (error.is_ok()) error = s;
  }
  void done_one() {
    if (pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    metrics->observe_decision(Clock::now() - start);
    if (!error.is_ok()) {
      store_failure(*metrics, error, *out);
    } else {
      std::vector<http::PolicyInfo> infos;
      finish(actives, decisions, multi, peek, infos, *out);
    }
    std::shared_ptr<Waiter> w = std::move(waiter);
    w->resume();
  }
};

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

Service::Service(std::shared_ptr<Store> store, MemoryStore* memory, Metrics& metrics,
                 std::shared_ptr<const Config> config)
    : store_(std::move(store)), memory_(memory), metrics_(metrics) {
  publish(std::move(config));
}

void Service::publish(std::shared_ptr<const Config> config) {
  auto snap = std::make_shared<Snapshot>();
  snap->config = std::move(config);
  for (const auto& [name, pc] : snap->config->policies) {
    snap->policies.emplace(std::string_view(name),
                           ActivePolicy{&pc, metrics_.policy(name), http::PolicyInfo::of(pc.policy)});
  }
  std::lock_guard lock(mu_);
  snap->generation = generation_.load(std::memory_order_relaxed) + 1;
  metrics_.set_config_generation(snap->generation);
  current_ = std::move(snap);
  generation_.store(current_->generation, std::memory_order_release);
}

const Snapshot& Service::snapshot(ThreadContext& tc) const {
  if (tc.generation != generation_.load(std::memory_order_acquire) || !tc.snapshot) {
    std::lock_guard lock(mu_);
    tc.snapshot = current_;
    tc.generation = current_->generation;
  }
  return *tc.snapshot;
}

std::shared_ptr<const Config> Service::config() const {
  std::lock_guard lock(mu_);
  return current_->config;
}

Status Service::reload(const std::string& path, const Overrides& overrides) {
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

void Service::error(ThreadContext& tc, http::Response& out) const {
  http::render_error(tc.error.status, tc.error.error, tc.error.message, out);
}

bool Service::handle(const RequestView& req, ThreadContext& tc, http::Response& out,
                     const std::shared_ptr<Waiter>& waiter, Endpoint& endpoint) {
  const Snapshot& snap = snapshot(tc);
  const std::string_view path = path_of(req.target);
  const Config& cfg = *snap.config;
  const RequestBounds bounds{cfg.limits.max_key_length, cfg.limits.max_cost};

  if (path == "/v1/acquire" || path == "/v1/peek") {
    const bool peek = path == "/v1/peek";
    endpoint = peek ? Endpoint::kPeek : Endpoint::kAcquire;
    if (req.method != Method::kPost) {
      method_not_allowed(out, path, "POST");
      return true;
    }
    if (!parse_request_body(req.body, BodyKind::kDecision, bounds, tc.request, tc.error)) {
      error(tc, out);
      return true;
    }
    return decide(req, tc, snap, peek, out, waiter);
  }
  if (path == "/v1/forward-auth") {
    // Any method: proxies differ in what they send (Traefik and Caddy: GET; others may
    // forward the original method). No body is read for the decision.
    endpoint = Endpoint::kForwardAuth;
    if (!parse_forward_auth_query(query_of(req.target), tc.request, tc.error)) {
      error(tc, out);
      return true;
    }
    std::string_view key;
    if (!cfg.forward_auth_key_header.empty()) {
      if (req.key_header == nullptr) {
        http::render_error(400, "missing_key", "the request has no " + cfg.forward_auth_key_header + " header to take the key from", out);
        return true;
      }
      key = *req.key_header;
    } else if (req.forwarded_for != nullptr && !first_forwarded_for(*req.forwarded_for).empty()) {
      key = first_forwarded_for(*req.forwarded_for);
    } else {
      key = req.peer;
    }
    if (!check_key(key, bounds, tc.error)) {
      error(tc, out);
      return true;
    }
    tc.request.key.assign(key);
    return decide(req, tc, snap, false, out, waiter);
  }
  if (path == "/v1/reset") {
    endpoint = Endpoint::kReset;
    if (req.method != Method::kPost) {
      method_not_allowed(out, path, "POST");
      return true;
    }
    return reset(req, tc, snap, out, waiter);
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
                     "/v1/forward-auth, /healthz, /metrics)",
                     out);
  return true;
}

bool Service::decide(const RequestView&, ThreadContext& tc, const Snapshot& snap, bool peek,
                     http::Response& out, const std::shared_ptr<Waiter>& waiter) {
  const DecisionRequest& r = tc.request;
  tc.actives.clear();
  for (size_t i = 0; i < r.policy_count; ++i) {
    const ActivePolicy* a = snap.find(r.policies[i]);
    if (a == nullptr) {
      http::render_error(400, "unknown_policy", "unknown policy '" + r.policies[i] + "'", out);
      return true;
    }
    tc.actives.push_back(a);
  }
  const size_t n = tc.actives.size();

  if (memory_ != nullptr) {
    const auto start = Clock::now();
    tc.decisions.resize(n);
    Status failure;
    size_t enforced = 0;
    if (!peek && n > 1) {
      for (const ActivePolicy* a : tc.actives) {
        if (a->config->shadow) continue;
        if (enforced < tc.enforced.size()) tc.enforced[enforced] = a->config->policy;
        else tc.enforced.push_back(a->config->policy);
        ++enforced;
      }
    }
    if (enforced > 1) {
      auto all = memory_->acquire_all(std::span<const Policy>(tc.enforced.data(), enforced), r.key, r.cost);
      if (!all) {
        failure = all.status();
      } else {
        size_t k = 0;
        for (size_t i = 0; i < n; ++i) {
          if (!tc.actives[i]->config->shadow) tc.decisions[i] = (*all)[k++];
        }
      }
    }
    for (size_t i = 0; i < n && failure.is_ok(); ++i) {
      const ActivePolicy* a = tc.actives[i];
      if (enforced > 1 && !a->config->shadow) continue;  // decided together above
      auto d = peek ? memory_->peek(a->config->policy, r.key, r.cost)
                    : memory_->acquire(a->config->policy, r.key, r.cost);
      if (!d) failure = d.status();
      else tc.decisions[i] = *d;
    }
    metrics_.observe_decision(Clock::now() - start);
    if (!failure.is_ok()) {
      store_failure(metrics_, failure, out);
      return true;
    }
    finish(tc.actives, tc.decisions, r.multi, peek, tc.infos, out);
    return true;
  }

  // A networked store: one completion per call, joined in a Job.
  auto job = std::make_shared<Job>();
  job->snapshot = tc.snapshot;
  job->actives = tc.actives;
  job->decisions.resize(n);
  job->multi = r.multi;
  job->peek = peek;
  job->start = Clock::now();
  job->out = &out;
  job->waiter = waiter;
  job->metrics = &metrics_;
  std::vector<size_t> group;  // enforced policies decided all or nothing
  if (!peek && n > 1) {
    for (size_t i = 0; i < n; ++i) {
      if (!tc.actives[i]->config->shadow) group.push_back(i);
    }
    if (group.size() < 2) group.clear();
  }
  const int calls = static_cast<int>(n - group.size() + (group.empty() ? 0 : 1));
  job->pending.store(calls, std::memory_order_relaxed);
  if (!group.empty()) {
    std::vector<Policy> policies;
    policies.reserve(group.size());
    for (size_t i : group) policies.push_back(tc.actives[i]->config->policy);
    store_->acquire_all_async(policies, r.key, r.cost,
                              [job, group](Result<std::vector<Decision>> res) {
                                if (!res) job->fail(res.status());
                                else if (res->size() != group.size()) job->fail(Status::internal("store answered the wrong number of decisions"));
                                else for (size_t k = 0; k < group.size(); ++k) job->decisions[group[k]] = (*res)[k];
                                job->done_one();
                              });
  }
  for (size_t i = 0; i < n; ++i) {
    if (!group.empty() && !tc.actives[i]->config->shadow) continue;
    auto cb = [job, i](Result<Decision> res) {
      if (!res) job->fail(res.status());
      else job->decisions[i] = *res;
      job->done_one();
    };
    const Policy& p = tc.actives[i]->config->policy;
    if (peek) store_->peek_async(p, r.key, r.cost, std::move(cb));
    else store_->acquire_async(p, r.key, r.cost, std::move(cb));
  }
  return false;
}

bool Service::reset(const RequestView& req, ThreadContext& tc, const Snapshot& snap,
                    http::Response& out, const std::shared_ptr<Waiter>& waiter) {
  const Config& cfg = *snap.config;
  if (!cfg.admin_token) {
    http::render_error(403, "admin_disabled", "no admin_token is configured, so /v1/reset is disabled", out);
    return true;
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
    http::render_error(401, "unauthorized", "/v1/reset needs 'Authorization: Bearer <admin_token>'", out);
    out.fields.push_back({"WWW-Authenticate", "Bearer realm=\"ratelimitd\""});
    return true;
  }
  const RequestBounds bounds{cfg.limits.max_key_length, cfg.limits.max_cost};
  if (!parse_request_body(req.body, BodyKind::kReset, bounds, tc.request, tc.error)) {
    error(tc, out);
    return true;
  }
  const ActivePolicy* a = snap.find(tc.request.policies[0]);
  if (a == nullptr) {
    http::render_error(400, "unknown_policy", "unknown policy '" + tc.request.policies[0] + "'", out);
    return true;
  }
  auto render_ok = [a](http::Response& o) {
    o.clear();
    o.body = R"({"reset":true,"policy":)";
    http::append_json_string(o.body, a->info.name);
    o.body += '}';
  };
  if (memory_ != nullptr) {
    Status s = memory_->reset(a->config->policy, tc.request.key);
    if (!s.is_ok()) store_failure(metrics_, s, out);
    else render_ok(out);
    return true;
  }
  store_->reset_async(a->config->policy, tc.request.key,
                      [snap = tc.snapshot, a, out = &out, w = waiter, m = &metrics_, render_ok](Status s) mutable {
                        if (!s.is_ok()) store_failure(*m, s, *out);
                        else render_ok(*out);
                        std::shared_ptr<Waiter> waiter_local = std::move(w);
                        waiter_local->resume();
                      });
  return false;
}

}  // namespace ratelimit::server
