// config_source.cc — the YAML file and the Envoy environment as configuration sources (see
// config_source.h).
#include "config_source.h"

#include <algorithm>

#include "log.h"
#include "ratelimit/policy.h"

namespace ratelimit::server {

// ---- ratelimitd's YAML file ------------------------------------------------------------

FileSource::FileSource(const ServerOptions& options, std::shared_ptr<const Config> config)
    : options_(options), first_(std::move(config)) {}

Plan FileSource::plan() {
  Plan p;
  p.config = first_;
  p.listeners.push_back({"HTTP", first_->listen, RouteSet::kNative, false});
  if (first_->admin_listen) p.listeners.push_back({"admin", *first_->admin_listen, RouteSet::kAdmin, true});
  if (first_->resp_listen) p.listeners.push_back({"RESP", *first_->resp_listen, RouteSet::kResp, false});
  if (first_->grpc_listen) {  // the file has domains too (parse_config: both or neither)
    RlsPlan r;
    r.rules = first_->domains;
    r.options = first_->envoy_api;
    r.grpc = *first_->grpc_listen;
    r.grpc_setting = "grpc_listen";
    p.rls = std::move(r);
  }
  return p;
}

SourceUpdate FileSource::read(const std::string& why, const Config& running, bool) {
  log_line("info", why + ": reloading " + options_.config_path);
  SourceUpdate u;
  auto next = load_config(options_.config_path);
  if (!next) {
    u.status = next.status();
    return u;
  }
  if (Status s = apply_overrides(*next, options_.overrides); !s.is_ok()) {
    u.status = s;
    return u;
  }
  // A change that needs a restart (store, listeners, grpc_listen...) is refused whole.
  if (Status s = check_reloadable(running, *next); !s.is_ok()) {
    u.status = s;
    return u;
  }
  // A policy whose new definition reads state differently (Policy::same_state_meaning) is
  // reloaded, but its keys' live state under the old one is refused until it ends (issue 31):
  // said here, once, so a 409 policy_conflict is never a surprise.
  std::vector<std::string> changed;
  for (const auto& [name, pc] : next->policies) {
    auto it = running.policies.find(name);
    if (it != running.policies.end() && !it->second.policy.same_state_meaning(pc.policy)) changed.push_back(name);
  }
  std::sort(changed.begin(), changed.end());
  for (const std::string& name : changed) {
    log_line("warning", "reload: policy '" + name +
                            "' changes its algorithm, window or counting mode: a key holding state of the old "
                            "definition answers 409 policy_conflict until that state ends (at most one old "
                            "window or drain time); give a new definition a new name to start afresh");
  }
  u.config = std::make_shared<const Config>(std::move(*next));
  u.envoy_rules = u.config->domains;  // the file's, published with it (null without grpc_listen)
  u.envoy_generation = ++envoy_generation_;
  return u;
}

void FileSource::log_reload(const std::string&, const SourceUpdate& u) {
  if (!u.status.is_ok()) {
    log_line("error", "reload failed, keeping the running configuration: " + u.status.message());
    return;
  }
  log_line("info", "reload ok: generation " + std::to_string(u.generation) + ", " +
                       std::to_string(u.config->policies.size()) + " policies");
}

void FileSource::log_started(const Started& s) {
  for (const auto& [name, where] : s.listeners) {
    if (name == "admin") log_line("info", "admin listener on " + where + " (/healthz, /readyz, /metrics, /v1/reset)");
    if (name == "RESP") log_line("info", "resp_listen " + where + ": the Redis protocol (CL.THROTTLE)");
  }
  log_line("info", "ratelimitd listening on " + s.listeners.front().second + " (" + std::to_string(s.threads) +
                       " threads, store " + s.store + ", " + std::to_string(first_->policies.size()) +
                       " policies, admin " + (first_->admin_token ? "enabled" : "disabled") + ")");
  if (!s.grpc.empty()) {
    log_line("info", "grpc_listen " + s.grpc + ": Envoy's rate-limit API (" +
                         std::to_string(first_->domains->rule_count()) + " descriptor rules)");
    if (first_->rlqs) {
      log_line("info", "grpc_listen " + s.grpc + ": Envoy's Rate Limit Quota Service (" +
                           std::to_string(first_->rlqs->rules->rules.size()) + " bucket rules)");
    }
  }
}

// ---- envoyproxy/ratelimit's environment --------------------------------------------------

Config envoy_config(const rls::EnvoyStartup& e) {
  Config c;
  c.source = e.config_directory;
  c.listen = ListenAddress{e.settings.host, e.settings.port};
  if (e.settings.backend == rls::Backend::kRedis) {
    c.store.type = StoreType::kRedis;
    c.store.url = e.store;
    c.store.connections = static_cast<size_t>(e.settings.redis_pool_size);
    c.store.key_layout = e.settings.redis_key_layout == "native" ? RedisKeyLayout::kNative
                                                                 : RedisKeyLayout::kEnvoy;
    if (e.settings.local_cache_size_bytes > 0) {  // envoyproxy/ratelimit's local cache
      c.store.denial_cache.enabled = true;
      c.store.denial_cache.max_entries = static_cast<size_t>(std::clamp<int64_t>(
          e.settings.local_cache_size_bytes / rls::kDenialCacheEntryBytes, 1, 100'000'000));
      c.store.denial_cache.max_ttl = kMaxWindow;  // until the window ends, as there
      c.store.denial_cache.remember_every_hit = true;
    }
  }
  c.limits.max_body_bytes = 64 * 1024;
  return c;
}

EnvoySource::EnvoySource(rls::EnvoyStartup startup) : startup_(std::move(startup)) {}

Plan EnvoySource::plan() {
  const rls::EnvoySettings& e = startup_.settings;
  Plan p;
  p.config = std::make_shared<const Config>(envoy_config(startup_));
  p.listeners.push_back({"HTTP", p.config->listen, RouteSet::kEnvoyMain, false});
  p.listeners.push_back({"debug", {e.debug_host, e.debug_port}, RouteSet::kEnvoyDebug, false});
  if (e.use_prometheus) {
    p.listeners.push_back({"Prometheus", {e.prometheus_host, e.prometheus_port}, RouteSet::kEnvoyPrometheus, false});
  }
  RlsPlan r;
  r.rules = startup_.rules->current();
  r.generation = startup_.rules->generation();
  r.options = rls::ServiceOptions::from(e);
  r.grpc = ListenAddress{e.grpc_host, e.grpc_port};
  r.grpc_setting = "GRPC_HOST/GRPC_PORT " + bracketed(e.grpc_host) + ":" + std::to_string(e.grpc_port);
  r.prometheus_path = e.prometheus_path;
  p.rls = std::move(r);
  p.watch_paths = startup_.watch_paths;
  p.watched = startup_.config_directory;
  return p;
}

SourceUpdate EnvoySource::read(const std::string&, const Config&, bool only_if_changed) {
  // SIGHUP and the watcher, from their threads: App serialises them. A refused set changes
  // nothing; the same bytes as serving (or as refused last) are not read twice.
  // The RuleSource keeps what it read (to see a change); requests read what App publishes.
  const rls::ReloadResult r = startup_.rules->reload(only_if_changed);
  SourceUpdate u;
  u.status = r.status;
  u.unchanged = r.unchanged;
  u.generation = r.generation;
  if (r.status.is_ok()) {
    u.envoy_rules = startup_.rules->current();
    u.envoy_generation = r.generation;
  }
  return u;
}

void EnvoySource::log_reload(const std::string& why, const SourceUpdate& u) {
  if (!u.status.is_ok()) {
    log_line(LogLevel::kError, why + ": configuration refused, generation " + std::to_string(u.generation) +
                                   " keeps serving: " + u.status.message());
    return;
  }
  log_line(LogLevel::kInfo, why + ": configuration reloaded, generation " + std::to_string(u.generation) + ", " +
                                std::to_string(startup_.rules->current()->rule_count()) + " rules");
}

void EnvoySource::log_started(const Started& s) {
  // envoyproxy/ratelimit logs its start-up at warning level, so it shows with LOG_LEVEL=WARN.
  for (const auto& [name, where] : s.listeners) log_line(LogLevel::kWarn, "listening for " + name + " on " + where);
  log_line(LogLevel::kWarn, "listening for gRPC on " + s.grpc);
  log_line(LogLevel::kWarn, "ratelimitd --envoy-env serving " + std::to_string(startup_.rules->current()->rule_count()) +
                                " rules from " + startup_.config_directory + " (" + std::to_string(s.threads) +
                                " threads, store " + s.store + ")");
}

void apply_log_options(const ServerOptions& options, const rls::EnvoySettings* env) {
  LogLevel level = LogLevel::kInfo;
  LogFormat format = LogFormat::kText;
  if (env != nullptr) {
    level = parse_log_level(env->log_level).value_or(LogLevel::kWarn);
    format = parse_log_format(env->log_format).value_or(LogFormat::kText);
  }
  set_log_options(options.log_level.value_or(level), options.log_format.value_or(format));
}

}  // namespace ratelimit::server
