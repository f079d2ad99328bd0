// envoy_startup.h — what `ratelimitd --envoy-env` resolves before it serves: the settings from
// the environment, the configuration directory and its first RuleSet, the store to open.
//
// Why one function: the serving start-up and `--envoy-env --check` must agree on every check
// (a set that --check accepts is a set the daemon starts with), so both call this.
// Thread-safety: prepare_envoy_env is reentrant; the RuleSource it returns is thread-safe.
#pragma once

#include <iosfwd>
#include <memory>
#include <string>

#include "config_dir.h"
#include "envoy_env.h"

namespace ratelimit::rls {

struct EnvoyStartup {
  EnvoySettings settings;
  std::string config_directory;         // RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY
  std::vector<std::string> watch_paths;  // for DirectoryWatcher (see watch_paths())
  std::string store;                    // "memory", or the Redis URL (redis_store_url)
  std::unique_ptr<RuleSource> rules;    // already loaded: generation 1
};

// Parses the environment, loads the configuration directory and derives the store URL.
// Errors (kInvalidArgument) are the first problem found: a variable (named), the directory,
// or "file:line: reason" of the configuration.
Result<EnvoyStartup> prepare_envoy_env(const EnvLookup& lookup);

// `ratelimitd --envoy-env --check`: prepares as above and prints to `out` what would be
// served (listeners, store, every rule as /rlconfig shows it) and to `err` the notices and any
// error. Returns 0 when the daemon would start, 2 otherwise (ratelimitd's exit codes).
int check_envoy_env(const EnvLookup& lookup, std::ostream& out, std::ostream& err);

}  // namespace ratelimit::rls
