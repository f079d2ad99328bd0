// store_factory.h — builds the Store a configuration asks for (memory or Redis) and hooks its
// own gauges (memory-store keys, Redis counters) into /metrics.
// Why apart: the server code stays the same whichever store is configured; only this file
// knows the concrete store types.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <memory>
#include <string>

#include "config.h"
#include "metrics.h"
#include "ratelimit/store.h"

namespace ratelimit::server {

struct OpenedStore {
  std::shared_ptr<Store> store;
  // Readiness for /readyz: OK when the store can decide now, else why not (no password in it).
  // Cheap (reads counters), callable from any thread while the store lives.
  std::function<Status()> ready;
  // Redis only (empty with the memory store): subscribes to the leases released through this
  // Redis by any process (RedisStore::watch_releases). The feed must not outlive the store.
  std::function<std::unique_ptr<ReleaseFeed>(ReleaseWatcher, std::function<void()>)> watch_releases;
  // Redis only (else null): the fields every process on it shares (RLQS's demand exchange,
  // src/rlqs/quota_sync.h).
  std::shared_ptr<SharedFields> fields;
  // Memory only (else empty): the control loop's poll (every 500 ms); a line to log ("warn"),
  // if any (memory_upkeep.h).
  std::function<std::optional<std::string>(std::chrono::steady_clock::time_point)> tick;
  // Memory only (else empty): at shutdown, once no request can reach the store (the last
  // store.snapshot write).
  std::function<void()> stop;
};

// Errors: kInvalidArgument for a bad setting (e.g. a malformed URL), kUnavailable /
// kDeadlineExceeded when Redis cannot be reached at start. `metrics` must outlive the store.
// With `regions`, the store is this region's Redis (config.url) behind a RegionStore that reads
// the other regions' Redis (each opened lazily, with config's options and its own URL: a region
// unreachable at start is a partition, not a start-up failure) and logs when one becomes
// unreachable and when it returns.
Result<OpenedStore> open_store(const StoreConfig& config, Metrics& metrics,
                               const std::optional<RegionsConfig>& regions = std::nullopt);

// `ratelimitd --check --connect`: opens the store as serving would — Redis: connect (TLS,
// Sentinel, Cluster as configured), AUTH/SELECT, the eviction check, FUNCTION LOAD or SCRIPT
// LOAD on the first connection — waiting at most min(store.connect_timeout, bound), then closes
// it. Returns what was found ("connected in 3 ms, functions loaded (FCALL), ..."); errors as
// open_store's, with the time waited in the message. The memory store is trivially reachable.
Result<std::string> probe_store(const StoreConfig& config, std::chrono::milliseconds bound);

// "memory (max_keys N)", or "redis <url>" with everything before '@' (a password) masked: for
// log lines.
std::string store_description(const StoreConfig& config);

}  // namespace ratelimit::server
