// app.cc — building ratelimitd from a Plan, and reloading it (see app.h). The serving loop
// (signals, drain, the outage log) is app_run.cc.
#include "app.h"

#include <csignal>
#include <ctime>
#include <thread>

#include "answers.h"
#include "envoy_http.h"
#include "log.h"
#include "native_api.h"

namespace ratelimit::server {

std::string bracketed(const std::string& host) {
  return host.find(':') != std::string::npos ? "[" + host + "]" : host;
}

App::App(ConfigSource& source, Plan plan)
    : source_(source),
      plan_(std::move(plan)),
      cell_(make_published(plan_.config, metrics_,
                           plan_.rls ? envoy_snapshot(plan_.rls->rules, plan_.rls->generation) : nullptr)) {
  metrics_.set_config_generation(cell_.generation());
}

std::shared_ptr<const rls::RateLimitService::Snapshot> App::envoy_snapshot(std::shared_ptr<const rls::RuleSet> rules,
                                                                           uint64_t generation) {
  return rls::RateLimitService::snapshot(std::move(rules), generation, metrics_.policy("envoy"));
}

App::~App() {
  // Stop what can still call in (reloads, gRPC, accepts), then the store, then the workers:
  // destroying a worker destroys the handlers still queued on it (after a second signal,
  // connections mid-request), whose connections count themselves out of caps_ and metrics_ and
  // hold their listener's routes — all of which must still be alive then.
  watcher_.reset();
  grpc_listener_.reset();
  listeners_.clear();
  rls_.reset();
  if (waiting_) waiting_->shutdown();  // every waiter answered; nothing waits from here on
  release_feed_.reset();
  quota_sync_.reset();
  decisions_.reset();
  store_.reset();
  waiting_.reset();  // after the store: a decision still in flight completes through it
  workers_.clear();
}

namespace {

// The handlers of one process, created once and shared by every listener that routes to them.
template <typename T, typename... Args>
T& keep(std::vector<std::unique_ptr<Handler>>& handlers, Args&&... args) {
  auto h = std::make_unique<T>(std::forward<Args>(args)...);
  T& ref = *h;
  handlers.push_back(std::move(h));
  return ref;
}

constexpr const char* kNativeNotFound =
    "no such endpoint (POST /v1/acquire, /v1/peek, /v1/report, /v1/reset, /v1/leases; DELETE /v1/leases/{id}; GET /v1/forward-auth[/...], /healthz, /readyz, /metrics)";
constexpr const char* kAdminNotFound = "the admin listener serves /healthz, /readyz, /metrics and /v1/reset only";
constexpr const char* kEnvoyNotFound = "no such endpoint (POST /json, GET /healthcheck)";
constexpr const char* kEnvoyDebugIndex =
    "/metrics: Prometheus metrics\n/rlconfig: print out the currently loaded configuration for debugging\n";

}  // namespace

// One Served per listener: its identity and its routes over the shared handlers.
const Served& App::serve(const ListenerPlan& l) {
  auto s = std::make_unique<Served>();
  s->info = ListenerInfo{l.name, l.admin};
  // The API listeners also speak h2c (by the connection preface); the operator's do not.
  if (l.routes == RouteSet::kNative || l.routes == RouteSet::kEnvoyMain) s->h2c = h2c_.get();
  RouteTable& r = s->routes;
  const NativeApi native{*decisions_, *waiting_, cell_};
  auto& healthz = keep<HealthzHandler>(handlers_);
  auto& readyz = keep<ReadyzHandler>(handlers_, state_);
  switch (l.routes) {
    case RouteSet::kNative:
      r.exact("/v1/acquire", keep<DecisionHandler>(handlers_, native, DecisionVerb::kAcquire), Endpoint::kAcquire)
          .exact("/v1/peek", keep<DecisionHandler>(handlers_, native, DecisionVerb::kPeek), Endpoint::kPeek)
          .exact("/v1/report", keep<DecisionHandler>(handlers_, native, DecisionVerb::kReport), Endpoint::kReport)
          .subtree("/v1/forward-auth", keep<ForwardAuthHandler>(handlers_, native), Endpoint::kForwardAuth)
          .exact("/v1/reset", keep<ResetHandler>(handlers_, native), Endpoint::kReset)
          .subtree("/v1/leases", keep<LeaseHandler>(handlers_, native, lease_metrics_), Endpoint::kLeases)
          .exact("/healthz", healthz, Endpoint::kHealthz)
          .exact("/readyz", readyz, Endpoint::kReadyz)
          .exact("/metrics", keep<MetricsHandler>(handlers_, metrics_), Endpoint::kMetrics)
          .fallback(keep<NotFoundHandler>(handlers_, kNativeNotFound));
      break;
    case RouteSet::kAdmin:
      r.exact("/healthz", healthz, Endpoint::kHealthz)
          .exact("/readyz", readyz, Endpoint::kReadyz)
          .exact("/metrics", keep<MetricsHandler>(handlers_, metrics_), Endpoint::kMetrics)
          .exact("/v1/reset", keep<ResetHandler>(handlers_, native), Endpoint::kReset)
          .fallback(keep<NotFoundHandler>(handlers_, kAdminNotFound));
      break;
    case RouteSet::kEnvoyMain:
      r.exact("/json", keep<JsonHandler>(handlers_, *rls_), Endpoint::kJson)
          .exact("/healthcheck", keep<HealthcheckHandler>(handlers_, state_), Endpoint::kHealthcheck)
          .fallback(keep<NotFoundHandler>(handlers_, kEnvoyNotFound));
      break;
    case RouteSet::kEnvoyDebug: {
      auto& not_found = keep<TextHandler>(handlers_, 404, "404 page not found\n");
      r.exact("/rlconfig", keep<RlconfigHandler>(handlers_, *rls_), Endpoint::kRlconfig)
          .exact("/metrics", keep<MetricsHandler>(handlers_, metrics_, &not_found), Endpoint::kMetrics)
          .exact("/", keep<TextHandler>(handlers_, 200, kEnvoyDebugIndex), Endpoint::kOther)
          .fallback(not_found);
      break;
    }
    case RouteSet::kResp:
      if (!resp_) resp_ = std::make_unique<RespCommands>(native, lease_metrics_, metrics_.policy(kThrottlePolicyName));
      s->resp = resp_.get();
      break;
    case RouteSet::kEnvoyPrometheus: {
      auto& not_found = keep<TextHandler>(handlers_, 404, "404 page not found\n");
      r.exact(plan_.rls->prometheus_path, keep<MetricsHandler>(handlers_, metrics_, &not_found), Endpoint::kMetrics)
          .fallback(not_found);
      break;
    }
  }
  served_.push_back(std::move(s));
  return *served_.back();
}

// Leases released through another instance (the Redis release feed): lease metrics stop
// tracking them and local waiters on their key are woken.
void App::watch_releases() {
  service::WaitingService* w = waiting_.get();
  release_feed_ = store_->watch_releases(
      [this, w](std::string_view policy, std::string_view key, const LeaseId& lease) {
        lease_metrics_.released_elsewhere(policy, lease);
        w->released_elsewhere(policy, key, lease);
      },
      [this, w] {
        feed_subscriptions_.fetch_add(1, std::memory_order_relaxed);
        w->resubscribed();
      });
  metrics_.add_extra([this](std::string& out) {
    append_metric(out, StoreMetric::kWaitReleaseFeedSubscriptionsTotal, feed_subscriptions_.load(std::memory_order_relaxed));
  });
}

// Envoy's RLQS on the gRPC streams; with Redis, the demand exchange with the other instances.
void App::open_rlqs(const RlqsConfig& rc) {
  quota_ = std::make_unique<rlqs::QuotaService>(rc.rules, rlqs::QuotaOptions{rc.max_buckets});
  grpc_->set_quota(quota_.get());
  metrics_.add_extra([this](std::string& out) { quota_->render_metrics(out); });
  if (store_->fields) {
    // Replicas behind this Redis divide each limit together (quota_sync.h).
    rlqs::QuotaSyncOptions o;
    o.interval = rc.sync_interval;
    o.on_change = [](bool up, const std::string& why) {
      if (up) {
        log_line("info", "rlqs: demands exchanged through Redis again: every instance divides each limit among "
                         "the whole fleet's clients");
      } else {
        log_line("warn", "rlqs: exchanging demands through Redis failed (" + why +
                             "): within one assignment TTL each instance divides each limit among its own "
                             "clients only — up to N x the limit over N instances — until Redis answers");
      }
    };
    quota_sync_ = std::make_unique<rlqs::QuotaSync>(*quota_, store_->fields, std::move(o));
    log_line("info", "rlqs: sharing demands through Redis every " + std::to_string(rc.sync_interval.count()) +
                         " ms as instance " + quota_sync_->instance());
    metrics_.add_extra([this](std::string& out) {
      if (quota_sync_) quota_sync_->render_metrics(out);
    });
  }
}

int App::open() {
  const Config& config = *plan_.config;
  auto opened = open_store(config.store, metrics_, config.regions);
  if (!opened) {
    log_line("error", "cannot open the store: " + opened.status().message());
    return opened.status().code() == StatusCode::kInvalidArgument ? kExitConfig : kExitRuntime;
  }
  store_ = std::move(*opened);
  state_.store_ready = store_->ready;
  decisions_ = std::make_unique<service::DecisionService>(store_->store, &metrics_);
  waiting_ = std::make_unique<service::WaitingService>(*decisions_);
  metrics_.add_extra([this](std::string& out) { lease_metrics_.render(out); });
  metrics_.add_extra([this](std::string& out) { render_wait_stats(waiting_->stats(), out); });
  if (store_->watch_releases) watch_releases();

  // Envoy's rate-limit API: one RateLimitService for gRPC and /json, its per-rule statistics on
  // /metrics, every rule's outcomes under policy="envoy".
  if (plan_.rls) {
    metrics_.add_extra([this](std::string& out) { rule_stats_.render(out); });
    rls_ = std::make_unique<rls::RateLimitService>(*decisions_, cell_.view(&Published::envoy), plan_.rls->options,
                                                   rule_stats_);
  }

  if (rls_) grpc_ = std::make_unique<GrpcStreams>(*rls_);
  if (grpc_ && config.rlqs) open_rlqs(*config.rlqs);
  h2c_ = std::make_unique<H2cTakeover>(grpc_.get());
  metrics_.add_extra([this](std::string& out) { h2c_->render_metrics(out); });

  unsigned threads = config.threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < threads; ++i) workers_.push_back(std::make_unique<Worker>(limits_, metrics_));

