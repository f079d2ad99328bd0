// store_factory.h — builds the Store a configuration asks for (memory or Redis) and hooks its
// own gauges (memory-store keys, Redis counters) into /metrics.
// Why apart: the server code stays the same whichever store is configured; only this file
// knows the concrete store types.
#pragma once

#include <functional>
#include <memory>

#include "config.h"
#include "metrics.h"
#include "ratelimit/store.h"

namespace ratelimit::server {

struct OpenedStore {
  std::shared_ptr<Store> store;
  // Readiness for /readyz: OK when the store can decide now, else why not (no password in it).
  // Cheap (reads counters), callable from any thread while the store lives.
  std::function<Status()> ready;
};

// Errors: kInvalidArgument for a bad setting (e.g. a malformed URL), kUnavailable /
// kDeadlineExceeded when Redis cannot be reached at start. `metrics` must outlive the store.
Result<OpenedStore> open_store(const StoreConfig& config, Metrics& metrics);

}  // namespace ratelimit::server
