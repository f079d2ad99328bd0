// server.h — ratelimitd as a library: load the configuration, open the store, serve HTTP
// until SIGTERM/SIGINT, reload on SIGHUP. tools/ratelimitd/main.cc only parses flags and
// calls run_server().
//
// Why a library: the binary stays a thin shell (STYLE.md), and everything it does is in a
// target the tests and the benchmarks can link.
#pragma once

#include <optional>
#include <string>

#include "config.h"

namespace ratelimit::server {

struct ServerOptions {
  std::string config_path;  // required
  Overrides overrides;      // --listen, --store, --threads
  bool check_only = false;  // --check: validate the configuration and exit
};

// Exit codes of run_server (and of ratelimitd).
inline constexpr int kExitOk = 0;
inline constexpr int kExitRuntime = 1;  // could not listen, store unreachable at start
inline constexpr int kExitConfig = 2;   // invalid configuration or flags

// Runs the service in the calling thread until SIGTERM or SIGINT; returns an exit code.
// Logs to stderr, one line per event (start, listening address with the bound port,
// reloads, shutdown); never a line per request, never the admin token.
int run_server(const ServerOptions& options);

}  // namespace ratelimit::server
