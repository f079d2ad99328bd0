// envoy_env.h — `ratelimitd --envoy-env`: envoyproxy/ratelimit's environment variables, same
// names and defaults (its src/settings/settings.go), parsed into one validated value.
//
// Why a pure function of a lookup: start-up reads the process environment once; tests pass a
// map. Nothing here opens a socket or reads a file.
// Parsing follows kelseyhightower/envconfig as envoyproxy/ratelimit uses it: an unset variable
// takes the default; a variable set to "" is the empty string for text and an error for a
// bool or a number; booleans are Go's ParseBool (1 t T TRUE true True 0 f F FALSE false False),
// integers Go's ParseInt with base prefixes (0x.., 0o.., 0b.., leading 0 = octal).
// Differences, by design and reported: BACKEND_TYPE defaults to `memory` (our embedded store;
// envoyproxy/ratelimit's default is redis). Valid settings we do not implement are named in
// `notices` (one line each, for the start-up log): statsd/dogstatsd, memcache, xDS
// configuration, the local over-limit cache, tracing, the per-second Redis pool, expiry jitter,
// QUOTA_MODE and RESPONSE_DYNAMIC_METADATA. A setting that would change decisions in a way we
// cannot honour (BACKEND_TYPE=memcache, CONFIG_TYPE=GRPC_XDS_SOTW, REDIS_PERSECOND=true) is
// refused, not ignored.
// Thread-safety: plain values and a pure function.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/status.h"

namespace ratelimit::rls {

enum class Backend : uint8_t { kMemory, kRedis };

// Bytes one denial-cache entry takes (include/ratelimit/denial_cache.h: about 370 allocator
// bytes with a short key), to turn LOCAL_CACHE_SIZE_IN_BYTES into max_entries.
inline constexpr int64_t kDenialCacheEntryBytes = 370;

struct EnvoySettings {
  // Where the configuration files are: RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY.
  std::string runtime_root = "/srv/runtime_data/current";
  std::string runtime_subdirectory;
  std::string runtime_appdirectory = "config";
  bool runtime_ignore_dotfiles = false;
  bool runtime_watch_root = true;

  std::string host = "0.0.0.0";  // HTTP: /json, /healthcheck
  uint16_t port = 8080;
  std::string grpc_host = "0.0.0.0";
  uint16_t grpc_port = 8081;
  std::string debug_host = "0.0.0.0";  // /rlconfig
  uint16_t debug_port = 6070;

  // BACKEND_TYPE; when it is not set, redis if any REDIS_* setting is (envoyproxy/ratelimit's
  // default backend is redis), else memory — each named in a start-up notice, never silently.
  Backend backend = Backend::kMemory;
  std::string redis_socket_type = "unix";  // tcp | unix
  std::string redis_url = "/var/run/nutcracker/ratelimit.sock";
  std::string redis_auth;                  // "password" or "user:password"
  std::string redis_type = "SINGLE";       // SINGLE | SENTINEL | CLUSTER (any case)
  int redis_pool_size = 10;
  bool redis_tls = false;
  // REDIS_KEY_LAYOUT (ours): "envoy" (default) keeps the default rules' counters where
  // envoyproxy/ratelimit keeps them, so both can run on one Redis during a migration;
  // "native" uses ratelimitd's own layout (RedisKeyLayout).
  std::string redis_key_layout = "envoy";
  // LOCAL_CACHE_SIZE_IN_BYTES: > 0 puts the denial cache in front of the Redis store, sized
  // to that many bytes (kDenialCacheEntryBytes an entry), remembering over-limit counters
  // until their window ends as envoyproxy/ratelimit's local cache does. 0: none.
  int64_t local_cache_size_bytes = 0;

  float near_limit_ratio = 0.8F;
  bool shadow_mode = false;  // SHADOW_MODE: every OVER_LIMIT answered OK
  bool stop_cache_key_increment_when_overlimit = false;
  bool limit_response_headers_enabled = false;
  std::string limit_limit_header = "RateLimit-Limit";
  std::string limit_remaining_header = "RateLimit-Remaining";
  std::string limit_reset_header = "RateLimit-Reset";
  bool merge_domain_config = false;
  std::string cache_key_prefix;
  int64_t expiration_jitter_max_seconds = 300;
  std::string log_level = "WARN";   // DEBUG | INFO | WARN | ERROR (any case; also TRACE,
                                    // FATAL, PANIC, WARNING as logrus accepts them)
  std::string log_format = "text";  // text | json
  bool use_prometheus = false;
  std::string prometheus_addr = ":9090";
  std::string prometheus_path = "/metrics";
  // PROMETHEUS_ADDR as a listener: "[host]:port", host empty = 0.0.0.0. The listener hosts
  // (HOST, GRPC_HOST, DEBUG_HOST, this one) are literal IPv4/IPv6 addresses; "localhost" is
  // taken as 127.0.0.1 (ratelimitd binds addresses, it does not resolve names).
  std::string prometheus_host = "0.0.0.0";
  uint16_t prometheus_port = 9090;

  // Start-up lines naming each valid setting that is ignored here, e.g.
  // "ignored: USE_STATSD=true (statsd is not implemented; metrics are on DEBUG_PORT /metrics)".
  std::vector<std::string> notices;
};

using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;

// Reads every variable through `lookup`. Errors (kInvalidArgument) name the variable, the value
// and what it must be: "NEAR_LIMIT_RATIO: 'high' is not a number".
Result<EnvoySettings> parse_envoy_env(const EnvLookup& lookup);

// The process environment as an EnvLookup.
EnvLookup process_environment();

// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY, without empty parts.
std::string config_directory(const EnvoySettings& s);

// The Redis store URL for the REDIS_* settings, in the forms ratelimitd's store accepts:
// SINGLE tcp "host:port" -> redis://host:port (rediss:// with REDIS_TLS), unix "/path" ->
// unix:///path, CLUSTER "h:p,h:p" -> redis-cluster://h:p,h:p, SENTINEL "master,h:p,h:p" ->
// redis-sentinel://h:p,h:p/master; REDIS_AUTH goes into the URL's credentials. A REDIS_URL
// that already is a redis:// or rediss:// URL is kept. Errors name REDIS_URL or REDIS_TYPE.
Result<std::string> redis_store_url(const EnvoySettings& s);

// ASCII upper case, how envoyproxy/ratelimit compares REDIS_TYPE, LOG_LEVEL and CONFIG_TYPE
// (strings.ToUpper on ASCII values).
std::string env_upper(std::string s);

}  // namespace ratelimit::rls
