// envoy_env_test.cc — src/rls/envoy_env: envoyproxy/ratelimit's variables, defaults, the
// precise error for each bad value, the start-up notices, and the Redis URL mapping.
#include "envoy_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace ratelimit::rls {
namespace {

Result<EnvoySettings> parse(std::map<std::string, std::string> env) {
  return parse_envoy_env([env](std::string_view name) -> std::optional<std::string> {
    auto it = env.find(std::string(name));
    if (it == env.end()) return std::nullopt;
    return it->second;
  });
}

std::string error_of(std::map<std::string, std::string> env) {
  auto r = parse(std::move(env));
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.status().message();
}

TEST(EnvoyEnv, DefaultsAreEnvoysExceptTheBackend) {
  auto s = parse({});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->runtime_root, "/srv/runtime_data/current");
  EXPECT_EQ(s->runtime_subdirectory, "");
  EXPECT_EQ(s->runtime_appdirectory, "config");
  EXPECT_FALSE(s->runtime_ignore_dotfiles);
  EXPECT_TRUE(s->runtime_watch_root);
  EXPECT_EQ(s->host, "0.0.0.0");
  EXPECT_EQ(s->port, 8080);
  EXPECT_EQ(s->grpc_host, "0.0.0.0");
  EXPECT_EQ(s->grpc_port, 8081);
  EXPECT_EQ(s->debug_host, "0.0.0.0");
  EXPECT_EQ(s->debug_port, 6070);
  EXPECT_EQ(s->backend, Backend::kMemory);
  EXPECT_EQ(s->redis_socket_type, "unix");
  EXPECT_EQ(s->redis_url, "/var/run/nutcracker/ratelimit.sock");
  EXPECT_EQ(s->redis_type, "SINGLE");
  EXPECT_EQ(s->redis_pool_size, 10);
  EXPECT_FLOAT_EQ(s->near_limit_ratio, 0.8F);
  EXPECT_FALSE(s->shadow_mode);
  EXPECT_FALSE(s->stop_cache_key_increment_when_overlimit);
  EXPECT_FALSE(s->limit_response_headers_enabled);
  EXPECT_EQ(s->limit_limit_header, "RateLimit-Limit");
  EXPECT_EQ(s->limit_remaining_header, "RateLimit-Remaining");
  EXPECT_EQ(s->limit_reset_header, "RateLimit-Reset");
  EXPECT_FALSE(s->merge_domain_config);
  EXPECT_EQ(s->cache_key_prefix, "");
  EXPECT_EQ(s->expiration_jitter_max_seconds, 300);
  EXPECT_EQ(s->log_level, "WARN");
  EXPECT_EQ(s->log_format, "text");
  EXPECT_FALSE(s->use_prometheus);
  EXPECT_EQ(s->prometheus_addr, ":9090");
  EXPECT_EQ(s->prometheus_path, "/metrics");
  EXPECT_EQ(config_directory(*s), "/srv/runtime_data/current/config");
  // Which store serves is said (issue 23: never silently), and statsd, on by default in
  // envoyproxy/ratelimit, is said once not to be here.
  ASSERT_EQ(s->notices.size(), 2u);
  EXPECT_EQ(s->notices[0], "BACKEND_TYPE is not set and no REDIS_* setting is: the memory store "
                           "(each instance counts alone; set BACKEND_TYPE=redis and REDIS_URL to "
                           "share counts)");
  EXPECT_EQ(s->notices[1], "ignored: USE_STATSD=true (the default) (statsd is not implemented; "
                           "Prometheus metrics are on DEBUG_PORT /metrics)");
  EXPECT_EQ(s->redis_key_layout, "envoy");
  EXPECT_EQ(s->local_cache_size_bytes, 0);
}

