// options.h — how ratelimitd is started (ServerOptions: the command line, parsed by
// tools/ratelimitd/main.cc) and how it exits (the exit codes of run_server and ratelimitd).
//
// Why apart from server.h: the composition root (app.h) and the configuration source
// (config_source.h) read the options, and run_server (server.h) drives both; with the options
// here the arrows point one way, from server.h down.
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

}  // namespace ratelimit::server
