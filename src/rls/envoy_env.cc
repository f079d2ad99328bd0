// envoy_env.cc — envoyproxy/ratelimit's environment -> EnvoySettings (see envoy_env.h).
//
// Each variable is read by one typed helper that reproduces envconfig's conversion and names
// the variable in its error. Variables we do not implement are listed once, in kNotImplemented,
// with the reason that goes into the start-up notice; the few whose absence would change what
// clients see are refused instead.
#include "envoy_env.h"

#include <arpa/inet.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "ratelimit/http.h"

namespace ratelimit::rls {
namespace {

// A value as a message can show it: control bytes (a CR/LF that was meant to split a header)
// as \r, \n or \xHH, so the refusal itself stays one line.
std::string printable(std::string_view v) {
  std::string out;
  static const char* hex = "0123456789abcdef";
  for (const unsigned char c : v) {
    if (c == '\r') out += "\\r";
    else if (c == '\n') out += "\\n";
    else if (c < 0x20 || c == 0x7f) {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

class Reader {
 public:
  explicit Reader(const EnvLookup& lookup) : lookup_(lookup) {}

  std::optional<std::string> raw(std::string_view name) const { return lookup_(name); }

  Status text(std::string_view name, std::string& out) const {
    if (auto v = lookup_(name)) out = *v;
    return {};
  }

  Status boolean(std::string_view name, bool& out) const {
    auto v = lookup_(name);
    if (!v) return {};
    auto b = parse_bool(*v);
    if (!b) return bad(name, *v, "is not a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False)");
    out = *b;
    return {};
  }

  Status integer(std::string_view name, int64_t lo, int64_t hi, int64_t& out) const {
    auto v = lookup_(name);
    if (!v) return {};
    auto n = parse_go_int(*v);
    if (!n) return bad(name, *v, "is not a whole number");
    if (*n < lo || *n > hi) {
      return bad(name, *v, "must be between " + std::to_string(lo) + " and " + std::to_string(hi));
    }
    out = *n;
    return {};
  }

  Status port(std::string_view name, uint16_t& out) const {
    int64_t p = out;
    if (Status s = integer(name, 0, 65535, p); !s.is_ok()) return s;
    out = static_cast<uint16_t>(p);
    return {};
  }

  static Status bad(std::string_view name, std::string_view value, std::string_view why) {
    return Status::invalid_argument(std::string(name) + ": '" + printable(value) + "' " +
                                    std::string(why));
  }

  static std::optional<bool> parse_bool(std::string_view v) {
    static constexpr std::array<std::string_view, 6> kTrue = {"1", "t", "T", "TRUE", "true", "True"};
    static constexpr std::array<std::string_view, 6> kFalse = {"0", "f", "F", "FALSE", "false", "False"};
    for (auto t : kTrue) if (v == t) return true;
    for (auto f : kFalse) if (v == f) return false;
    return std::nullopt;
  }

  // Go's strconv.ParseInt(v, 0, 64): optional sign, then 0x/0o/0b/0 prefixes; '_' only
  // between digits after a prefix.
  static std::optional<int64_t> parse_go_int(std::string_view v) {
    bool neg = false;
    if (!v.empty() && (v[0] == '+' || v[0] == '-')) {
      neg = v[0] == '-';
      v.remove_prefix(1);
    }
    int base = 10;
    bool prefixed = false;
    if (v.size() > 1 && v[0] == '0') {
      const char c = v[1];
      if (c == 'x' || c == 'X') { base = 16; v.remove_prefix(2); prefixed = true; }
      else if (c == 'o' || c == 'O') { base = 8; v.remove_prefix(2); prefixed = true; }
      else if (c == 'b' || c == 'B') { base = 2; v.remove_prefix(2); prefixed = true; }
      else { base = 8; v.remove_prefix(1); prefixed = true; }
    }
    std::string digits;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] == '_' && prefixed && i > 0 && i + 1 < v.size() && v[i - 1] != '_') continue;
      digits += v[i];
    }
    if (digits.empty()) return std::nullopt;
    uint64_t u = 0;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), u, base);
    if (ec != std::errc() || p != digits.data() + digits.size()) return std::nullopt;
    if (!neg && u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    if (neg && u > static_cast<uint64_t>(INT64_MAX) + 1) return std::nullopt;
    return neg ? static_cast<int64_t>(0 - u) : static_cast<int64_t>(u);
  }

