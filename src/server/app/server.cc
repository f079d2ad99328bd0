// server.cc — run_server(): ratelimitd's entry point. Picks the configuration source (the
// YAML file, or the Envoy environment with --envoy-env), answers --check, and hands the rest to
// the composition root (app.h), which builds and serves.
//
// Why this small: everything the daemon does is wired once, in App; a mode is only where its
// configuration comes from (config_source.h).
#include "server.h"

#include <csignal>
#include <cstdio>

#include "app.h"
#include "config_source.h"
#include "log.h"

namespace ratelimit::server {
namespace {

// ratelimitd --check [--connect]: the file (and its store) would serve, or why not.
int check(const ServerOptions& options, const Config& config) {
  std::string rules;
  if (config.domains) rules = ", " + std::to_string(config.domains->rule_count()) + " descriptor rules";
  std::fprintf(stderr, "ratelimitd: %s: OK (%zu policies%s)\n", options.config_path.c_str(), config.policies.size(),
               rules.c_str());
  if (!options.check_connect) return kExitOk;
  const std::string store = store_description(config.store);
  auto probed = probe_store(config.store, kCheckConnectBound);
  if (!probed) {
    std::fprintf(stderr, "ratelimitd: --connect: store %s %s\n", store.c_str(), probed.status().message().c_str());
    return probed.status().code() == StatusCode::kInvalidArgument ? kExitConfig : kExitRuntime;
  }
  std::fprintf(stderr, "ratelimitd: --connect: store %s OK (%s)\n", store.c_str(), probed->c_str());
  return kExitOk;
}

int serve(ConfigSource& source, Plan plan) {
  App app(source, std::move(plan));
  if (const int code = app.open(); code != kExitOk) return code;
  return app.run();
}

int run_file(const ServerOptions& options) {
  apply_log_options(options, nullptr);
  auto loaded = load_config(options.config_path);
  if (!loaded) {
    std::fprintf(stderr, "ratelimitd: %s\n", loaded.status().message().c_str());
    return kExitConfig;
  }
  if (Status s = apply_overrides(*loaded, options.overrides); !s.is_ok()) {
    std::fprintf(stderr, "ratelimitd: %s\n", s.message().c_str());
    return kExitConfig;
  }
  auto config = std::make_shared<const Config>(std::move(*loaded));
  if (options.check_only) return check(options, *config);
  FileSource source(options, std::move(config));
  return serve(source, source.plan());
}

int run_envoy(const ServerOptions& options) {
  auto prepared = rls::prepare_envoy_env(rls::process_environment());
  if (!prepared) {
    std::fprintf(stderr, "ratelimitd: %s\n", prepared.status().message().c_str());
    return kExitConfig;
  }
  apply_log_options(options, &prepared->settings);
  // envoyproxy/ratelimit logs its start-up at warning level, so it shows with LOG_LEVEL=WARN
  // (the default); ignored settings are named the same way.
  for (const std::string& n : prepared->settings.notices) log_line(LogLevel::kWarn, n);
  EnvoySource source(std::move(*prepared));
  return serve(source, source.plan());
}

}  // namespace

int run_server(const ServerOptions& options) {
  std::signal(SIGPIPE, SIG_IGN);
  return options.envoy_env ? run_envoy(options) : run_file(options);
}

}  // namespace ratelimit::server
