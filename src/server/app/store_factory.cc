// store_factory.cc — memory or Redis store from a StoreConfig (see store_factory.h).
#include "store_factory.h"

#include <algorithm>
#include <chrono>
#include <string>

#include "ratelimit/denial_cache.h"
#include "ratelimit/distributed_store.h"
#include "ratelimit/http.h"
#include "ratelimit/memory_store.h"
#include "distributed_metrics.h"
#include "log.h"
#include "memory_upkeep.h"
#include "try.h"
#include "ratelimit/redis_store.h"
#include "ratelimit/region_store.h"

namespace ratelimit::server {
namespace {

// The Redis store's options for a StoreConfig (serving and --check --connect alike).
RedisStoreOptions redis_options(const StoreConfig& config) {
  RedisStoreOptions o;
  o.url = config.url;
  o.connections = config.connections;
  o.connect_timeout = std::chrono::milliseconds(http::ceil_millis(config.connect_timeout));
  o.command_timeout = std::chrono::milliseconds(http::ceil_millis(config.command_timeout));
  o.on_failure = config.on_failure;
  o.key_prefix = config.key_prefix;
  o.key_layout = config.key_layout;
  o.tls = config.tls;
  o.require_noeviction = config.require_noeviction;
  o.sentinel_user = config.sentinel_user;
  o.sentinel_password = config.sentinel_password;
  return o;
}

Result<OpenedStore> open_redis_store(const StoreConfig& config, Metrics& metrics) {
  RedisStoreOptions o = redis_options(config);
  auto store = RedisStore::connect(std::move(o));
  if (!store) return store.status();
  if (const std::string policy = (*store)->eviction_policy(); !policy.empty() && policy != "noeviction") {
    log_line("warn", "Redis has maxmemory-policy " + policy +
                         ": under memory pressure it may delete rate-limit keys and limits are then lost "
                         "silently; set maxmemory-policy noeviction (store.require_noeviction: true refuses such a "
                         "server)");
  }
  std::weak_ptr<RedisStore> weak = *store;
  metrics.add_extra([weak](std::string& out) {
    auto s = weak.lock();
    if (!s) return;
    const RedisStoreCounters c = s->counters();
    append_metric(out, StoreMetric::kRedisCommandsTotal, c.commands);
    append_metric(out, StoreMetric::kRedisErrorsTotal, c.errors);
    append_metric(out, StoreMetric::kRedisTimeoutsTotal, c.timeouts);
    append_metric(out, StoreMetric::kRedisFailedOpenTotal, c.failed_open);
    append_metric(out, StoreMetric::kRedisFailedClosedTotal, c.failed_closed);
    append_metric(out, StoreMetric::kRedisConnectsTotal, c.connects);
    append_metric(out, StoreMetric::kRedisReadyConnections, s->ready_connections());
    append_metric(out, StoreMetric::kRedisClusterMovedTotal, c.moved);
    append_metric(out, StoreMetric::kRedisClusterAskTotal, c.asked);
    append_metric(out, StoreMetric::kRedisClusterRetriesTotal, c.cluster_retries);
    append_metric(out, StoreMetric::kRedisClusterTopologyRefreshesTotal, c.topology_refreshes);
    append_metric(out, StoreMetric::kRedisEvictedKeysTotal, c.evicted_keys);
    const std::string policy = s->eviction_policy();
    append_metric(out, StoreMetric::kRedisEvictionUnsafe, uint64_t{!policy.empty() && policy != "noeviction"});
  });
  OpenedStore opened;
  opened.store = *store;
  opened.ready = [weak]() -> Status {
    auto s = weak.lock();
    if (!s) return Status::unavailable("the store is closed");
    return s->serving();  // a cluster: every slot served (issue 23 item 2)
  };
  RedisStore* raw = store->get();  // the feed must not outlive the store (the caller's duty)
  opened.watch_releases = [raw](ReleaseWatcher on_release, std::function<void()> on_subscribed) {
    return raw->watch_releases(std::move(on_release), std::move(on_subscribed));
  };
  opened.fields = *store;
  return opened;
}

Result<OpenedStore> open_inner_store(const StoreConfig& config, Metrics& metrics) {
  if (config.type == StoreType::kMemory) {
    MemoryStoreOptions o;
    o.max_keys = config.max_keys;
    o.shards = config.shards;
    o.max_bytes = config.max_bytes;
    o.when_saturated = config.when_saturated;
    auto store = std::make_shared<MemoryStore>(o);
    auto upkeep = std::make_shared<MemoryUpkeep>(store, config);
    RL_TRY(upkeep->restore());  // store.snapshot: the counts before the restart
    upkeep->add_metrics(metrics);
    OpenedStore opened;
    opened.store = std::move(store);
    opened.ready = [] { return Status(); };  // in process: ready as long as it exists
    opened.tick = [upkeep](std::chrono::steady_clock::time_point now) { return upkeep->tick(now); };
    opened.stop = [upkeep] { upkeep->final_snapshot(); };
    return opened;
  }
  return open_redis_store(config, metrics);
}

// store.denial_cache: the cache in front of the store, with its counters in /metrics.
// Readiness stays the inner store's: a cache cannot decide anything the store could not.
Result<OpenedStore> add_denial_cache(OpenedStore opened, const DenialCacheConfig& config, Metrics& metrics) {
  DenialCacheOptions o;
  o.max_entries = config.max_entries;
  o.max_ttl = config.max_ttl;
  o.remember_every_hit = config.remember_every_hit;
  auto cache = DenialCache::wrap(opened.store, o);
  if (!cache) return cache.status();
  std::weak_ptr<DenialCache> weak = *cache;
  metrics.add_extra([weak](std::string& out) {
    auto c = weak.lock();
    if (!c) return;
    const DenialCacheCounters n = c->counters();
    append_metric(out, StoreMetric::kDenialCacheHitsTotal, n.hits);
    append_metric(out, StoreMetric::kDenialCacheMissesTotal, n.misses);
    append_metric(out, StoreMetric::kDenialCacheBypassedTotal, n.bypassed);
    append_metric(out, StoreMetric::kDenialCacheInsertsTotal, n.inserts);
    append_metric(out, StoreMetric::kDenialCacheEvictionsTotal, n.evictions);
    append_metric(out, StoreMetric::kDenialCacheInvalidationsTotal, n.invalidations);
    append_metric(out, StoreMetric::kDenialCacheEntries, n.entries);
  });
  opened.store = *std::move(cache);
  return opened;
}

// The RedisStore under an opened store (through the denial cache, if any), as SharedCounts.
std::shared_ptr<Store> shared_counts_of(const OpenedStore& opened) {
  if (auto* cache = dynamic_cast<DenialCache*>(opened.store.get())) {
    // The cache holds the inner store by shared_ptr; alias it through the cache's ownership.
    return std::shared_ptr<Store>(opened.store, &cache->inner());
  }
  return opened.store;
}

// The lease/async decorator with its counters in /metrics (distributed_metrics.cc).
Result<OpenedStore> add_distributed(OpenedStore opened, std::shared_ptr<SharedCounts> shared,
                                    const StoreConfig& config, Metrics& metrics) {
  DistributedStoreOptions o;
  o.on_failure = config.on_failure;
  auto store = DistributedStore::wrap(opened.store, std::move(shared), o);
  if (!store) return store.status();
  add_distributed_metrics(*store, metrics);
  opened.store = *std::move(store);
  return opened;
}

// Policies counted across regions: a RegionStore over this region's store, the other regions'
// Redis opened lazily, reachability changes logged, its metrics registered.
Result<OpenedStore> add_regions(OpenedStore opened, const StoreConfig& config, const RegionsConfig& regions,
                                Metrics& metrics) {
  std::vector<RegionPeer> peers;
  double share = 0;
  for (const RegionConfig& r : regions.stores) {
    if (r.name == regions.self) {
      share = r.share;
      continue;
    }
    RedisStoreOptions o = redis_options(config);
    o.url = r.redis;
    o.lazy_connect = true;
    o.connections = 1;  // one key read per key in use per sync_interval: one connection carries it
    // After a partition heals, reads must resume within an interval (the convergence bound), so
    // reconnecting never waits longer than half of one.
    o.reconnect_backoff_max = std::clamp(std::chrono::duration_cast<std::chrono::milliseconds>(regions.sync_interval / 2),
                                         o.reconnect_backoff_min, o.reconnect_backoff_max);
    auto store = RedisStore::connect(std::move(o));
    if (!store) return Status(store.status().code(), "region '" + r.name + "': " + store.status().message());
    peers.push_back({r.name, *std::move(store)});
  }
  RegionStoreOptions o;
  o.region = regions.self;
  o.sync_interval = regions.sync_interval;
  o.partition_share = regions.partition_share;
  o.share = share;
  const std::string self = regions.self;
  o.on_reachability = [self](const std::string& region, bool reachable, const std::string& why) {
    if (reachable) {
      log_line("info", "region " + region + " reachable (region " + self + " reads its counts again)");
    } else {
      log_line("warn", "region " + region + " unreachable: " + why + " (region " + self +
                           " keeps deciding on the last counts it read)");
    }
  };
  auto store = RegionStore::wrap(opened.store, std::move(peers), std::move(o));
  if (!store) return store.status();
  add_region_metrics(*store, metrics);
  opened.store = *std::move(store);
  return opened;
}

}  // namespace

Result<std::string> probe_store(const StoreConfig& config, std::chrono::milliseconds bound) {
  if (config.type == StoreType::kMemory) return std::string("in process, nothing to connect to");
  RedisStoreOptions o = redis_options(config);
  o.connect_timeout = std::min(o.connect_timeout, bound);
  o.lazy_connect = false;
  const auto start = std::chrono::steady_clock::now();
  auto store = RedisStore::connect(std::move(o));
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  if (!store) {
    const bool refused = store.status().code() == StatusCode::kInvalidArgument;
    return Status(store.status().code(), std::string(refused ? "refused" : "unreachable") + " after " +
                                             std::to_string(ms.count()) + " ms: " + store.status().message());
  }
  std::string d = "connected in " + std::to_string(ms.count()) + " ms, ";
  d += (*store)->uses_functions() ? "functions loaded (FCALL)" : "scripts loaded (EVALSHA)";
  const std::string policy = (*store)->eviction_policy();
  if (!policy.empty()) d += ", maxmemory-policy " + policy + (policy == "noeviction" ? "" : " (keys may be evicted)");
  return d;
}

Result<OpenedStore> open_store(const StoreConfig& config, Metrics& metrics,
                               const std::optional<RegionsConfig>& regions) {
  auto opened = open_inner_store(config, metrics);
  if (opened && config.denial_cache.enabled) {
    opened = add_denial_cache(*std::move(opened), config.denial_cache, metrics);
  }
  if (!opened || config.type != StoreType::kRedis) return opened;
  auto shared = std::dynamic_pointer_cast<SharedCounts>(shared_counts_of(*opened));
  // Global policies (scope: global) are decided here, on this region's count plus the others'.
  if (regions) opened = add_regions(*std::move(opened), config, *regions, metrics);
  // Outermost: policies with consistency lease or async decide here; exact ones pass through
  // (to the regions, then the denial cache, if any). With the memory store every policy is
  // exact: one process holds the only count.
  if (!opened || !shared) return opened;
  return add_distributed(*std::move(opened), std::move(shared), config, metrics);
}

std::string store_description(const StoreConfig& s) {
  if (s.type == StoreType::kMemory) return "memory (max_keys " + std::to_string(s.max_keys) + ")";
  // The URL may carry a password: show only what follows '@'.
  const size_t at = s.url.rfind('@');
  const size_t scheme_end = s.url.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : s.url.substr(0, scheme_end + 3);
  return "redis " + (at == std::string::npos ? s.url : scheme + "…@" + s.url.substr(at + 1));
}

}  // namespace ratelimit::server
