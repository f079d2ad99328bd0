// distributed_metrics.h — /metrics lines of the lease and async consistency modes
// (DistributedStore's counters) and of policies counted across regions (RegionStore's), kept apart so the store factory only wires the decorator.
#pragma once

#include <memory>

#include "metrics.h"
#include "ratelimit/distributed_store.h"
#include "ratelimit/region_store.h"

namespace ratelimit::server {

// Adds the store's counters to every /metrics answer while the store lives (a weak reference:
// the metrics never keep it alive). `metrics` must outlive the registration.
void add_distributed_metrics(const std::shared_ptr<DistributedStore>& store, Metrics& metrics);
// RegionStore's counters and, per other region, its reachability and view age, the same way.
void add_region_metrics(const std::shared_ptr<RegionStore>& store, Metrics& metrics);

}  // namespace ratelimit::server
