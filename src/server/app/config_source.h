// config_source.h — where a running ratelimitd's configuration comes from, as ConfigSources for
// the composition root (app.h): ratelimitd's YAML file (`--config`, with the command-line
// overrides), or envoyproxy/ratelimit's environment variables and configuration directory
// (`--envoy-env`). Each turns its settings into a Plan (listeners, route sets, Envoy's API),
// re-reads itself on reload, and words the log lines its users know.
//
// Why sources and not modes: both feed the same wiring; what differs is only what is read and
// how it is reported, so that is all that lives here.
// Thread-safety: read() and log_reload() are called under App's reload lock; log_started()
// once, on the main thread.
#pragma once

#include <memory>

#include "app.h"
#include "envoy_startup.h"
#include "options.h"

namespace ratelimit::server {

// ratelimitd's own YAML file: the native API on `listen`, the operator endpoints on
// `admin_listen`, Envoy's API on `grpc_listen` over the file's `domains`. Reload: SIGHUP.
class FileSource final : public ConfigSource {
 public:
  // `config` was loaded from options.config_path with options.overrides applied.
  FileSource(const ServerOptions& options, std::shared_ptr<const Config> config);
  Plan plan();
  SourceUpdate read(const std::string& why, const Config& running, bool only_if_changed) override;
  void log_reload(const std::string& why, const SourceUpdate& update) override;
  void log_started(const Started& started) override;

 private:
  const ServerOptions& options_;
  std::shared_ptr<const Config> first_;
  uint64_t envoy_generation_ = 1;  // of the file's domains: +1 per reload read
};

// envoyproxy/ratelimit's settings: /json and /healthcheck on HOST:PORT, the debug listener,
// Prometheus, ShouldRateLimit on GRPC_HOST:GRPC_PORT, the configuration directory watched (and
// reloaded on SIGHUP). The daemon's Config is derived once (envoy_config) and never reloads.
class EnvoySource final : public ConfigSource {
 public:
  explicit EnvoySource(rls::EnvoyStartup startup);
  Plan plan();
  SourceUpdate read(const std::string& why, const Config& running, bool only_if_changed) override;
  void log_reload(const std::string& why, const SourceUpdate& update) override;
  void log_started(const Started& started) override;

 private:
  rls::EnvoyStartup startup_;  // its RuleSource reads the directory (App publishes the rules)
};

// ratelimitd's Config for envoyproxy/ratelimit's settings (the listener of HOST:PORT, the store
// of BACKEND_TYPE/REDIS_*, room for /json bodies of 64 descriptors).
Config envoy_config(const rls::EnvoyStartup& e);

// Applies --log-level/--log-format, else (with --envoy-env) LOG_LEVEL/LOG_FORMAT, else the
// defaults. The environment values were validated by parse_envoy_env.
void apply_log_options(const ServerOptions& options, const rls::EnvoySettings* env);

}  // namespace ratelimit::server
