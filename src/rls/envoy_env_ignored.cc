// envoy_env_ignored.cc — the envoyproxy/ratelimit settings ratelimitd does not implement: the
// few whose absence would change what clients see are refused; the rest are valid settings
// that change nothing a client sees here, each named in a start-up notice with the reason.
// Listed once, in the tables below (see envoy_env.h for the policy).
#include <array>

#include "envoy_env_reader.h"
#include "try.h"  // RL_TRY

namespace ratelimit::rls::env_detail {
namespace {

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

// CONFIG_TYPE: only FILE (the default) is served; xDS would leave us with no rules. Then the
// settings refused when enabled.
Status refuse_unservable(const Reader& r) {
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
  return {};
}

}  // namespace

Status refuse_or_note_unimplemented(const Reader& r, EnvoySettings& s) {
  RL_TRY(refuse_unservable(r));
  if (auto v = r.raw("USE_STATSD"); !v || Reader::parse_bool(*v).value_or(true)) {
    s.notices.push_back(std::string("ignored: USE_STATSD=") + (v ? *v : "true (the default)") +
                        " (statsd is not implemented; Prometheus metrics are on DEBUG_PORT /metrics)");
  }
  for (const NotImplemented& n : kNotImplemented) {
    auto v = r.raw(n.name);
    if (!v) continue;
    if (n.kind == Kind::kBool) {
      auto b = Reader::parse_bool(*v);
      if (!b) return Reader::bad(n.name, *v, kNotABoolean);
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
  return {};
}

}  // namespace ratelimit::rls::env_detail
