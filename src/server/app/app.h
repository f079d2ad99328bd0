// app.h — ratelimitd's composition root: the one place that builds
//
//   store ─> DecisionService ─┬─> native handlers (/v1/*) ──────┐
//                             └─> RateLimitService ─> /json ────┼─> route tables ─> listeners (HTTP/1.1)
//                                        └──────────> ShouldRateLimit (gRPC)
//   health / readiness / metrics handlers ──────────────────────┘
//
// and owns reload: one fan-out, one publication of the daemon's configuration (published.h) —
// its Config, its policies and Envoy's API's descriptor rules — for every API and transport.
//
// Why: the server used to be one 242-line serve() with a branch per mode. Here a mode is a
// ConfigSource — the YAML file, or envoyproxy/ratelimit's environment and configuration
// directory — that describes what to serve (a Plan: listeners and their route sets, Envoy's API
// or not) and how to re-read itself; App builds the same objects whichever source it is given.
// What it does not know: HTTP framing (http1_*), an API's answers (the handlers), a source's
// file formats.
// Invariants: a reload either publishes a whole new configuration in one swap (everything is
// built before it) or changes nothing (a refused one is logged and counted once); teardown goes from the edges in: reload sources, gRPC and
// listeners, then the store (its last completions may still post to the workers), then the
// workers (their queued connections still reach the caps, metrics and routes).
// Thread-safety: open() and run() on the main thread; reload() from any thread (serialised).
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "mutex.h"
#include "config_dir.h"
#include "decision_service.h"
#include "waiting.h"
#include "grpc_streams.h"
#include "h2c.h"
#include "lease_api.h"
#include "listener.h"
#include "ops_api.h"
#include "resp_api.h"
#include "rls_service.h"
#include "rls_stats.h"
#include "options.h"
#include "quota_sync.h"
#include "store_factory.h"

namespace ratelimit::server {

// Which handlers a listener serves.
enum class RouteSet : uint8_t {
  kNative,           // /v1/acquire, /v1/peek, /v1/forward-auth[/...], /v1/reset, /healthz, /readyz, /metrics
  kAdmin,            // admin_listen: /healthz, /readyz, /metrics, /v1/reset
  kEnvoyMain,        // envoyproxy/ratelimit's HOST:PORT: /json, /healthcheck
  kEnvoyDebug,       // DEBUG_HOST:DEBUG_PORT: /rlconfig, /metrics, /
  kEnvoyPrometheus,  // PROMETHEUS_ADDR: PROMETHEUS_PATH
  kResp,             // resp_listen: the Redis protocol (resp_api.h), no HTTP
};

struct ListenerPlan {
  std::string name;  // ListenerInfo::name: "HTTP", "admin", "debug", "Prometheus", "RESP"
  ListenAddress address;
  RouteSet routes = RouteSet::kNative;
  bool admin = false;  // counted apart from the API's connections (caps.h)
};

// Envoy's rate-limit API, when a source serves it.
struct RlsPlan {
  std::shared_ptr<const rls::RuleSet> rules;  // the first descriptor rules (not null)
  uint64_t generation = 1;                    // their RuleSource generation
  rls::ServiceOptions options;
  std::optional<ListenAddress> grpc;       // where ShouldRateLimit listens
  std::string grpc_setting;                // names the setting in a bind error ("grpc_listen")
  std::string prometheus_path = "/metrics";  // kEnvoyPrometheus's path
};

// What a source asks the root to build.
struct Plan {
  std::shared_ptr<const Config> config;  // store, threads, limits, ... (validated)
  std::vector<ListenerPlan> listeners;   // the first is "the" listener (readiness line)
  std::optional<RlsPlan> rls;
  std::vector<std::string> watch_paths;  // reloaded when they change (empty: SIGHUP only)
  std::string watched;                   // what they are, for a log line (the directory)
};

// What a reload read.
struct SourceUpdate {
  Status status;         // not ok: refused, nothing changed
  bool unchanged = false;  // the same bytes as serving (or as last refused): nothing to do or log
  std::shared_ptr<const Config> config;  // a new daemon configuration to publish (null: same)
  // New descriptor rules for Envoy's API (null: same), of RuleSource generation envoy_generation.
  std::shared_ptr<const rls::RuleSet> envoy_rules;
  uint64_t envoy_generation = 0;
  // The generation serving afterwards: set by the source when refused, by App when published.
  uint64_t generation = 0;
};

// What is running, for the start-up lines.
struct Started {
  std::vector<std::pair<std::string, std::string>> listeners;  // name, where ("127.0.0.1:8080")
  std::string grpc;                                            // where gRPC listens ("" none)
  unsigned threads = 0;
  std::string store;  // store_description()
};

// A source of configuration: the YAML file or the Envoy environment (config_source.h).
class ConfigSource {
 public:
  virtual ~ConfigSource() = default;
  // Reads the source again (SIGHUP, or a watched change when only_if_changed). Publishes
  // nothing: App publishes what it returns, whole, in one swap.
  virtual SourceUpdate read(const std::string& why, const Config& running, bool only_if_changed) = 0;
  // Logs a reload's outcome, in the source's words (`why`: "SIGHUP", ...).
  virtual void log_reload(const std::string& why, const SourceUpdate& update) = 0;
  // Logs what is being served, once everything listens.
  virtual void log_started(const Started& started) = 0;
};

class App {
 public:
  App(ConfigSource& source, Plan plan);
  ~App();

