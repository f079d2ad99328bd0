// distributed_metrics.h — /metrics lines of the lease and async consistency modes
// (DistributedStore's counters), kept apart so the store factory only wires the decorator.
#pragma once

#include <memory>

#include "metrics.h"
#include "ratelimit/distributed_store.h"

namespace ratelimit::server {

// Adds the store's counters to every /metrics answer while the store lives (a weak reference:
// the metrics never keep it alive). `metrics` must outlive the registration.
void add_distributed_metrics(const std::shared_ptr<DistributedStore>& store, Metrics& metrics);

}  // namespace ratelimit::server
