// config_store.cc — the `store:` section of the native configuration (StoreConfig): memory
// (max_keys, max_bytes, shards, when_saturated, snapshot) or redis (url, pool, timeouts, on_failure, key_prefix,
// key_layout, tls, sentinel credentials), and the exact denial cache in front of either.
// Invariants: a key of the other store type is refused by name; the Redis URL is checked by the
// store's own parser (one definition of its forms; the password never appears in a message).
#include "config_sections.h"

#include "ratelimit/redis_store.h"
#include "ratelimit/store.h"

namespace ratelimit::server {

using config_detail::Parser;

namespace {

// store.tls: { ca_file, cert_file, key_file, server_name, verify } (RedisTlsOptions). The files
// are opened when the store connects, which names the one it cannot use.
Status parse_store_tls(const Parser& p, const YAML::Node& n, RedisTlsOptions& out) {
  RL_TRY(p.check_map(n, "store.tls", {"ca_file", "cert_file", "key_file", "server_name", "verify"}));
  if (n["ca_file"]) RL_TRY_ASSIGN(out.ca_file, p.string(n["ca_file"], "store.tls.ca_file"));
  if (n["cert_file"]) RL_TRY_ASSIGN(out.cert_file, p.string(n["cert_file"], "store.tls.cert_file"));
  if (n["key_file"]) RL_TRY_ASSIGN(out.key_file, p.string(n["key_file"], "store.tls.key_file"));
  if (n["server_name"]) RL_TRY_ASSIGN(out.server_name, p.string(n["server_name"], "store.tls.server_name"));
  if (n["verify"]) RL_TRY_ASSIGN(out.verify, p.boolean(n["verify"], "store.tls.verify"));
  if (out.cert_file.empty() != out.key_file.empty()) {
    return p.error(n, "store.tls: cert_file and key_file go together (a client certificate needs its key)");
  }
  return {};
}

// store.denial_cache: { max_entries, max_ttl } ({} for the defaults). The ranges are
// DenialCache's own (checked again when it is built), so a bad value is refused at load time.
Status parse_denial_cache(const Parser& p, const YAML::Node& n, DenialCacheConfig& out) {
  RL_TRY(p.check_map(n, "store.denial_cache", {"max_entries", "max_ttl"}));
  out.enabled = true;
  if (n["max_entries"]) {
    int64_t v = 0;
    RL_TRY_ASSIGN(v, p.integer(n["max_entries"], "store.denial_cache.max_entries", 1, 100'000'000));
    out.max_entries = static_cast<size_t>(v);
  }
  if (n["max_ttl"]) {
    RL_TRY_ASSIGN(out.max_ttl, p.duration(n["max_ttl"], "store.denial_cache.max_ttl"));
    if (out.max_ttl < Micros{1'000} || out.max_ttl > Micros{int64_t{366} * 86'400'000'000}) {
      return p.error(n["max_ttl"], "store.denial_cache.max_ttl must be between 1ms and 366d");
    }
  }
  return {};
}

// store.snapshot: { path, interval, on_corrupt }. The path must be absolute (ratelimitd may run
// from any directory; a relative path would move with it) and its directory is not checked here:
// the start reads the file, and a write that fails is logged and counted, never fatal.
Status parse_snapshot(const Parser& p, const YAML::Node& n, SnapshotConfig& out) {
  RL_TRY(p.check_map(n, "store.snapshot", {"path", "interval", "on_corrupt"}));
  if (!n["path"]) return p.error(n, "store.snapshot: 'path' is required (an absolute file name)");
  RL_TRY_ASSIGN(out.path, p.string(n["path"], "store.snapshot.path"));
  if (out.path.empty() || out.path.front() != '/' || out.path.back() == '/') {
    return p.error(n["path"], "store.snapshot.path must be an absolute file name, got '" + out.path + "'");
  }
  if (n["interval"]) {
    const std::string zero = n["interval"].IsScalar() ? n["interval"].Scalar() : "";
    if (zero == "0" || zero == "0s" || zero == "0ms") {
      out.interval = Micros{0};
    } else {
      RL_TRY_ASSIGN(out.interval, p.duration(n["interval"], "store.snapshot.interval"));
      if (out.interval < Micros{1'000'000} || out.interval > Micros{int64_t{86'400} * 1'000'000}) {
        return p.error(n["interval"], "store.snapshot.interval must be 0 (only at shutdown) or between 1s and 1d");
      }
    }
  }
  if (n["on_corrupt"]) {
    RL_TRY_ASSIGN(out.on_corrupt, p.one_of<SnapshotCorrupt>(n["on_corrupt"], "store.snapshot.on_corrupt",
                                                            {{"refuse", SnapshotCorrupt::kRefuse},
                                                             {"start_empty", SnapshotCorrupt::kStartEmpty}}));
  }
  return {};
}

}  // namespace

Status parse_store(const Parser& p, const YAML::Node& n, StoreConfig& out) {
  RL_TRY(p.check_map(n, "store", {"type", "max_keys", "max_bytes", "shards", "url", "connections", "pool", "connect_timeout",
                                  "command_timeout", "on_failure", "key_prefix", "tls",
                                  "require_noeviction", "sentinel_user", "sentinel_password", "denial_cache",
                                  "key_layout", "when_saturated", "snapshot"}));
  if (n["denial_cache"]) RL_TRY(parse_denial_cache(p, n["denial_cache"], out.denial_cache));
  if (!n["type"]) return p.error(n, "store: 'type' is required (memory or redis)");
  RL_TRY_ASSIGN(out.type, p.one_of<StoreType>(n["type"], "store.type",
                                               {{"memory", StoreType::kMemory}, {"redis", StoreType::kRedis}}));
  if (out.type == StoreType::kMemory) {
    for (const char* k : {"url", "connections", "pool", "connect_timeout", "command_timeout", "on_failure", "key_prefix",
                          "tls", "require_noeviction", "sentinel_user", "sentinel_password", "key_layout"}) {
      if (n[k]) return p.error(n[k], std::string("store.") + k + " applies only to type: redis");
    }
    if (n["max_keys"]) {
      int64_t v = 0;
      RL_TRY_ASSIGN(v, p.integer(n["max_keys"], "store.max_keys", 1, 1'000'000'000));
      out.max_keys = static_cast<size_t>(v);
    }
    if (n["shards"]) {
      int64_t v = 0;
      RL_TRY_ASSIGN(v, p.integer(n["shards"], "store.shards", 1, 4096));
      out.shards = static_cast<size_t>(v);
    }
    if (n["max_bytes"]) {
      int64_t v = 0;
      RL_TRY_ASSIGN(v, p.integer(n["max_bytes"], "store.max_bytes", int64_t{1} << 20, int64_t{1} << 40));
      out.max_bytes = static_cast<size_t>(v);
    }
    if (n["snapshot"]) {
      SnapshotConfig snap;
      RL_TRY(parse_snapshot(p, n["snapshot"], snap));
      out.snapshot = std::move(snap);
    }
    if (n["when_saturated"]) {  // a key flood beyond the eviction residue's room (design.md)
      RL_TRY_ASSIGN(out.when_saturated,
                    p.one_of<SaturationChoice>(n["when_saturated"], "store.when_saturated",
                                               {{"refuse", SaturationChoice::kRefuse}, {"admit", SaturationChoice::kAdmit}}));
    }
  } else {
    for (const char* k : {"max_keys", "max_bytes", "shards", "when_saturated", "snapshot"}) {
      if (n[k]) return p.error(n[k], std::string("store.") + k + " applies only to type: memory");
    }
    if (n["url"]) {
      RL_TRY_ASSIGN(out.url, p.string(n["url"], "store.url"));
      // The store's own parser: one definition of the URL forms, precise messages (never the
      // password), e.g. a database other than 0 in a redis-cluster:// URL.
      if (auto u = parse_redis_url(out.url); !u.ok()) {
        return p.error(n["url"], "store.url: " + u.status().message());
      }
    }
    if (n["tls"]) RL_TRY(parse_store_tls(p, n["tls"], out.tls));
    if (n["require_noeviction"]) RL_TRY_ASSIGN(out.require_noeviction, p.boolean(n["require_noeviction"], "store.require_noeviction"));
    if (n["sentinel_user"]) RL_TRY_ASSIGN(out.sentinel_user, p.string(n["sentinel_user"], "store.sentinel_user"));
    if (n["sentinel_password"]) RL_TRY_ASSIGN(out.sentinel_password, p.string(n["sentinel_password"], "store.sentinel_password"));
    // `pool` is accepted as another name for `connections` (the pool size).
    if (n["pool"] && n["connections"]) return p.error(n["pool"], "store: give either connections or pool, not both");
    for (const char* k : {"connections", "pool"}) {
      if (!n[k]) continue;
      int64_t v = 0;
      RL_TRY_ASSIGN(v, p.integer(n[k], std::string("store.") + k, 1, 256));
      out.connections = static_cast<size_t>(v);
    }
    if (n["connect_timeout"]) RL_TRY_ASSIGN(out.connect_timeout, p.duration(n["connect_timeout"], "store.connect_timeout"));
    if (n["command_timeout"]) RL_TRY_ASSIGN(out.command_timeout, p.duration(n["command_timeout"], "store.command_timeout"));
    if (n["key_layout"]) {  // where envoyproxy/ratelimit-style counters live (RedisKeyLayout)
      RL_TRY_ASSIGN(out.key_layout,
                    p.one_of<RedisKeyLayout>(n["key_layout"], "store.key_layout",
                                             {{"native", RedisKeyLayout::kNative}, {"envoy", RedisKeyLayout::kEnvoy}}));
    }
    if (n["on_failure"]) {
      RL_TRY_ASSIGN(out.on_failure, p.one_of<FailurePolicy>(n["on_failure"], "store.on_failure",
                                                            {{"open", FailurePolicy::kOpen}, {"closed", FailurePolicy::kClosed}}));
    }
    if (n["key_prefix"]) {
      RL_TRY_ASSIGN(out.key_prefix, p.string(n["key_prefix"], "store.key_prefix"));
      if (out.key_prefix.size() > 128) return p.error(n["key_prefix"], "store.key_prefix is longer than 128 bytes");
      if (out.key_prefix.find_first_of("{}") != std::string::npos) {
        return p.error(n["key_prefix"], "store.key_prefix must not contain '{' or '}' (they would change the hash tag)");
      }
    }
  }
  return {};
}

}  // namespace ratelimit::server