TEST(EnvoyEnv, EveryVariableIsRead) {
  auto s = parse({{"RUNTIME_ROOT", "/data"}, {"RUNTIME_SUBDIRECTORY", "ratelimit"},
                  {"RUNTIME_APPDIRECTORY", "cfg"}, {"RUNTIME_IGNOREDOTFILES", "true"},
                  {"RUNTIME_WATCH_ROOT", "false"}, {"HOST", "127.0.0.1"}, {"PORT", "0x1F90"},
                  {"GRPC_HOST", "::1"}, {"GRPC_PORT", "9081"}, {"DEBUG_HOST", "127.0.0.2"},
                  {"DEBUG_PORT", "0"}, {"BACKEND_TYPE", "redis"}, {"REDIS_SOCKET_TYPE", "tcp"},
                  {"REDIS_URL", "127.0.0.1:6379"}, {"REDIS_AUTH", "pw"}, {"REDIS_TYPE", "single"},
                  {"REDIS_POOL_SIZE", "4"}, {"NEAR_LIMIT_RATIO", "0.5"}, {"SHADOW_MODE", "1"},
                  {"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", "T"},
                  {"LIMIT_RESPONSE_HEADERS_ENABLED", "True"}, {"LIMIT_LIMIT_HEADER", "X-L"},
                  {"LIMIT_REMAINING_HEADER", "X-R"}, {"LIMIT_RESET_HEADER", "X-Reset"},
                  {"MERGE_DOMAIN_CONFIG", "true"}, {"CACHE_KEY_PREFIX", "rl_"},
                  {"EXPIRATION_JITTER_MAX_SECONDS", "0"}, {"LOG_LEVEL", "debug"},
                  {"LOG_FORMAT", "json"}, {"USE_PROMETHEUS", "true"},
                  {"PROMETHEUS_ADDR", "127.0.0.1:9091"}, {"PROMETHEUS_PATH", "/m"},
                  {"USE_STATSD", "false"}});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(config_directory(*s), "/data/ratelimit/cfg");
  EXPECT_TRUE(s->runtime_ignore_dotfiles);
  EXPECT_FALSE(s->runtime_watch_root);
  EXPECT_EQ(s->port, 8080);  // 0x1F90, Go's ParseInt base 0
  EXPECT_EQ(s->grpc_host, "::1");
  EXPECT_EQ(s->grpc_port, 9081);
  EXPECT_EQ(s->debug_port, 0);
  EXPECT_EQ(s->backend, Backend::kRedis);
  EXPECT_EQ(s->redis_pool_size, 4);
  EXPECT_FLOAT_EQ(s->near_limit_ratio, 0.5F);
  EXPECT_TRUE(s->shadow_mode);
  EXPECT_TRUE(s->stop_cache_key_increment_when_overlimit);
  EXPECT_TRUE(s->limit_response_headers_enabled);
  EXPECT_EQ(s->limit_reset_header, "X-Reset");
  EXPECT_TRUE(s->merge_domain_config);
  EXPECT_EQ(s->cache_key_prefix, "rl_");
  EXPECT_EQ(s->expiration_jitter_max_seconds, 0);
  EXPECT_EQ(s->log_format, "json");
  EXPECT_TRUE(s->use_prometheus);
  EXPECT_EQ(s->prometheus_path, "/m");
  EXPECT_TRUE(s->notices.empty());
  EXPECT_EQ(*redis_store_url(*s), "redis://:pw@127.0.0.1:6379");
}