  // Opens the store and binds every listener (and gRPC); logs why not. Returns kExitOk, or the
  // exit code to leave with. From just before the first bind, SIGINT/SIGTERM/SIGHUP are caught
  // and held for run(): a daemon that listens always drains on SIGTERM.
  int open();
  // Serves until SIGTERM/SIGINT and the drain (app_run.cc); returns the exit code.
  int run();
  // Reloads from the source; `why` names the trigger in the log. Any thread; serialised.
  void reload(const std::string& why, bool only_if_changed) RL_EXCLUDES(reload_mu_);

 private:
  const Served& serve(const ListenerPlan& l);
  // Parts of open(): the Redis release feed (store_->watch_releases set), and Envoy's RLQS
  // (grpc_ and `rlqs:` set) with its demand exchange when the store shares fields.
  void watch_releases();
  void open_rlqs(const RlqsConfig& rc);
  // Envoy's descriptor rules `rules` (RuleSource generation `generation`) ready to publish; every
  // rule's outcomes count under policy="envoy".
  std::shared_ptr<const rls::RateLimitService::Snapshot> envoy_snapshot(std::shared_ptr<const rls::RuleSet> rules,
                                                                        uint64_t generation);
  void drain();
  // gRPC health (grpc.health.v1) on every gRPC front-end: the poll in run() and drain() set it.
  void set_grpc_serving(bool serving);

  ConfigSource& source_;
  Plan plan_;
  std::vector<std::unique_ptr<Worker>> workers_;  // destroyed explicitly (~App, see top)
  Metrics metrics_;
  ServerState state_;
  std::optional<OpenedStore> store_;
  std::unique_ptr<service::DecisionService> decisions_;
  // Waiting instead of refusing (waiting.h), in front of decisions_; answers its waiters at drain.
  std::unique_ptr<service::WaitingService> waiting_;
  // Redis: releases through every process on it wake waiters here (RedisStore::watch_releases);
  // closed before the store and the waiting service it calls.
  std::unique_ptr<ReleaseFeed> release_feed_;
  std::atomic<uint64_t> feed_subscriptions_{0};
  ConfigCell cell_;
  PublishedLimits limits_{cell_};  // what the transport reads of cell_
  ConnectionCaps caps_{limits_, metrics_};
  rls::RuleStats rule_stats_;
  LeaseMetrics lease_metrics_;  // concurrency policies' leases (/v1/leases), on /metrics
  std::unique_ptr<rls::RateLimitService> rls_;
  // Envoy's RLQS (null without `rlqs:`): its rules follow reloads; outlives the gRPC streams.
  std::unique_ptr<rlqs::QuotaService> quota_;
  // With store: redis, the RLQS demand exchange with the other instances (null otherwise);
  // stopped before the store it calls.
  std::unique_ptr<rlqs::QuotaSync> quota_sync_;
  std::vector<std::unique_ptr<Handler>> handlers_;
  std::unique_ptr<RespCommands> resp_;  // resp_listen's commands (null without it); as handlers_
  // gRPC on h2c (null without Envoy's API) and h2c on the HTTP ports (h2c.h): outlive the
  // workers' connections, like the handlers.
  std::unique_ptr<GrpcStreams> grpc_;
  std::unique_ptr<H2cTakeover> h2c_;
  std::vector<std::unique_ptr<Served>> served_;
  boost::asio::io_context control_{1};
  // SIGINT, SIGTERM and SIGHUP, caught from just before the first listener binds (open()): a
  // signal that arrives once the daemon listens waits here for run() instead of killing it with
  // its default action. Before that nothing listens, and the default action loses nothing.
  std::optional<boost::asio::signal_set> signals_;
  std::vector<std::unique_ptr<Listener>> listeners_;
  // grpc_listen / GRPC_HOST:GRPC_PORT: h2c only, on the same workers, caps and sweep as the
  // HTTP listeners (its connections are H2cTakeover's, like h2c on an HTTP port).
  std::unique_ptr<Listener> grpc_listener_;
  std::string grpc_where_;
  Mutex reload_mu_;  // one reload() at a time: one read of the source, one publication
  // Declared last so it stops (joins its thread) first: its callback reloads.
  std::unique_ptr<rls::DirectoryWatcher> watcher_;
};

// "[v6]" or "v4", for "host:port" texts.
std::string bracketed(const std::string& host);

}  // namespace ratelimit::server