 private:
  const EnvLookup& lookup_;
};

enum class Kind : uint8_t { kBool, kText };

struct NotImplemented {
  std::string_view name;
  Kind kind;
  std::string_view why;
};

// Valid envoyproxy/ratelimit settings that change nothing a client sees here: ignored, named.
constexpr std::array<NotImplemented, 31> kNotImplemented = {{
    {"USE_DOG_STATSD", Kind::kBool, "dogstatsd is not implemented; metrics are on DEBUG_PORT /metrics"},
    {"USE_DOG_STATSD_MOGRIFIERS", Kind::kText, "dogstatsd is not implemented"},
    {"STATSD_HOST", Kind::kText, "statsd is not implemented; metrics are on DEBUG_PORT /metrics"},
    {"STATSD_PORT", Kind::kText, "statsd is not implemented; metrics are on DEBUG_PORT /metrics"},
    {"EXTRA_TAGS", Kind::kText, "statsd tags are not implemented"},
    {"STATS_FLUSH_INTERVAL", Kind::kText, "statsd is not implemented"},
    {"DISABLE_STATS", Kind::kBool, "metrics are always kept (they cost one atomic add)"},
    {"PROMETHEUS_MAPPER_YAML", Kind::kText, "the metric names are fixed (see docs/envoy.md)"},
    {"PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", Kind::kBool, "no response-time histogram"},
    {"QUOTA_MODE", Kind::kBool, "global quota mode is not implemented (per-rule quota_mode is)"},
    {"RESPONSE_DYNAMIC_METADATA", Kind::kBool, "dynamic metadata is not sent"},
    {"HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", Kind::kBool, "health does not depend on the rule count"},
    {"FORCE_START_WITHOUT_INITIAL_CONFIG", Kind::kBool, "a missing or invalid configuration at start is always fatal"},
    {"GRPC_MAX_CONNECTION_AGE", Kind::kText, "connections are not aged out"},
    {"GRPC_MAX_CONNECTION_AGE_GRACE", Kind::kText, "connections are not aged out"},
    {"REDIS_PERSECOND", Kind::kBool, "per-second limits share the one Redis store"},
    {"REDIS_PERSECOND_URL", Kind::kText, "per-second limits share the one Redis store"},
    {"REDIS_PIPELINE_WINDOW", Kind::kText, "requests are pipelined as they come"},
    {"REDIS_PIPELINE_LIMIT", Kind::kText, "requests are pipelined as they come"},
    {"REDIS_CLUSTER_PIPELINE_PARALLELISM", Kind::kText, "requests are pipelined as they come"},
    {"REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", Kind::kBool, "health does not probe Redis"},
    {"REDIS_TIMEOUT", Kind::kText, "the store's own bounded timeouts apply"},
    {"REDIS_POOL_ON_EMPTY_BEHAVIOR", Kind::kText, "requests queue on the pipelined connections"},
    {"REDIS_SENTINEL_AUTH", Kind::kText, "sentinels are reached without credentials"},
    {"REDIS_TLS_CLIENT_CERT", Kind::kText, "client certificates are not implemented"},
    {"REDIS_TLS_CLIENT_KEY", Kind::kText, "client certificates are not implemented"},
    {"REDIS_TLS_CACERT", Kind::kText, "the system's CA store is used"},
    {"REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", Kind::kBool, "the host name is always verified"},
    {"TRACING_ENABLED", Kind::kBool, "tracing is not implemented"},
    {"REDIS_STARTUP_MAX_ELAPSED_TIME", Kind::kText, "the store connects in the background"},
    {"MEMCACHE_HOST_PORT", Kind::kText, "memcache is not implemented"},
}};

// Set to these, envoyproxy/ratelimit would serve something we cannot: refused.
struct Refused {
  std::string_view name;
  std::string_view why;
};
constexpr std::array<Refused, 3> kRefusedWhenEnabled = {{
    {"GRPC_SERVER_USE_TLS", "gRPC TLS is not implemented; terminate TLS in front of ratelimitd"},
    {"GRPC_UDS", "a Unix-socket gRPC listener is not implemented; use GRPC_HOST and GRPC_PORT"},
    {"MEMCACHE_SRV", "memcache is not implemented; use BACKEND_TYPE=redis or memory"},
}};

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

}  // namespace