TEST(EnvoyEnv, BadValuesNameTheVariable) {
  EXPECT_EQ(error_of({{"PORT", "http"}}), "PORT: 'http' is not a whole number");
  EXPECT_EQ(error_of({{"GRPC_PORT", "70000"}}), "GRPC_PORT: '70000' must be between 0 and 65535");
  EXPECT_EQ(error_of({{"DEBUG_PORT", ""}}), "DEBUG_PORT: '' is not a whole number");
  EXPECT_EQ(error_of({{"SHADOW_MODE", "yes"}}),
            "SHADOW_MODE: 'yes' is not a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False)");
  EXPECT_EQ(error_of({{"BACKEND_TYPE", "postgres"}}), "BACKEND_TYPE: 'postgres' must be redis or memory");
  EXPECT_EQ(error_of({{"BACKEND_TYPE", "memcache"}}),
            "BACKEND_TYPE: 'memcache' is not implemented here (use redis, or memory: the embedded store)");
  EXPECT_EQ(error_of({{"REDIS_SOCKET_TYPE", "udp"}}), "REDIS_SOCKET_TYPE: 'udp' must be tcp or unix");
  EXPECT_EQ(error_of({{"REDIS_TYPE", "ring"}}), "REDIS_TYPE: 'ring' must be SINGLE, SENTINEL or CLUSTER");
  EXPECT_EQ(error_of({{"REDIS_POOL_SIZE", "0"}}), "REDIS_POOL_SIZE: '0' must be between 1 and 1024");
  EXPECT_EQ(error_of({{"NEAR_LIMIT_RATIO", "high"}}), "NEAR_LIMIT_RATIO: 'high' is not a number");
  EXPECT_EQ(error_of({{"NEAR_LIMIT_RATIO", "1.5"}}), "NEAR_LIMIT_RATIO: '1.5' must be between 0 and 1");
  EXPECT_EQ(error_of({{"LIMIT_RESPONSE_HEADERS_ENABLED", "true"}, {"LIMIT_RESET_HEADER", "Bad Header"}}),
            "LIMIT_RESET_HEADER: 'Bad Header' is not a valid HTTP header name (an RFC 9110 token)");
  // Issue 23 item 5: a CR/LF meant to add a header is refused, named, and shown on one line,
  // whether or not the headers are enabled yet.
  for (const char* enabled : {"true", "false"}) {
    EXPECT_EQ(error_of({{"LIMIT_RESPONSE_HEADERS_ENABLED", enabled},
                        {"LIMIT_LIMIT_HEADER", "bad header\r\nX: y"}}),
              "LIMIT_LIMIT_HEADER: 'bad header\\r\\nX: y' is not a valid HTTP header name (an RFC 9110 token)");
    EXPECT_EQ(error_of({{"LIMIT_RESPONSE_HEADERS_ENABLED", enabled},
                        {"LIMIT_REMAINING_HEADER", "X-Remaining\r\nSet-Cookie: a=b"}}),
              "LIMIT_REMAINING_HEADER: 'X-Remaining\\r\\nSet-Cookie: a=b' is not a valid HTTP header name (an RFC 9110 token)");
  }
  EXPECT_EQ(error_of({{"LIMIT_RESET_HEADER", ""}}),
            "LIMIT_RESET_HEADER: '' is not a valid HTTP header name (an RFC 9110 token)");
  EXPECT_EQ(error_of({{"LIMIT_RESET_HEADER", "X:Reset"}}),
            "LIMIT_RESET_HEADER: 'X:Reset' is not a valid HTTP header name (an RFC 9110 token)");
  // Any value a refusal shows is one line.
  EXPECT_EQ(error_of({{"SHADOW_MODE", "yes\nFAKE: log line"}}),
            "SHADOW_MODE: 'yes\\nFAKE: log line' is not a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False)");
  EXPECT_EQ(error_of({{"EXPIRATION_JITTER_MAX_SECONDS", "-1"}}),
            "EXPIRATION_JITTER_MAX_SECONDS: '-1' must be between 0 and 31622400");
  EXPECT_EQ(error_of({{"LOG_LEVEL", "loud"}}), "LOG_LEVEL: 'loud' must be DEBUG, INFO, WARN or ERROR");
  EXPECT_EQ(error_of({{"LOG_FORMAT", "xml"}}), "LOG_FORMAT: 'xml' must be text or json");
  EXPECT_EQ(error_of({{"PROMETHEUS_PATH", "metrics"}}), "PROMETHEUS_PATH: 'metrics' must start with '/'");
  EXPECT_EQ(error_of({{"CONFIG_TYPE", "GRPC_XDS_SOTW"}}),
            "CONFIG_TYPE: 'GRPC_XDS_SOTW' (xDS configuration) is not implemented; use FILE");
  EXPECT_EQ(error_of({{"GRPC_SERVER_USE_TLS", "true"}}),
            "GRPC_SERVER_USE_TLS: 'true' is refused: gRPC TLS is not implemented; terminate TLS in front of ratelimitd");
  EXPECT_EQ(error_of({{"GRPC_UDS", "/tmp/rl.sock"}}),
            "GRPC_UDS: '/tmp/rl.sock' is refused: a Unix-socket gRPC listener is not implemented; use GRPC_HOST and GRPC_PORT");
  EXPECT_EQ(error_of({{"DISABLE_STATS", "maybe"}}),
            "DISABLE_STATS: 'maybe' is not a boolean (1, t, T, TRUE, true, True, 0, f, F, FALSE, false, False)");
}

TEST(EnvoyEnv, UnimplementedSettingsAreNamedOnce) {
  auto s = parse({{"USE_STATSD", "false"}, {"LOCAL_CACHE_SIZE_IN_BYTES", "1048576"},
                  {"TRACING_ENABLED", "true"}, {"DISABLE_STATS", "false"},
                  {"MEMCACHE_HOST_PORT", "127.0.0.1:11211"}, {"EXPIRATION_JITTER_MAX_SECONDS", "60"}});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_EQ(s->notices.size(), 5u);
  EXPECT_EQ(s->notices[0].rfind("BACKEND_TYPE is not set and no REDIS_* setting is", 0), 0u);
  // The local cache is the denial cache in front of Redis; the memory store needs none.
  EXPECT_EQ(s->notices[1], "ignored: LOCAL_CACHE_SIZE_IN_BYTES=1048576 (the memory store answers "
                           "without a round trip to save)");
  EXPECT_EQ(s->notices[2], "ignored: TRACING_ENABLED=true (tracing is not implemented)");
  EXPECT_EQ(s->notices[3], "ignored: MEMCACHE_HOST_PORT=127.0.0.1:11211 (memcache is not implemented)");
  EXPECT_EQ(s->notices[4], "ignored: EXPIRATION_JITTER_MAX_SECONDS=60 (a counter's key expires "
                           "exactly when its window ends)");
}

