// server.h — ratelimitd as a library: load the configuration, open the store, serve HTTP
// until SIGTERM/SIGINT, reload on SIGHUP. tools/ratelimitd/main.cc only parses flags and
// calls run_server().
//
// Why a library: the binary stays a thin shell (STYLE.md), and everything it does is in a
// target the tests and the benchmarks can link.
#pragma once

#include "options.h"

namespace ratelimit::server {

// Runs the service in the calling thread until SIGTERM or SIGINT; returns an exit code.
// With envoy_env: settings from the environment (refused with exit 2 and the variable's name
// before anything starts), HTTP /json and /healthcheck, the debug listener, Prometheus, and the
// configuration directory watched and reloaded (also on SIGHUP).
// Logs to stderr, one line per event (start, listening address with the bound port,
// reloads, shutdown); never a line per request, never the admin token.
int run_server(const ServerOptions& options);

}  // namespace ratelimit::server
