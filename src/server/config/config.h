// config.h — ratelimitd's configuration: the YAML file's schema as a value, its loader and the
// command-line overrides.
//
// Why a plain immutable value: the server shares one snapshot (shared_ptr<const Config>) with
// every I/O thread; a reload builds a whole new snapshot off to the side, validates it, and
// only then swaps it in, so nothing ever half-applies.
// Invariants of a Config returned by parse_config/load_config: every field is in range, every
// policy is a valid Policy named after its YAML key, at least one policy or one domain exists,
// grpc_listen and domains are set together.
// Errors are "file:line: reason" (kInvalidArgument); unknown keys are errors, so a typo is
// never silently ignored.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "transport_host.h"  // ConnectionLimits, ListenAddress
#include "ratelimit/http.h"
#include "ratelimit/memory_store.h"
#include "ratelimit/policy.h"
#include "ratelimit/priority.h"
#include "ratelimit/redis_store.h"
#include "ratelimit/status.h"
#include "quota_rules.h"
#include "quota_service.h"
#include "rls_service.h"
#include "rule_set.h"
#include "trusted_proxies.h"

namespace ratelimit::server {

enum class StoreType : uint8_t { kMemory, kRedis };

// store.denial_cache: an exact local cache of denials in front of the store (DenialCache,
// include/ratelimit/denial_cache.h). Off unless the key is present.
struct DenialCacheConfig {
  bool enabled = false;
  size_t max_entries = 100'000;
  Micros max_ttl{1'000'000};
  bool remember_every_hit = false;  // DenialCacheOptions::remember_every_hit (LOCAL_CACHE_SIZE_IN_BYTES)