// Issue 23 item 6: with Redis settings and no BACKEND_TYPE, envoyproxy/ratelimit serves from
// Redis (its default); so do we, and say so. LOCAL_CACHE_SIZE_IN_BYTES sizes the denial cache;
// REDIS_KEY_LAYOUT chooses where the default rules' counters live.
TEST(EnvoyEnv, RedisSettingsWithoutBackendTypeFollowEnvoysDefault) {
  auto s = parse({{"USE_STATSD", "false"}, {"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "redis:6379"},
                  {"LOCAL_CACHE_SIZE_IN_BYTES", "1048576"}});
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->backend, Backend::kRedis);
  ASSERT_EQ(s->notices.size(), 1u);
  EXPECT_EQ(s->notices[0], "BACKEND_TYPE is not set: redis (envoyproxy/ratelimit's default), "
                           "because REDIS_URL, REDIS_SOCKET_TYPE is set");
  EXPECT_EQ(s->local_cache_size_bytes, 1048576);
  EXPECT_EQ(s->redis_key_layout, "envoy");
  auto m = parse({{"BACKEND_TYPE", "memory"}, {"REDIS_URL", "redis:6379"}, {"USE_STATSD", "false"}});
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->backend, Backend::kMemory);  // said explicitly: no notice
  EXPECT_TRUE(m->notices.empty());
  auto n = parse({{"REDIS_KEY_LAYOUT", "native"}});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(n->redis_key_layout, "native");
  EXPECT_EQ(error_of({{"REDIS_KEY_LAYOUT", "hash"}}), "REDIS_KEY_LAYOUT: 'hash' must be envoy or native");
  EXPECT_EQ(error_of({{"LOCAL_CACHE_SIZE_IN_BYTES", "-1"}}),
            "LOCAL_CACHE_SIZE_IN_BYTES: '-1' must be between 0 and 1099511627776");
}

TEST(EnvoyEnv, RedisUrlForEveryTypeAndSocket) {
  auto url = [](std::map<std::string, std::string> env) {
    env["BACKEND_TYPE"] = "redis";
    auto s = parse(env);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    auto u = redis_store_url(*s);
    return u.ok() ? *u : "error: " + u.status().message();
  };
  EXPECT_EQ(url({}), "unix:///var/run/nutcracker/ratelimit.sock");
  EXPECT_EQ(url({{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "redis:6379"}}), "redis://redis:6379");
  EXPECT_EQ(url({{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "redis:6379"}, {"REDIS_TLS", "true"}}),
            "rediss://redis:6379");
  EXPECT_EQ(url({{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "h:1"}, {"REDIS_AUTH", "u:p@ss"}}),
            "redis://u:p%40ss@h:1");
  EXPECT_EQ(url({{"REDIS_URL", "redis://x:1/2"}}), "redis://x:1/2");
  EXPECT_EQ(url({{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_TYPE", "cluster"}, {"REDIS_URL", "a:1,b:2"}}),
            "redis-cluster://a:1,b:2");
  EXPECT_EQ(url({{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_TYPE", "SENTINEL"},
                 {"REDIS_URL", "mymaster,s1:26379,s2:26379"}}),
            "redis-sentinel://s1:26379,s2:26379/mymaster");
  EXPECT_EQ(url({{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_TYPE", "SENTINEL"}, {"REDIS_URL", "s1:26379"}}),
            "error: REDIS_URL: expected the master name and a list of urls for the sentinels, in "
            "the format: <redis master name>,<sentinel1>,...,<sentineln>; got 's1:26379'");
  EXPECT_EQ(url({{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "nohost"}}),
            "error: REDIS_URL: 'nohost' in a SINGLE address is not host:port");
  EXPECT_EQ(url({{"REDIS_SOCKET_TYPE", "tcp"}, {"REDIS_URL", "a:1,b:2"}}),
            "error: REDIS_URL: REDIS_TYPE=SINGLE takes one host:port, got 'a:1,b:2'");
  EXPECT_EQ(url({{"REDIS_URL", "relative.sock"}}),
            "error: REDIS_URL: 'relative.sock' is not an absolute socket path (REDIS_SOCKET_TYPE=unix)");
  EXPECT_EQ(url({{"REDIS_TYPE", "cluster"}, {"REDIS_URL", "a:1"}}),
            "error: REDIS_TYPE: cluster needs REDIS_SOCKET_TYPE=tcp");
}

}  // namespace
}  // namespace ratelimit::rls
