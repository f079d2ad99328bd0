// config.cc — YAML -> Config, with a precise "file:line: reason" for anything wrong.
//
// Why so strict: a rate limiter that silently ignores `limt: 10` runs without the limit its
// operator believes in. Every map is checked against its known keys, every scalar is parsed by
// hand (no yaml-cpp conversions, which accept "0x10" or "1e3" as integers and throw), and every
// policy goes through the validating Policy constructors. yaml-cpp exceptions never leave this
// file.
#include "config.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <initializer_list>

#include <boost/asio/ip/address.hpp>
#include <yaml-cpp/yaml.h>

#include "bounded_yaml.h"
#include "config_parser.h"
#include "config_regions.h"
#include "ratelimit/redis_store.h"
#include "ratelimit/store.h"

namespace ratelimit::server {
namespace {

using config_detail::Parser;

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

Status parse_store(const Parser& p, const YAML::Node& n, StoreConfig& out) {
  RL_TRY(p.check_map(n, "store", {"type", "max_keys", "max_bytes", "shards", "url", "connections", "pool", "connect_timeout",
                                  "command_timeout", "on_failure", "key_prefix", "tls",
                                  "require_noeviction", "sentinel_user", "sentinel_password", "denial_cache",
                                  "key_layout"}));
  if (n["denial_cache"]) RL_TRY(parse_denial_cache(p, n["denial_cache"], out.denial_cache));
  if (!n["type"]) return p.error(n, "store: 'type' is required (memory or redis)");
  std::string type;
  RL_TRY_ASSIGN(type, p.string(n["type"], "store.type"));
  if (type == "memory") {
    out.type = StoreType::kMemory;
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
  } else if (type == "redis") {
    out.type = StoreType::kRedis;
    for (const char* k : {"max_keys", "max_bytes", "shards"}) {
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
      std::string l;
      RL_TRY_ASSIGN(l, p.string(n["key_layout"], "store.key_layout"));
      if (l == "native") out.key_layout = RedisKeyLayout::kNative;
      else if (l == "envoy") out.key_layout = RedisKeyLayout::kEnvoy;
      else return p.error(n["key_layout"], "store.key_layout must be native or envoy, got '" + l + "'");
    }
    if (n["on_failure"]) {
      std::string f;
      RL_TRY_ASSIGN(f, p.string(n["on_failure"], "store.on_failure"));
      if (f == "open") out.on_failure = FailurePolicy::kOpen;
      else if (f == "closed") out.on_failure = FailurePolicy::kClosed;
      else return p.error(n["on_failure"], "store.on_failure must be open or closed, got '" + f + "'");
    }
    if (n["key_prefix"]) {
      RL_TRY_ASSIGN(out.key_prefix, p.string(n["key_prefix"], "store.key_prefix"));
      if (out.key_prefix.size() > 128) return p.error(n["key_prefix"], "store.key_prefix is longer than 128 bytes");
      if (out.key_prefix.find_first_of("{}") != std::string::npos) {
        return p.error(n["key_prefix"], "store.key_prefix must not contain '{' or '}' (they would change the hash tag)");
      }
    }
  } else {
    return p.error(n["type"], "store.type must be memory or redis, got '" + type + "'");
  }
  return {};
}

// consistency, sync_interval, lease_max, lease_ttl (ConsistencyOptions in policy.h): applied to
// `policy` through Policy::with_consistency, whose refusal (an algorithm the mode is not defined
// for, a value out of range) names the reason.
Status parse_consistency_fields(const Parser& p, const YAML::Node& n, const std::string& what,
                                Policy& policy) {
  if (!n["consistency"] && !n["sync_interval"] && !n["lease_max"] && !n["lease_ttl"]) return {};
  ConsistencyOptions o;
  if (n["consistency"]) {
    std::string m;
    RL_TRY_ASSIGN(m, p.string(n["consistency"], what + ".consistency"));
    auto mode = parse_consistency(m);
    if (!mode) return p.error(n["consistency"], what + ": " + mode.status().message());
    o.mode = *mode;
  }
  if (n["sync_interval"]) RL_TRY_ASSIGN(o.sync_interval, p.duration(n["sync_interval"], what + ".sync_interval"));
  if (n["lease_ttl"]) RL_TRY_ASSIGN(o.lease_ttl, p.duration(n["lease_ttl"], what + ".lease_ttl"));
  if (n["lease_max"]) RL_TRY_ASSIGN(o.lease_max, p.integer(n["lease_max"], what + ".lease_max", 0, kMaxLimit));
  auto with = policy.with_consistency(o);
  if (!with) return p.error(n["consistency"] ? n["consistency"] : n, what + ": " + with.status().message());
  policy = *std::move(with);
  return {};
}

// `request_limit: { min: 1, max: 10000 }` (min defaults to 1): the bounds of a caller's own
// limit. Both ends must make a valid policy (Policy::with_limit), so no request inside the
// bounds can be refused for its limit.
Status parse_request_limit(const Parser& p, const YAML::Node& n, const std::string& what, PolicyConfig& pc) {
  const std::string rl = what + ".request_limit";
  RL_TRY(p.check_map(n, rl, {"min", "max"}));
  if (pc.policy.consistency().mode != Consistency::kExact) {
    // A lease or async instance decides locally against slices of one limit; a limit that
    // changes per request would not match them, so the two are not combined.
    return p.error(n, rl + " needs consistency: exact (the policy's is " +
                          consistency_name(pc.policy.consistency().mode) + ")");
  }
  if (!n["max"]) return p.error(n, rl + ": 'max' is required (the largest limit a request may ask for)");
  int64_t min = 1, max = 0;
  if (n["min"]) RL_TRY_ASSIGN(min, p.integer(n["min"], rl + ".min", 1, kMaxLimit));
  RL_TRY_ASSIGN(max, p.integer(n["max"], rl + ".max", 1, kMaxLimit));
  if (min > max) return p.error(n, rl + ": min (" + std::to_string(min) + ") is above max (" + std::to_string(max) + ")");
  for (const int64_t bound : {min, max}) {
    auto with = pc.policy.with_limit(bound);
    if (!with) return p.error(n, rl + ": a limit of " + std::to_string(bound) + " is not valid for this policy: " + with.status().message());
  }
  pc.request_limit_min = min;
  pc.request_limit_max = max;
  return {};
}

// `max_wait: 2s, max_queue: 100` (both or neither): waiting instead of refusing; `hold_delay:
// true` (leaky_bucket, mode shape): answer an admitted request after its delay.
Status parse_waiting(const Parser& p, const YAML::Node& n, const std::string& what, PolicyConfig& pc) {
  if (n["max_wait"].IsDefined() != n["max_queue"].IsDefined()) {
    return p.error(n, what + ": max_wait and max_queue go together (how long a request may wait, and how many may "
                             "wait per key)");
  }
  if (n["max_wait"]) {
    RL_TRY_ASSIGN(pc.max_wait, p.duration(n["max_wait"], what + ".max_wait"));
    if (pc.max_wait > kMaxPolicyWait) return p.error(n["max_wait"], what + ".max_wait must be at most 10m");
    RL_TRY_ASSIGN(pc.max_queue, p.integer(n["max_queue"], what + ".max_queue", 1, kMaxPolicyQueue));
    if (pc.policy.consistency().mode != Consistency::kExact) {
      // A lease/async instance decides locally on a slice; its denials carry no wake-up the
      // queue could wait for across instances.
      return p.error(n["max_wait"], what + ".max_wait needs consistency: exact (the policy's is " +
                                        consistency_name(pc.policy.consistency().mode) + ")");
    }
  }
  if (n["hold_delay"]) {
    RL_TRY_ASSIGN(pc.hold_delay, p.boolean(n["hold_delay"], what + ".hold_delay"));
    if (pc.hold_delay && !(pc.policy.algorithm() == Algorithm::kLeakyBucket && pc.policy.leaky_mode() == LeakyMode::kShape)) {
      return p.error(n["hold_delay"], what + ".hold_delay applies to leaky_bucket with mode: shape (the only "
                                             "algorithm that answers a delay)");
    }
  }
  return {};
}

Result<PolicyConfig> parse_policy(const Parser& p, const std::string& name, const YAML::Node& key,
                                  const YAML::Node& n) {
  const std::string what = "policy '" + name + "'";
  if (Status s = validate_policy_name(name); !s.is_ok()) return p.error(key, s.message());
  RL_TRY(p.check_map(n, what, {"algorithm", "limit", "window", "rate", "burst", "mode", "shadow",
                               "count_denied", "consistency", "sync_interval", "lease_max",
                               "lease_ttl", "request_limit", "max_wait", "max_queue", "hold_delay",
                               "scope"}));
  if (!n["algorithm"]) return p.error(n, what + ": 'algorithm' is required");
  std::string algo_name;
  RL_TRY_ASSIGN(algo_name, p.string(n["algorithm"], what + ".algorithm"));
  auto algo = parse_algorithm(algo_name);
  if (!algo) {
    return p.error(n["algorithm"], what + ": unknown algorithm '" + algo_name +
                                       "' (fixed_window, sliding_window_log, "
                                       "sliding_window_counter, token_bucket, leaky_bucket, "
                                       "concurrency)");
  }
  Result<Policy> policy = Status::internal("unset");
  const bool bucket = *algo == Algorithm::kTokenBucket || *algo == Algorithm::kLeakyBucket;
  if (*algo == Algorithm::kConcurrency) {
    // lease_ttl is the leases' lifetime here; the consistency keys do not apply (a concurrency
    // policy is always decided exactly).
    for (const char* k : {"window", "rate", "burst", "mode", "count_denied", "consistency", "sync_interval",
                          "lease_max"}) {
      if (n[k]) return p.error(n[k], what + ": '" + k + "' does not apply to concurrency (it takes limit and lease_ttl)");
    }
    if (!n["limit"] || !n["lease_ttl"]) return p.error(n, what + ": concurrency needs 'limit' (units held at once) and 'lease_ttl'");
    int64_t limit = 0;
    Micros ttl{0};
    RL_TRY_ASSIGN(limit, p.integer(n["limit"], what + ".limit", 1, kMaxConcurrencyLimit));
    RL_TRY_ASSIGN(ttl, p.duration(n["lease_ttl"], what + ".lease_ttl"));
    policy = Policy::concurrency(limit, ttl);
  } else if (bucket) {
    for (const char* k : {"limit", "window"}) {
      if (n[k]) return p.error(n[k], what + ": '" + k + "' is for window algorithms; a bucket takes rate and burst");
    }
    if (!n["rate"] || !n["burst"]) return p.error(n, what + ": " + algo_name + " needs 'rate' (per second) and 'burst'");
    double rate = 0;
    int64_t burst = 0;
    RL_TRY_ASSIGN(rate, p.number(n["rate"], what + ".rate"));
    RL_TRY_ASSIGN(burst, p.integer(n["burst"], what + ".burst", 1, kMaxLimit));
    if (*algo == Algorithm::kTokenBucket) {
      if (n["mode"]) return p.error(n["mode"], what + ": 'mode' applies only to leaky_bucket");
      policy = Policy::token_bucket(rate, burst);
    } else {
      LeakyMode mode = LeakyMode::kPolice;
      if (n["mode"]) {
        std::string m;
        RL_TRY_ASSIGN(m, p.string(n["mode"], what + ".mode"));
        if (m == "police") mode = LeakyMode::kPolice;
        else if (m == "shape") mode = LeakyMode::kShape;
        else return p.error(n["mode"], what + ".mode must be police or shape, got '" + m + "'");
      }
      policy = Policy::leaky_bucket(rate, burst, mode);
    }
  } else {
    for (const char* k : {"rate", "burst", "mode"}) {
      if (n[k]) return p.error(n[k], what + ": '" + k + "' is for bucket algorithms; " + algo_name + " takes limit and window");
    }
    if (!n["limit"] || !n["window"]) return p.error(n, what + ": " + algo_name + " needs 'limit' and 'window'");
    int64_t limit = 0;
    Micros window{0};
    RL_TRY_ASSIGN(limit, p.integer(n["limit"], what + ".limit", 1, kMaxLimit));
    RL_TRY_ASSIGN(window, p.duration(n["window"], what + ".window"));
    if (*algo == Algorithm::kFixedWindow) policy = Policy::fixed_window(limit, window);
    else if (*algo == Algorithm::kSlidingWindowLog) policy = Policy::sliding_window_log(limit, window);
    else policy = Policy::sliding_window_counter(limit, window);
  }
  if (!policy) return p.error(n, what + ": " + policy.status().message());
  auto named = policy->with_name(name);
  if (!named) return p.error(key, named.status().message());
  PolicyConfig pc{std::move(*named), false, Parser::line_of(key)};
  if (n["shadow"]) RL_TRY_ASSIGN(pc.shadow, p.boolean(n["shadow"], what + ".shadow"));
  if (n["count_denied"]) {
    bool cd = false;
    RL_TRY_ASSIGN(cd, p.boolean(n["count_denied"], what + ".count_denied"));
    pc.policy = pc.policy.with_count_denied(cd);
  }
  if (!pc.policy.is_concurrency()) RL_TRY(parse_consistency_fields(p, n, what, pc.policy));  // its lease_ttl is its own
  if (n["request_limit"]) RL_TRY(parse_request_limit(p, n["request_limit"], what, pc));
  RL_TRY(parse_waiting(p, n, what, pc));
  return pc;
}

Status parse_limits(const Parser& p, const YAML::Node& n, LimitsConfig& out) {
  RL_TRY(p.check_map(n, "limits", {"max_body_bytes", "max_header_bytes", "max_key_length",
                                   "max_cost", "request_timeout", "idle_timeout",
                                   "max_connections", "max_connections_per_client",
                                   "first_byte_timeout"}));
  int64_t v = 0;
  if (n["max_body_bytes"]) {
    RL_TRY_ASSIGN(v, p.integer(n["max_body_bytes"], "limits.max_body_bytes", 64, 1 << 20));
    out.max_body_bytes = static_cast<size_t>(v);
  }
  if (n["max_header_bytes"]) {
    RL_TRY_ASSIGN(v, p.integer(n["max_header_bytes"], "limits.max_header_bytes", 512, 1 << 20));
    out.max_header_bytes = static_cast<size_t>(v);
  }
  if (n["max_key_length"]) {
    RL_TRY_ASSIGN(v, p.integer(n["max_key_length"], "limits.max_key_length", 1, static_cast<int64_t>(kMaxKeyLength)));
    out.max_key_length = static_cast<size_t>(v);
  }
  if (n["max_cost"]) RL_TRY_ASSIGN(out.max_cost, p.integer(n["max_cost"], "limits.max_cost", 1, kMaxCost));
  if (n["request_timeout"]) RL_TRY_ASSIGN(out.request_timeout, p.duration(n["request_timeout"], "limits.request_timeout"));
  if (n["idle_timeout"]) RL_TRY_ASSIGN(out.idle_timeout, p.duration(n["idle_timeout"], "limits.idle_timeout"));
  if (n["max_connections"]) {
    RL_TRY_ASSIGN(v, p.integer(n["max_connections"], "limits.max_connections", 1, 1'000'000));
    out.max_connections = static_cast<size_t>(v);
  }
  if (n["max_connections_per_client"]) {
    RL_TRY_ASSIGN(v, p.integer(n["max_connections_per_client"], "limits.max_connections_per_client", 0, 1'000'000));
    out.max_connections_per_client = static_cast<size_t>(v);
  }
  if (n["first_byte_timeout"]) RL_TRY_ASSIGN(out.first_byte_timeout, p.duration(n["first_byte_timeout"], "limits.first_byte_timeout"));
  return {};
}

// `envoy_api`: how ShouldRateLimit answers (rls::ServiceOptions; envoyproxy/ratelimit's
// environment variables of the same meaning in parentheses there).
Status parse_envoy_api(const Parser& p, const YAML::Node& n, rls::ServiceOptions& out) {
  RL_TRY(p.check_map(n, "envoy_api", {"response_headers", "ietf_headers", "limit_header", "remaining_header",
                                      "reset_header", "shadow_mode",
                                      "stop_cache_key_increment_when_overlimit", "near_limit_ratio"}));
  const std::pair<const char*, bool*> flags[] = {
      {"response_headers", &out.response_headers},
      {"ietf_headers", &out.ietf_headers},
      {"shadow_mode", &out.shadow_mode},
      {"stop_cache_key_increment_when_overlimit", &out.stop_increment_when_over_limit}};
  for (const auto& [key, field] : flags) {
    if (n[key]) RL_TRY_ASSIGN(*field, p.boolean(n[key], std::string("envoy_api.") + key));
  }
  const std::pair<const char*, std::string*> names[] = {{"limit_header", &out.limit_header},
                                                        {"remaining_header", &out.remaining_header},
                                                        {"reset_header", &out.reset_header}};
  for (const auto& [key, field] : names) {
    if (!n[key]) continue;
    RL_TRY_ASSIGN(*field, p.string(n[key], std::string("envoy_api.") + key));
    if (!http::is_field_name(*field)) return p.error(n[key], std::string("envoy_api.") + key + " must be an HTTP header name");
  }
  if (const YAML::Node r = n["near_limit_ratio"]) {
    std::string text;
    RL_TRY_ASSIGN(text, p.string(r, "envoy_api.near_limit_ratio"));
    double v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc() || end != text.data() + text.size() || !(v >= 0 && v <= 1)) {
      return p.error(r, "envoy_api.near_limit_ratio must be a number from 0 to 1, got '" + text + "'");
    }
    out.near_limit_ratio = static_cast<float>(v);
  }
  return {};
}

// `domains`: a list of envoyproxy/ratelimit configuration documents, each loaded by rls::RuleSet
// from this file's own text (so its messages carry this file's lines).
Status parse_domains(const Parser& p, const YAML::Node& n, std::string_view yaml,
                     std::string_view filename, Config& c) {
  if (!n.IsSequence() || n.size() == 0) {
    return p.error(n, "'domains' must be a list of envoyproxy/ratelimit configurations "
                      "({domain: ..., descriptors: [...]}), with at least one entry");
  }
  std::vector<rls::SourceFile> files;
  for (size_t i = 0; i < n.size(); ++i) {
    files.push_back(rls::SourceFile{std::string(filename), std::string(yaml), "domains", i});
  }
  auto loaded = rls::RuleSet::load(files);
  if (!loaded) return loaded.status();
  c.domains = *loaded;
  return {};
}

Result<Config> parse_root(const Parser& p, const YAML::Node& root, std::string_view yaml,
                          std::string_view filename) {
  if (!root || root.IsNull()) return p.error(1, "the configuration is empty (at least 'policies' is needed)");
  RL_TRY(p.check_map(root, "the configuration", {"listen", "threads", "store", "policies",
                                                 "admin_token", "limits", "forward_auth",
                                                 "grpc_listen", "envoy_api", "domains",
                                                 "headers", "problem_json", "admin_listen",
                                                 "peek_requires_admin_token", "region",
                                                 "regions"}));
  Config c;
  c.source = std::string(filename);
  if (root["listen"]) {
    std::string l;
    RL_TRY_ASSIGN(l, p.string(root["listen"], "listen"));
    auto a = parse_listen(l);
    if (!a) return p.error(root["listen"], "listen: " + a.status().message());
    c.listen = *a;
  }
  if (root["threads"]) {
    int64_t t = 0;
    RL_TRY_ASSIGN(t, p.integer(root["threads"], "threads", 0, 256));
    c.threads = static_cast<unsigned>(t);
  }
  if (root["admin_listen"]) {
    std::string l;
    RL_TRY_ASSIGN(l, p.string(root["admin_listen"], "admin_listen"));
    auto a = parse_listen(l);
    if (!a) return p.error(root["admin_listen"], "admin_listen: " + a.status().message());
    if (*a == c.listen && a->port != 0) return p.error(root["admin_listen"], "admin_listen must differ from listen");
    c.admin_listen = *a;
  }
  if (root["store"]) RL_TRY(parse_store(p, root["store"], c.store));
  if (root["grpc_listen"]) {
    std::string l;
    RL_TRY_ASSIGN(l, p.string(root["grpc_listen"], "grpc_listen"));
    auto a = parse_listen(l);
    if (!a) return p.error(root["grpc_listen"], "grpc_listen: " + a.status().message());
    c.grpc_listen = *a;
  }
  if (root["envoy_api"]) RL_TRY(parse_envoy_api(p, root["envoy_api"], c.envoy_api));
  if (root["domains"]) RL_TRY(parse_domains(p, root["domains"], yaml, filename, c));
  if (c.grpc_listen && !c.domains) {
    return p.error(root["grpc_listen"], "grpc_listen serves the descriptor rules of 'domains': add at least one domain");
  }
  if (c.domains && !c.grpc_listen) {
    return p.error(root["domains"], "'domains' are served over gRPC: set grpc_listen (host:port)");
  }
  if (root["envoy_api"] && !c.grpc_listen) {
    return p.error(root["envoy_api"], "'envoy_api' configures the gRPC API: set grpc_listen and domains");
  }
  if (!root["policies"] && !c.domains) return p.error(root, "'policies' is required (at least one policy, or 'domains' for the gRPC API)");
  const YAML::Node pols = root["policies"];
  if (pols && (!pols.IsMap() || pols.size() == 0)) return p.error(pols, "'policies' must be a mapping of name -> policy, with at least one entry");
  for (auto it = pols.begin(); pols && it != pols.end(); ++it) {
    if (!it->first.IsScalar()) return p.error(it->first, "policy names must be plain strings");
    const std::string name = it->first.Scalar();
    if (c.policies.count(name)) return p.error(it->first, "policy '" + name + "' defined twice");
    PolicyConfig pc{Policy::fixed_window(1, Micros{1'000'000}).value(), false, 0};
    RL_TRY_ASSIGN(pc, parse_policy(p, name, it->first, it->second));
    c.policies.emplace(name, std::move(pc));
  }
  RL_TRY(parse_regions(p, root, c));  // after store and policies: it completes both
  if (root["admin_token"]) {
    std::string t;
    RL_TRY_ASSIGN(t, p.string(root["admin_token"], "admin_token"));
    // The token itself never appears in a message.
    if (t.size() < 16) return p.error(root["admin_token"], "admin_token must be at least 16 characters");
    if (t.size() > 1024) return p.error(root["admin_token"], "admin_token must be at most 1024 characters");
    for (char ch : t) {
      if (ch <= 0x20 || ch >= 0x7f) return p.error(root["admin_token"], "admin_token must be printable ASCII without spaces");
    }
    c.admin_token = std::move(t);
  }
  if (root["peek_requires_admin_token"]) {
    RL_TRY_ASSIGN(c.peek_requires_admin_token, p.boolean(root["peek_requires_admin_token"], "peek_requires_admin_token"));
    if (c.peek_requires_admin_token && !c.admin_token) {
      return p.error(root["peek_requires_admin_token"], "peek_requires_admin_token needs admin_token");
    }
  }
  if (root["limits"]) RL_TRY(parse_limits(p, root["limits"], c.limits));
  if (root["headers"]) {
    std::string h;
    RL_TRY_ASSIGN(h, p.string(root["headers"], "headers"));
    const auto set = http::parse_header_set(h);
    if (!set) return p.error(root["headers"], "headers must be ietf, draft6, x-ratelimit or none (got '" + h + "')");
    c.render.headers = *set;
  }
  if (root["problem_json"]) RL_TRY_ASSIGN(c.render.problem_json, p.boolean(root["problem_json"], "problem_json"));
  if (root["forward_auth"]) {
    const YAML::Node fa = root["forward_auth"];
    RL_TRY(p.check_map(fa, "forward_auth", {"key_header", "deny_status", "trusted_proxies", "client_header"}));
    if (fa["deny_status"]) {
      int64_t s = 0;
      RL_TRY_ASSIGN(s, p.integer(fa["deny_status"], "forward_auth.deny_status", 400, 499));
      if (s != 401 && s != 403 && s != 429) {
        return p.error(fa["deny_status"], "forward_auth.deny_status must be 429, 403 or 401");
      }
      c.forward_auth_deny_status = static_cast<unsigned>(s);
    }
    if (fa["trusted_proxies"]) {
      const YAML::Node tp = fa["trusted_proxies"];
      if (!tp.IsSequence()) return p.error(tp, "forward_auth.trusted_proxies must be a list of CIDR blocks (e.g. [127.0.0.1/32, \"::1\"])");
      std::vector<std::string> cidrs;
      for (const YAML::Node& e : tp) {
        std::string cidr;
        RL_TRY_ASSIGN(cidr, p.string(e, "forward_auth.trusted_proxies"));
        auto one = TrustedProxies::parse({cidr});
        if (!one) return p.error(e, "forward_auth.trusted_proxies: " + one.status().message());
        cidrs.push_back(std::move(cidr));
      }
      RL_TRY_ASSIGN(c.trusted_proxies, TrustedProxies::parse(cidrs));
    }
    if (fa["client_header"]) {
      std::string h;
      RL_TRY_ASSIGN(h, p.string(fa["client_header"], "forward_auth.client_header"));
      if (h == "x-forwarded-for") {
        c.client_header = ClientHeader::kXForwardedFor;
      } else if (h == "forwarded") {
        c.client_header = ClientHeader::kForwarded;
      } else {
        return p.error(fa["client_header"], "forward_auth.client_header must be x-forwarded-for or forwarded");
      }
    }
    if (fa["key_header"]) {
      RL_TRY_ASSIGN(c.forward_auth_key_header, p.string(fa["key_header"], "forward_auth.key_header"));
      if (!c.forward_auth_key_header.empty() && !http::is_field_name(c.forward_auth_key_header)) {
        return p.error(fa["key_header"], "forward_auth.key_header must be an HTTP header name");
      }
    }
  }
  return c;
}

}  // namespace