  signals_.emplace(control_, SIGINT, SIGTERM, SIGHUP);
  for (const ListenerPlan& l : plan_.listeners) {
    auto listener = std::make_unique<Listener>(control_, workers_, caps_, serve(l));
    if (Status s = listener->open(l.address); !s.is_ok()) {
      log_line("error", l.admin ? "admin_listen: " + s.message() : s.message());
      return kExitRuntime;
    }
    listeners_.push_back(std::move(listener));
  }
  if (plan_.rls && plan_.rls->grpc) {
    // gRPC's own port: the gRPC methods of h2c_ on every connection; a stream that is not gRPC
    // gets the gRPC spec's 415.
    auto s = std::make_unique<Served>();
    s->info = ListenerInfo{"gRPC", false};
    s->h2c = h2c_.get();
    s->h2c_only = true;
    s->routes.fallback(keep<TextHandler>(handlers_, 415, "this port speaks gRPC: content-type must be application/grpc\n"));
    served_.push_back(std::move(s));
    grpc_listener_ = std::make_unique<Listener>(control_, workers_, caps_, *served_.back());
    if (Status st = grpc_listener_->open(*plan_.rls->grpc); !st.is_ok()) {
      log_line("error", plan_.rls->grpc_setting + ": " + st.message());
      return kExitRuntime;
    }
    grpc_where_ = grpc_listener_->where();
  }
  if (!plan_.watch_paths.empty()) {
    auto w = rls::DirectoryWatcher::start(plan_.watch_paths,
                                          [this] { reload("configuration directory changed", true); });
    if (!w) {
      log_line("error", "cannot watch " + plan_.watched + ": " + w.status().message());
      return kExitRuntime;
    }
    watcher_ = std::move(*w);
  }
  return kExitOk;
}

void App::reload(const std::string& why, bool only_if_changed) {
  MutexLock serial(reload_mu_);
  const std::shared_ptr<const Published> serving = cell_.get();
  SourceUpdate u = source_.read(why, *serving->config, only_if_changed);
  if (u.unchanged) return;  // the same bytes: nothing to publish, count or log
  metrics_.record_reload(u.status.is_ok(), static_cast<int64_t>(std::time(nullptr)));
  if (u.status.is_ok()) {
    // Everything is built first, then published in one swap for every API and transport: a
    // request sees the old configuration or the new one, never a part of each.
    auto envoy = u.envoy_rules ? envoy_snapshot(u.envoy_rules, u.envoy_generation) : serving->envoy;
    u.generation = cell_.publish(make_published(u.config ? u.config : serving->config, metrics_, std::move(envoy)));
    metrics_.set_config_generation(u.generation);
    // RLQS's rules (a restart is needed to add or remove the section: check_reloadable).
    if (quota_ && u.config && u.config->rlqs) quota_->set_rules(u.config->rlqs->rules);
  }
  source_.log_reload(why, u);
}

}  // namespace ratelimit::server
