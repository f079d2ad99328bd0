// main.cc — ratelimitd: flags in, run_server() out. Everything else lives in src/server.
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "envoy_startup.h"
#include "ratelimit/version.h"
#include "server.h"

int main(int argc, char** argv) {
  ratelimit::server::ServerOptions options;
  CLI::App app{
      "ratelimitd — HTTP and gRPC rate-limit service (and, with --envoy-env, a drop-in for "
      "envoyproxy/ratelimit).\n"
      "Endpoints: POST /v1/acquire, /v1/peek, /v1/reset; GET /v1/forward-auth?policy=NAME, "
      "/healthz, /metrics; with grpc_listen and domains in the file, Envoy's "
      "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit and grpc.health.v1.Health.\n"
      "Signals: SIGHUP reloads the configuration file (a bad file is logged and the running "
      "configuration stays); SIGTERM/SIGINT drain connections and exit 0.\n"
      "Exit codes: 0 ok, 1 runtime failure (cannot listen, store unreachable), 2 invalid "
      "configuration or flags."};
  app.set_version_flag("--version", ratelimit::version_line("ratelimitd"));
  // Checked by hand after parsing (not ->required()), so an unknown flag is named as such
  // instead of being reported as a missing --config.
  auto* config_opt =
      app.add_option("-c,--config", options.config_path, "YAML configuration file (required)");
  std::string listen, store;
  unsigned threads = 0;
  auto* listen_opt = app.add_option(
      "-l,--listen", listen,
      "host:port to listen on, overriding the file's 'listen' (port 0 = any free port; the "
      "bound address is logged)");
  auto* store_opt = app.add_option(
      "-s,--store", store,
      "'memory', a redis://[user:password@]host:port/db URL, unix:///path/to/redis.sock or "
      "redis-cluster://[user:password@]host:port[,host:port...], overriding the file's 'store'");
  auto* threads_opt = app.add_option(
      "-t,--threads", threads, "I/O threads, overriding the file's 'threads' (0 = one per core)");
  app.add_flag("--check", options.check_only,
               "validate the configuration (and overrides), print the result, and exit");
  app.add_flag("--connect", options.check_connect,
               "with --check: also open the store as serving would (Redis: connect, AUTH, load "
               "the functions or scripts) within store.connect_timeout, at most 3 s; exit 1 when "
               "it cannot be reached, 2 when it refuses the settings (credentials, eviction)");
  bool envoy_env = false;
  app.add_flag("--envoy-env", envoy_env,
               "configure from envoyproxy/ratelimit's environment variables (RUNTIME_ROOT, "
               "HOST, PORT, BACKEND_TYPE, ...) instead of --config and serve its endpoints (POST "
               "/json, /healthcheck, /rlconfig); with --check, validate them and the configuration "
               "directory, print what would be served, and exit");
  std::string log_level, log_format;
  auto* log_level_opt = app.add_option(
      "--log-level", log_level,
      "debug, info (default), warn or error; with --envoy-env the default is LOG_LEVEL");
  auto* log_format_opt = app.add_option(
      "--log-format", log_format,
      "text (default) or json (one JSON object per line: level, msg, time); with --envoy-env "
      "the default is LOG_FORMAT");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    return rc == 0 ? 0 : ratelimit::server::kExitConfig;
  }
  if (*log_level_opt) {
    options.log_level = ratelimit::server::parse_log_level(log_level);
    if (!options.log_level) {
      std::cerr << "ratelimitd: --log-level: '" << log_level << "' must be debug, info, warn or error\n";
      return ratelimit::server::kExitConfig;
    }
  }
  if (*log_format_opt) {
    options.log_format = ratelimit::server::parse_log_format(log_format);
    if (!options.log_format) {
      std::cerr << "ratelimitd: --log-format: '" << log_format << "' must be text or json\n";
      return ratelimit::server::kExitConfig;
    }
  }
  if (options.check_connect && !options.check_only) {
    std::cerr << "ratelimitd: --connect goes with --check (ratelimitd --config FILE --check --connect)\n";
    return ratelimit::server::kExitConfig;
  }
  if (envoy_env && options.check_connect) {
    std::cerr << "ratelimitd: --connect checks the store of a --config file; --envoy-env --check "
                 "validates the environment only\n";
    return ratelimit::server::kExitConfig;
  }
  if (envoy_env) {
    if (*config_opt || *listen_opt || *store_opt || *threads_opt) {
      std::cerr << "ratelimitd: --envoy-env takes its settings from the environment; drop "
                   "--config, --listen, --store and --threads\n";
      return ratelimit::server::kExitConfig;
    }
    if (options.check_only) {
      return ratelimit::rls::check_envoy_env(ratelimit::rls::process_environment(), std::cout,
                                             std::cerr);
    }
    options.envoy_env = true;
    return ratelimit::server::run_server(options);
  }
  if (!*config_opt) {
    std::cerr << "ratelimitd: --config is required (run with --help for usage)\n";
    return ratelimit::server::kExitConfig;
  }
  if (*listen_opt) options.overrides.listen = listen;
  if (*store_opt) options.overrides.store = store;
  if (*threads_opt) options.overrides.threads = threads;
  return ratelimit::server::run_server(options);
}