Result<ListenAddress> parse_listen(std::string_view text) {
  auto bad = [&](std::string_view why) {
    return Status::invalid_argument("'" + std::string(text) + "': " + std::string(why) +
                                    " (expected host:port, e.g. 127.0.0.1:8080 or [::1]:8080)");
  };
  std::string_view host, port;
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return bad("malformed IPv6 address");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return bad("missing port");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  ListenAddress a;
  a.host = host == "localhost" ? "127.0.0.1" : std::string(host);
  boost::system::error_code ec;
  (void)boost::asio::ip::make_address(a.host, ec);
  if (ec || host.empty()) return bad("host must be a literal IP address or localhost");
  unsigned v = 0;
  auto [ptr, err] = std::from_chars(port.data(), port.data() + port.size(), v);
  if (err != std::errc() || ptr != port.data() + port.size() || port.empty() || v > 65535) {
    return bad("port must be 0 ... 65535");
  }
  a.port = static_cast<uint16_t>(v);
  return a;
}

Result<Config> parse_config(std::string_view yaml, std::string_view filename) {
  Parser p(filename);
  // Nesting, nodes and aliases are bounded before yaml-cpp builds (and we walk) the document.
  if (const auto refused = yaml::check_yaml_bounds(yaml)) return p.error(refused->line, refused->reason);
  try {
    YAML::Node root = YAML::Load(std::string(yaml));
    return parse_root(p, root, yaml, filename);
  } catch (const YAML::Exception& e) {
    return p.error(e.mark.is_null() ? 1 : e.mark.line + 1, "YAML syntax: " + e.msg);
  } catch (const std::exception& e) {
    return p.error(1, std::string("cannot parse: ") + e.what());
  }
}