Result<EnvoySettings> parse_envoy_env(const EnvLookup& lookup) {
  Reader r(lookup);
  EnvoySettings s;
#define RLS_TRY(expr)                      \
  do {                                     \
    if (Status st_ = (expr); !st_.is_ok()) \
      return st_;                          \
  } while (0)
  RLS_TRY(r.text("RUNTIME_ROOT", s.runtime_root));
  RLS_TRY(r.text("RUNTIME_SUBDIRECTORY", s.runtime_subdirectory));
  RLS_TRY(r.text("RUNTIME_APPDIRECTORY", s.runtime_appdirectory));
  RLS_TRY(r.boolean("RUNTIME_IGNOREDOTFILES", s.runtime_ignore_dotfiles));
  RLS_TRY(r.boolean("RUNTIME_WATCH_ROOT", s.runtime_watch_root));
  RLS_TRY(r.text("HOST", s.host));
  RLS_TRY(r.port("PORT", s.port));
  RLS_TRY(r.text("GRPC_HOST", s.grpc_host));
  RLS_TRY(r.port("GRPC_PORT", s.grpc_port));
  RLS_TRY(r.text("DEBUG_HOST", s.debug_host));
  RLS_TRY(r.port("DEBUG_PORT", s.debug_port));
  RLS_TRY(listener_host("HOST", s.host));
  RLS_TRY(listener_host("GRPC_HOST", s.grpc_host));
  RLS_TRY(listener_host("DEBUG_HOST", s.debug_host));

  if (auto b = r.raw("BACKEND_TYPE")) {
    const std::string v = *b;
    if (v == "redis") s.backend = Backend::kRedis;
    else if (v == "memory") s.backend = Backend::kMemory;
    else if (v == "memcache") {
      return Reader::bad("BACKEND_TYPE", v, "is not implemented here (use redis, or memory: the embedded store)");
    } else {
      return Reader::bad("BACKEND_TYPE", v, "must be redis or memory");
    }
  }
  if (!r.raw("BACKEND_TYPE")) {
    // envoyproxy/ratelimit's default backend is redis: follow it when Redis is configured, and
    // say which store serves either way (N replicas each counting alone must not be silent).
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
  }
  RLS_TRY(r.text("REDIS_SOCKET_TYPE", s.redis_socket_type));
  if (s.redis_socket_type != "tcp" && s.redis_socket_type != "unix") {
    return Reader::bad("REDIS_SOCKET_TYPE", s.redis_socket_type, "must be tcp or unix");
  }
  RLS_TRY(r.text("REDIS_URL", s.redis_url));
  RLS_TRY(r.text("REDIS_AUTH", s.redis_auth));
  RLS_TRY(r.text("REDIS_TYPE", s.redis_type));
  {
    const std::string t = env_upper(s.redis_type);
    if (t != "SINGLE" && t != "SENTINEL" && t != "CLUSTER") {
      return Reader::bad("REDIS_TYPE", s.redis_type, "must be SINGLE, SENTINEL or CLUSTER");
    }
  }
  int64_t pool = s.redis_pool_size;
  RLS_TRY(r.integer("REDIS_POOL_SIZE", 1, 1024, pool));
  s.redis_pool_size = static_cast<int>(pool);
  RLS_TRY(r.boolean("REDIS_TLS", s.redis_tls));
  RLS_TRY(r.text("REDIS_KEY_LAYOUT", s.redis_key_layout));
  if (s.redis_key_layout != "envoy" && s.redis_key_layout != "native") {
    return Reader::bad("REDIS_KEY_LAYOUT", s.redis_key_layout, "must be envoy or native");
  }
  RLS_TRY(r.integer("LOCAL_CACHE_SIZE_IN_BYTES", 0, int64_t{1} << 40, s.local_cache_size_bytes));
  if (s.local_cache_size_bytes > 0 && s.backend != Backend::kRedis) {
    s.notices.push_back("ignored: LOCAL_CACHE_SIZE_IN_BYTES=" +
                        std::to_string(s.local_cache_size_bytes) +
                        " (the memory store answers without a round trip to save)");
  }

  if (auto v = r.raw("NEAR_LIMIT_RATIO")) {
    const std::string& t = *v;
    char* end = nullptr;
    errno = 0;
    const double d = std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size() || errno != 0 || !std::isfinite(d)) {
      return Reader::bad("NEAR_LIMIT_RATIO", t, "is not a number");
    }
    if (d < 0 || d > 1) return Reader::bad("NEAR_LIMIT_RATIO", t, "must be between 0 and 1");
    s.near_limit_ratio = static_cast<float>(d);
  }
  RLS_TRY(r.boolean("SHADOW_MODE", s.shadow_mode));
  RLS_TRY(r.boolean("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT",
                    s.stop_cache_key_increment_when_overlimit));
  RLS_TRY(r.boolean("LIMIT_RESPONSE_HEADERS_ENABLED", s.limit_response_headers_enabled));
  RLS_TRY(r.text("LIMIT_LIMIT_HEADER", s.limit_limit_header));
  RLS_TRY(r.text("LIMIT_REMAINING_HEADER", s.limit_remaining_header));
  RLS_TRY(r.text("LIMIT_RESET_HEADER", s.limit_reset_header));
  // Checked whether or not the headers are enabled: a value that could split a response is
  // refused where it is set, not later when someone turns the headers on.
  for (auto [name, value] : {std::pair{"LIMIT_LIMIT_HEADER", &s.limit_limit_header},
                             std::pair{"LIMIT_REMAINING_HEADER", &s.limit_remaining_header},
                             std::pair{"LIMIT_RESET_HEADER", &s.limit_reset_header}}) {
    if (!http::is_field_name(*value)) {
      return Reader::bad(name, *value, "is not a valid HTTP header name (an RFC 9110 token)");
    }
  }
  RLS_TRY(r.boolean("MERGE_DOMAIN_CONFIG", s.merge_domain_config));
  RLS_TRY(r.text("CACHE_KEY_PREFIX", s.cache_key_prefix));
  if (s.cache_key_prefix.size() > 128) {
    return Reader::bad("CACHE_KEY_PREFIX", s.cache_key_prefix.substr(0, 32) + "...",
                       "is longer than 128 bytes");
  }
  RLS_TRY(r.integer("EXPIRATION_JITTER_MAX_SECONDS", 0, 86400LL * 366,
                    s.expiration_jitter_max_seconds));
  RLS_TRY(r.text("LOG_LEVEL", s.log_level));
  {
    const std::string l = env_upper(s.log_level);
    static constexpr std::array<std::string_view, 8> kLevels = {
        "TRACE", "DEBUG", "INFO", "WARN", "WARNING", "ERROR", "FATAL", "PANIC"};
    bool ok = false;
    for (auto k : kLevels) ok = ok || l == k;
    if (!ok) return Reader::bad("LOG_LEVEL", s.log_level, "must be DEBUG, INFO, WARN or ERROR");
  }
  RLS_TRY(r.text("LOG_FORMAT", s.log_format));
  if (s.log_format != "text" && s.log_format != "json") {
    return Reader::bad("LOG_FORMAT", s.log_format, "must be text or json");
  }
  RLS_TRY(r.boolean("USE_PROMETHEUS", s.use_prometheus));
  RLS_TRY(r.text("PROMETHEUS_ADDR", s.prometheus_addr));
  RLS_TRY(r.text("PROMETHEUS_PATH", s.prometheus_path));
  if (s.prometheus_path.empty() || s.prometheus_path[0] != '/') {
    return Reader::bad("PROMETHEUS_PATH", s.prometheus_path, "must start with '/'");
  }
  {
    const size_t colon = s.prometheus_addr.rfind(':');
    if (colon == std::string::npos) return Reader::bad("PROMETHEUS_ADDR", s.prometheus_addr, "is not [host]:port");
    s.prometheus_host = s.prometheus_addr.substr(0, colon);
    if (s.prometheus_host.empty()) s.prometheus_host = "0.0.0.0";
    const auto port = Reader::parse_go_int(std::string_view(s.prometheus_addr).substr(colon + 1));
    if (!port || *port < 0 || *port > 65535 || colon + 1 == s.prometheus_addr.size()) {
      return Reader::bad("PROMETHEUS_ADDR", s.prometheus_addr, "is not [host]:port (port 0 ... 65535)");
    }
    s.prometheus_port = static_cast<uint16_t>(*port);
    RLS_TRY(listener_host("PROMETHEUS_ADDR", s.prometheus_host));
  }

  // CONFIG_TYPE: only FILE (the default) is served; xDS would leave us with no rules.
  if (auto v = r.raw("CONFIG_TYPE")) {
    if (env_upper(*v) == "GRPC_XDS_SOTW") {
      return Reader::bad("CONFIG_TYPE", *v, "(xDS configuration) is not implemented; use FILE");
    }
    if (env_upper(*v) != "FILE") return Reader::bad("CONFIG_TYPE", *v, "must be FILE");
  }
  for (const Refused& x : kRefusedWhenEnabled) {
    auto v = r.raw(x.name);
    if (!v || v->empty()) continue;
    auto b = Reader::parse_bool(*v);
    if (b && !*b) continue;  // explicitly off
    return Reader::bad(x.name, *v, "is refused: " + std::string(x.why));
  }
  if (auto v = r.raw("USE_STATSD"); !v || Reader::parse_bool(*v).value_or(true)) {
    s.notices.push_back(std::string("ignored: USE_STATSD=") + (v ? *v : "true (the default)") +
                        " (statsd is not implemented; Prometheus metrics are on DEBUG_PORT /metrics)");
  }
  for (const NotImplemented& n : kNotImplemented) {
    auto v = r.raw(n.name);
    if (!v) continue;
    if (n.kind == Kind::kBool) {
      auto b = Reader::parse_bool(*v);
      if (!b) return Reader::bad(n.name, *v, "is not a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False)");
      if (!*b) continue;
    } else if (v->empty()) {
      continue;
    }
    s.notices.push_back("ignored: " + std::string(n.name) + "=" + *v + " (" + std::string(n.why) + ")");
  }
  if (r.raw("EXPIRATION_JITTER_MAX_SECONDS") && s.expiration_jitter_max_seconds > 0) {
    s.notices.push_back("ignored: EXPIRATION_JITTER_MAX_SECONDS=" +
                        std::to_string(s.expiration_jitter_max_seconds) +
                        " (a counter's key expires exactly when its window ends)");
  }
  if (!s.use_prometheus && r.raw("PROMETHEUS_ADDR")) {
    s.notices.push_back("ignored: PROMETHEUS_ADDR without USE_PROMETHEUS=true");
  }
#undef RLS_TRY
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