  friend bool operator==(const DenialCacheConfig&, const DenialCacheConfig&) = default;
};

// store.snapshot (memory store only): the counts written to `path` every `interval` and at
// shutdown, read back at start (docs/operations.md, "Counts across a restart").
enum class SnapshotCorrupt : uint8_t {
  kRefuse,      // a file that cannot be read whole stops the start (exit code 1)
  kStartEmpty,  // logged, and the store starts empty
};
struct SnapshotConfig {
  std::string path;
  Micros interval{30'000'000};  // 0: only at shutdown
  // Start empty by default (issue 33): a limiter that cannot start takes the API down with it;
  // a fresh limit for one restart is the lesser harm, and it is logged and alertable.
  SnapshotCorrupt on_corrupt = SnapshotCorrupt::kStartEmpty;
  friend bool operator==(const SnapshotConfig&, const SnapshotConfig&) = default;
};

struct StoreConfig {
  StoreType type = StoreType::kMemory;
  DenialCacheConfig denial_cache;  // either store type
  // memory
  size_t max_keys = 1'000'000;
  size_t shards = 64;
  size_t max_bytes = size_t{256} << 20;  // MemoryStoreOptions::max_bytes
  SaturationChoice when_saturated = SaturationChoice::kRefuse;  // store.when_saturated
  std::optional<SnapshotConfig> snapshot;  // store.snapshot
  // redis
  std::string url = "redis://127.0.0.1:6379/0";
  size_t connections = 0;  // pool size; 0 = the Redis store's default (2 per core, <= 16)
  Micros connect_timeout{1'000'000};
  Micros command_timeout{250'000};
  FailurePolicy on_failure = FailurePolicy::kOpen;
  std::string key_prefix = "rl:";
  RedisKeyLayout key_layout = RedisKeyLayout::kNative;  // store.key_layout: native | envoy
  RedisTlsOptions tls;              // store.tls: for rediss:// URLs
  bool require_noeviction = false;  // refuse a Redis that may evict keys
  std::string sentinel_user;        // redis-sentinel://: the sentinels' own AUTH
  std::string sentinel_password;

  friend bool operator==(const StoreConfig&, const StoreConfig&) = default;
};

// `regions` (config_regions.h): the regions of a deployment, each with its own Redis.
struct RegionConfig {
  std::string name;
  std::string redis;  // that region's Redis URL
  double share = 0;   // its partition share; 0 = 1 / regions
  friend bool operator==(const RegionConfig&, const RegionConfig&) = default;
};
struct RegionsConfig {
  std::string self;  // `region`: this ratelimitd's
  Micros sync_interval{100'000};
  bool partition_share = false;
  std::vector<RegionConfig> stores;  // file order, self included
  friend bool operator==(const RegionsConfig&, const RegionsConfig&) = default;
};

struct PolicyConfig {
  Policy policy;        // named after its YAML key
  bool shadow = false;  // decide and count, but always admit (dark launch)
  int line = 0;         // where it was defined, for messages
  // `request_limit: { min, max }`: a request may pass its own `limit` (the capacity: limit, or
  // burst for a bucket) within [min, max], decided on the policy's counter. max 0: not allowed.
  int64_t request_limit_min = 0;
  int64_t request_limit_max = 0;
  // Waiting instead of refusing (docs/throttling.md): a request that would be denied waits up
  // to max_wait in a FIFO of at most max_queue per key. Both or neither; 0: never waits.
  Micros max_wait{0};
  int64_t max_queue = 0;
  // Leaky bucket in shape mode: hold each admitted request for its delay before answering.
  bool hold_delay = false;
  // Priority classes (concurrency, fixed limit), highest first; empty: none (requests name none).
  std::vector<algo::PriorityClass> classes{};
};

// Bounds of the waiting keys.
inline constexpr Micros kMaxPolicyWait{10 * 60 * 1'000'000LL};  // max_wait <= 10 min
inline constexpr int64_t kMaxPolicyQueue = 100'000;             // waiters per key

// The transport's limits (transport/transport_host.h: ConnectionLimits, which it reads through
// PublishedLimits) and the API's own.
struct LimitsConfig : ConnectionLimits {
  size_t max_key_length = 256;  // <= kMaxKeyLength
  int64_t max_cost = 1'000'000;  // <= kMaxCost
};

// `rlqs:` — Envoy's Rate Limit Quota Service on grpc_listen (docs/envoy.md). The rules reload;
// max_buckets needs a restart.
struct RlqsConfig {
  std::shared_ptr<const rlqs::QuotaRules> rules;  // not null
  size_t max_buckets = 100'000;
  // With store: redis, how often the instances exchange their clients' demands (quota_sync.h).
  std::chrono::milliseconds sync_interval{500};
};

// Heterogeneous lookup so a policy can be found by string_view without allocating.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

struct Config {
  std::string source;  // the file it came from ("" when built in code)
  ListenAddress listen;
  // A second HTTP listener serving only /healthz, /readyz, /metrics and /v1/reset, outside
  // the API listener's connection caps (a flood on the API port cannot reach it).
  std::optional<ListenAddress> admin_listen;
  unsigned threads = 0;  // 0 = one per core
  StoreConfig store;
  // Several regions, each deciding on its own store (store.url is this region's); absent: one.
  std::optional<RegionsConfig> regions;
  std::unordered_map<std::string, PolicyConfig, StringHash, std::equal_to<>> policies;
  std::optional<std::string> admin_token;  // absent: /v1/reset is disabled
  // /v1/peek reveals any key's quota: when set, it needs the admin token too.
  bool peek_requires_admin_token = false;
  LimitsConfig limits;
  std::string forward_auth_key_header;  // "" = the client address (below)
  // The status of a denial on /v1/forward-auth: 429, or 401/403 for proxies that understand
  // only those (nginx auth_request). `?deny_status=` overrides it per request.
  unsigned forward_auth_deny_status = 429;
  // Peers whose X-Forwarded-For / Forwarded is believed; empty = nobody (key = peer address).
  TrustedProxies trusted_proxies;
  ClientHeader client_header = ClientHeader::kXForwardedFor;
  // Envoy's rate-limit API (gRPC ShouldRateLimit): where it listens, how it answers, and the
  // descriptor rules it serves (`domains`: envoyproxy/ratelimit's files, inline). Both set or
  // neither.
  std::optional<ListenAddress> grpc_listen;
  // The Redis-protocol listener (RESP2/RESP3: CL.THROTTLE and the native commands,
  // docs/redis-protocol.md), on the same workers and caps as the API listener; absent: none.
  std::optional<ListenAddress> resp_listen;
  // A password its clients must give (AUTH / HELLO ... AUTH) before any command; absent: none
  // (the admin token still opens the admin commands). Reloadable.
  std::optional<std::string> resp_password;
  rls::ServiceOptions envoy_api;
  // null when `domains` is absent (and no `rlqs`: with rlqs alone, an empty set — every
  // ShouldRateLimit domain unknown — so grpc_listen and domains stay set together).
  std::shared_ptr<const rls::RuleSet> domains;
  std::optional<RlqsConfig> rlqs;  // Envoy's RLQS on grpc_listen; absent: not served
  // The rate-limit header fields of every decision answer (`headers:` ietf, draft6,
  // x-ratelimit, none) and whether a 429's body is application/problem+json (`problem_json:`).
  // Reloadable: they only shape answers.
  http::RenderOptions render;

  const PolicyConfig* find_policy(std::string_view name) const {
    auto it = policies.find(name);
    return it == policies.end() ? nullptr : &it->second;
  }
};

// Command-line values that replace the file's (they also apply to every reload).
struct Overrides {
  std::optional<std::string> listen;  // "host:port"
  std::optional<std::string> store;   // "memory" or "redis://..."
  std::optional<unsigned> threads;
};

// Parses YAML text. `filename` only labels messages. Errors: "filename:line: reason".
Result<Config> parse_config(std::string_view yaml, std::string_view filename);
// Reads and parses a file. Errors: unreadable file, or as parse_config.
Result<Config> load_config(const std::string& path);
// Applies overrides to a parsed config. Errors name the flag ("--listen: ...").
Status apply_overrides(Config& config, const Overrides& overrides);

// "host:port", "[v6]:port"; host must be a literal address or "localhost".
Result<ListenAddress> parse_listen(std::string_view text);

// Why a reload that changes these is refused: the listening socket, the I/O threads and the
// store (with all its counts) live as long as the process. Returns OK when `next` may replace
// `current`, else a message naming what would need a restart.
Status check_reloadable(const Config& current, const Config& next);

}  // namespace ratelimit::server