Result<Config> load_config(const std::string& path) {
  constexpr size_t kMaxConfigBytes = size_t{1} << 20;
  std::error_code fec;
  if (std::filesystem::is_directory(path, fec)) {
    return Status::invalid_argument(path + ": is a directory, not a configuration file");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::invalid_argument(path + ": cannot open the configuration file");
  // Read at most one byte past the bound, so /dev/zero or a huge file cannot exhaust memory.
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) return Status::invalid_argument(path + ": cannot read the configuration file");
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxConfigBytes) return Status::invalid_argument(path + ": larger than 1 MiB");
  return parse_config(text, path);
}

Status apply_overrides(Config& config, const Overrides& o) {
  if (o.listen) {
    auto a = parse_listen(*o.listen);
    if (!a) return Status::invalid_argument("--listen " + a.status().message());
    config.listen = *a;
  }
  if (o.store && config.regions) {
    return Status::invalid_argument("--store cannot replace the stores of 'regions' (this region's Redis is "
                                    "regions.stores." + config.regions->self + ".redis)");
  }
  if (o.store) {
    if (*o.store == "memory") {
      config.store = StoreConfig{};
    } else if (parse_redis_url(*o.store).ok()) {
      // Keep the file's redis tuning (pool, timeouts, on_failure) when it has one.
      if (config.store.type != StoreType::kRedis) config.store = StoreConfig{};
      config.store.type = StoreType::kRedis;
      config.store.url = *o.store;
    } else {
      return Status::invalid_argument(
          "--store must be 'memory' or a Redis URL (redis://, rediss://, unix://, "
          "redis-cluster://, rediss-cluster://, redis-sentinel://): " +
          parse_redis_url(*o.store).status().message());
    }
  }
  if (o.threads) {
    if (*o.threads > 256) return Status::invalid_argument("--threads must be 0 ... 256");
    config.threads = *o.threads;
  }
  return {};
}

Status check_reloadable(const Config& current, const Config& next) {
  std::string what;
  if (!(current.listen == next.listen)) what += " listen";
  if (current.threads != next.threads) what += " threads";
  if (!(current.store == next.store)) what += " store";
  if (current.regions != next.regions) what += " regions";
  if (current.grpc_listen != next.grpc_listen) what += " grpc_listen";
  if (current.admin_listen != next.admin_listen) what += " admin_listen";
  const rls::ServiceOptions& a = current.envoy_api;
  const rls::ServiceOptions& b = next.envoy_api;
  if (a.response_headers != b.response_headers || a.ietf_headers != b.ietf_headers ||
      a.limit_header != b.limit_header ||
      a.remaining_header != b.remaining_header || a.reset_header != b.reset_header ||
      a.shadow_mode != b.shadow_mode ||
      a.stop_increment_when_over_limit != b.stop_increment_when_over_limit ||
      a.near_limit_ratio != b.near_limit_ratio) {
    what += " envoy_api";
  }
  if (what.empty()) return {};
  return Status::invalid_argument("changed setting(s) need a restart:" + what +
                                  " (the running configuration stays)");
}

}  // namespace ratelimit::server
