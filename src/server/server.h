// server.h — ratelimitd as a library: load the configuration, open the store, serve HTTP
// until SIGTERM/SIGINT, reload on SIGHUP. tools/ratelimitd/main.cc only parses flags and
// calls run_server().
//
// Why a library: the binary stays a thin shell (STYLE.md), and everything it does is in a
// target the tests and the benchmarks can link.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "config.h"
#include "log.h"

namespace ratelimit::server {

struct ServerOptions {
  std::string config_path;  // required, unless envoy_env
  Overrides overrides;      // --listen, --store, --threads
  bool check_only = false;  // --check: validate the configuration and exit
  // --check --connect: also open the store (Redis: connect, AUTH, script load) within
  // kCheckConnectBound; unreachable exits kExitRuntime, refused settings kExitConfig.
  bool check_connect = false;
  // --envoy-env: configured by envoyproxy/ratelimit's environment variables (src/rls), serving
  // its endpoints; config_path and overrides are unused.
  bool envoy_env = false;
  // --log-level, --log-format; unset: LOG_LEVEL/LOG_FORMAT with --envoy-env, else info, text.
  std::optional<LogLevel> log_level;
  std::optional<LogFormat> log_format;
};

// Exit codes of run_server (and of ratelimitd).
inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntime = 1;  // could not listen, store unreachable at start
inline constexpr int kExitConfig = 2;   // invalid configuration or flags

// The longest --check --connect waits for the store (less when store.connect_timeout is less).
inline constexpr std::chrono::milliseconds kCheckConnectBound{3000};

// Runs the service in the calling thread until SIGTERM or SIGINT; returns an exit code.
// With envoy_env: settings from the environment (refused with exit 2 and the variable's name
// before anything starts), HTTP /json and /healthcheck, the debug listener, Prometheus, and the
// configuration directory watched and reloaded (also on SIGHUP).
// Logs to stderr, one line per event (start, listening address with the bound port,
// reloads, shutdown); never a line per request, never the admin token.
int run_server(const ServerOptions& options);

}  // namespace ratelimit::server
