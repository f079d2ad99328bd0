// envoy_env.cc — envoyproxy/ratelimit's environment -> EnvoySettings (see envoy_env.h).
//
// Each variable is read by one typed helper (envoy_env_reader.h) that reproduces envconfig's
// conversion and names the variable in its error; parse_envoy_env reads them section by section
// below, in the order of envoyproxy/ratelimit's settings.go, so the first refusal is the same
// whichever way the sections are cut. Variables we do not implement are listed once, in
// envoy_env_ignored.cc, with the reason that goes into the start-up notice; the few whose
// absence would change what clients see are refused instead.
#include "envoy_env.h"

#include <arpa/inet.h>

#include <array>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "envoy_env_reader.h"
#include "ratelimit/http.h"
#include "try.h"  // RL_TRY

namespace ratelimit::rls {
namespace {

using env_detail::Reader;

// A listener host: a literal address ("localhost" becomes 127.0.0.1; "[v6]" loses its brackets).
Status listener_host(std::string_view name, std::string& host) {
  if (host == "localhost") host = "127.0.0.1";
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  in6_addr buf{};
  if (inet_pton(AF_INET, host.c_str(), &buf) == 1 || inet_pton(AF_INET6, host.c_str(), &buf) == 1) return {};
  return Status::invalid_argument(std::string(name) + ": '" + host +
                                  "' is not an IP address (ratelimitd listens on literal IPv4/IPv6 "
                                  "addresses, or localhost)");
}

// Where the rule files are, and the three listeners.
Status read_runtime_and_listeners(const Reader& r, EnvoySettings& s) {
  RL_TRY(r.text("RUNTIME_ROOT", s.runtime_root));
  RL_TRY(r.text("RUNTIME_SUBDIRECTORY", s.runtime_subdirectory));
  RL_TRY(r.text("RUNTIME_APPDIRECTORY", s.runtime_appdirectory));
  RL_TRY(r.boolean("RUNTIME_IGNOREDOTFILES", s.runtime_ignore_dotfiles));
  RL_TRY(r.boolean("RUNTIME_WATCH_ROOT", s.runtime_watch_root));
  RL_TRY(r.text("HOST", s.host));
  RL_TRY(r.port("PORT", s.port));
  RL_TRY(r.text("GRPC_HOST", s.grpc_host));
  RL_TRY(r.port("GRPC_PORT", s.grpc_port));
  RL_TRY(r.text("DEBUG_HOST", s.debug_host));
  RL_TRY(r.port("DEBUG_PORT", s.debug_port));
  RL_TRY(listener_host("HOST", s.host));
  RL_TRY(listener_host("GRPC_HOST", s.grpc_host));
  return listener_host("DEBUG_HOST", s.debug_host);
}

// BACKEND_TYPE. envoyproxy/ratelimit's default backend is redis: when it is not set, follow it
// when Redis is configured, and say which store serves either way (N replicas each counting
// alone must not be silent).
Status read_backend(const Reader& r, EnvoySettings& s) {
  if (auto b = r.raw("BACKEND_TYPE")) {
    const std::string v = *b;
    if (v == "redis") s.backend = Backend::kRedis;
    else if (v == "memory") s.backend = Backend::kMemory;
    else if (v == "memcache") {
      return Reader::bad("BACKEND_TYPE", v, "is not implemented here (use redis, or memory: the embedded store)");
    } else {
      return Reader::bad("BACKEND_TYPE", v, "must be redis or memory");
    }
    return {};
  }
  std::string set;
  for (const char* v : {"REDIS_URL", "REDIS_SOCKET_TYPE", "REDIS_TYPE", "REDIS_AUTH", "REDIS_TLS",
                        "REDIS_POOL_SIZE"}) {
    if (r.raw(v)) set += std::string(set.empty() ? "" : ", ") + v;
  }
  if (!set.empty()) {
    s.backend = Backend::kRedis;
    s.notices.push_back("BACKEND_TYPE is not set: redis (envoyproxy/ratelimit's default), "
                        "because " + set + " is set");
  } else {
    s.notices.push_back("BACKEND_TYPE is not set and no REDIS_* setting is: the memory store "
                        "(each instance counts alone; set BACKEND_TYPE=redis and REDIS_URL to "
                        "share counts)");
  }
  return {};
}

// The REDIS_* settings and the local over-limit cache in front of Redis.
Status read_redis(const Reader& r, EnvoySettings& s) {
  RL_TRY(r.one_of("REDIS_SOCKET_TYPE", s.redis_socket_type, {"tcp", "unix"}, "must be tcp or unix"));
  RL_TRY(r.text("REDIS_URL", s.redis_url));
  RL_TRY(r.text("REDIS_AUTH", s.redis_auth));
  RL_TRY(r.one_of("REDIS_TYPE", s.redis_type, {"SINGLE", "SENTINEL", "CLUSTER"},
                  "must be SINGLE, SENTINEL or CLUSTER", /*any_case=*/true));
  int64_t pool = s.redis_pool_size;
  RL_TRY(r.integer("REDIS_POOL_SIZE", 1, 1024, pool));
  s.redis_pool_size = static_cast<int>(pool);
  RL_TRY(r.boolean("REDIS_TLS", s.redis_tls));
  RL_TRY(r.one_of("REDIS_KEY_LAYOUT", s.redis_key_layout, {"envoy", "native"}, "must be envoy or native"));
  RL_TRY(r.integer("LOCAL_CACHE_SIZE_IN_BYTES", 0, int64_t{1} << 40, s.local_cache_size_bytes));
  if (s.local_cache_size_bytes > 0 && s.backend != Backend::kRedis) {
    s.notices.push_back("ignored: LOCAL_CACHE_SIZE_IN_BYTES=" +
                        std::to_string(s.local_cache_size_bytes) +
                        " (the memory store answers without a round trip to save)");
  }
  return {};
}

// NEAR_LIMIT_RATIO as Go's ParseFloat reads it, within [0, 1].
Status read_near_limit_ratio(const Reader& r, EnvoySettings& s) {
  const auto v = r.raw("NEAR_LIMIT_RATIO");
  if (!v) return {};
  const std::string& t = *v;
  char* end = nullptr;
  errno = 0;
  const double d = std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size() || errno != 0 || !std::isfinite(d)) {
    return Reader::bad("NEAR_LIMIT_RATIO", t, "is not a number");
  }
  if (d < 0 || d > 1) return Reader::bad("NEAR_LIMIT_RATIO", t, "must be between 0 and 1");
  s.near_limit_ratio = static_cast<float>(d);
  return {};
}

// How ShouldRateLimit answers and counts: the service settings, the limit headers, the keys.
Status read_service(const Reader& r, EnvoySettings& s) {
  RL_TRY(read_near_limit_ratio(r, s));
  RL_TRY(r.boolean("SHADOW_MODE", s.shadow_mode));
  RL_TRY(r.boolean("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", s.stop_cache_key_increment_when_overlimit));
  RL_TRY(r.boolean("LIMIT_RESPONSE_HEADERS_ENABLED", s.limit_response_headers_enabled));
  // Checked whether or not the headers are enabled: a value that could split a response is
  // refused where it is set, not later when someone turns the headers on.
  for (auto [name, value] : {std::pair{"LIMIT_LIMIT_HEADER", &s.limit_limit_header},
                             std::pair{"LIMIT_REMAINING_HEADER", &s.limit_remaining_header},
                             std::pair{"LIMIT_RESET_HEADER", &s.limit_reset_header}}) {
    RL_TRY(r.text(name, *value));
    if (!http::is_field_name(*value)) {
      return Reader::bad(name, *value, "is not a valid HTTP header name (an RFC 9110 token)");
    }
  }
  RL_TRY(r.boolean("MERGE_DOMAIN_CONFIG", s.merge_domain_config));
  RL_TRY(r.text("CACHE_KEY_PREFIX", s.cache_key_prefix));
  if (s.cache_key_prefix.size() > 128) {
    return Reader::bad("CACHE_KEY_PREFIX", s.cache_key_prefix.substr(0, 32) + "...", "is longer than 128 bytes");
  }
  return r.integer("EXPIRATION_JITTER_MAX_SECONDS", 0, 86400LL * 366, s.expiration_jitter_max_seconds);
}

// PROMETHEUS_ADDR "[host]:port" as the listener it names.
Status read_prometheus_addr(EnvoySettings& s) {
  const size_t colon = s.prometheus_addr.rfind(':');
  if (colon == std::string::npos) return Reader::bad("PROMETHEUS_ADDR", s.prometheus_addr, "is not [host]:port");
  s.prometheus_host = s.prometheus_addr.substr(0, colon);
  if (s.prometheus_host.empty()) s.prometheus_host = "0.0.0.0";
  const auto port = Reader::parse_go_int(std::string_view(s.prometheus_addr).substr(colon + 1));
  if (!port || *port < 0 || *port > 65535 || colon + 1 == s.prometheus_addr.size()) {
    return Reader::bad("PROMETHEUS_ADDR", s.prometheus_addr, "is not [host]:port (port 0 ... 65535)");
  }
  s.prometheus_port = static_cast<uint16_t>(*port);
  return listener_host("PROMETHEUS_ADDR", s.prometheus_host);
}

// Logs and the Prometheus listener.
Status read_logs_and_metrics(const Reader& r, EnvoySettings& s) {
  RL_TRY(r.one_of("LOG_LEVEL", s.log_level, {"TRACE", "DEBUG", "INFO", "WARN", "WARNING", "ERROR", "FATAL", "PANIC"},
                  "must be DEBUG, INFO, WARN or ERROR", /*any_case=*/true));
  RL_TRY(r.one_of("LOG_FORMAT", s.log_format, {"text", "json"}, "must be text or json"));
  RL_TRY(r.boolean("USE_PROMETHEUS", s.use_prometheus));
  RL_TRY(r.text("PROMETHEUS_ADDR", s.prometheus_addr));
  RL_TRY(r.text("PROMETHEUS_PATH", s.prometheus_path));
  if (s.prometheus_path.empty() || s.prometheus_path[0] != '/') {
    return Reader::bad("PROMETHEUS_PATH", s.prometheus_path, "must start with '/'");
  }
  return read_prometheus_addr(s);
}

}  // namespace

Result<EnvoySettings> parse_envoy_env(const EnvLookup& lookup) {
  const Reader r(lookup);
  EnvoySettings s;
  RL_TRY(read_runtime_and_listeners(r, s));
  RL_TRY(read_backend(r, s));
  RL_TRY(read_redis(r, s));
  RL_TRY(read_service(r, s));
  RL_TRY(read_logs_and_metrics(r, s));
  RL_TRY(env_detail::refuse_or_note_unimplemented(r, s));
  return s;
}

EnvLookup process_environment() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

std::string config_directory(const EnvoySettings& s) {
  std::string path = s.runtime_root;
  for (const std::string* part : {&s.runtime_subdirectory, &s.runtime_appdirectory}) {
    if (part->empty()) continue;
    if (!path.empty() && path.back() != '/') path += '/';
    path += *part;
  }
  return path;
}

std::string env_upper(std::string s) {
  for (char& c : s) if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return s;
}

}  // namespace ratelimit::rls
