// distributed_types.h — the settings and results of the simulator's distributed model
// (distributed.h): apart so that Report (replay.h) can carry them without the engine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ratelimit/clock.h"
#include "ratelimit/status.h"

namespace ratelimit::sim {

struct DistributedOptions {
  int64_t instances = 1;                // --instances
  int64_t regions = 1;                  // --regions
  Micros rtt{1'000};                    // --rtt: instance <-> store in its region
  Micros cross_rtt{50'000};             // --cross-rtt: between regions
  Micros sync_interval{100'000};        // --sync-interval (async pushes, lease give-backs, regions)
  int64_t lease_max = 0;                // --lease-max (0: max(1, limit / 20))
  Micros slice_ttl{1'000'000};          // --slice-ttl: a lease's longest life (lease_ttl)
  bool enabled() const { return instances > 1 || regions > 1; }
};

// Error naming the flag for a value out of range (instances 1 ... 1000, regions 1 ...
// instances, durations within the policy limits of consistency).
Status validate(const DistributedOptions& options);

struct DistributedResult {
  std::string algorithm;  // fixed_window, sliding_window_counter
  std::string mode;       // exact, lease, async, regions
  int64_t decisions = 0;
  int64_t admitted = 0;
  int64_t exact_admitted = 0;
  int64_t over = 0;   // requests this mode admitted that exact denied
  int64_t under = 0;  // requests exact admitted that this mode denied
  // Per key and window (the policy's windows): the most admitted beyond the limit, and the
  // most fewer than exact admitted.
  int64_t worst_window_over = 0;
  int64_t worst_window_under = 0;
  // The documented bound for this mode in units per window (async: over-admission, with the
  // measured per-instance rate; lease: under-admission at any moment; regions: over,
  // algo::latency_over_admission_bound with the measured per-region rate); -1: none.
  int64_t bound = -1;
  int64_t store_calls = 0;     // calls to a store (exact, reserve, give-back, push, read)
  int64_t sync_messages = 0;   // regions: reads of another region's store (in store_calls too)
  int64_t latency_p50_us = 0, latency_p99_us = 0, latency_max_us = 0;
};

struct DistributedReport {
  DistributedOptions options;
  std::vector<DistributedResult> results;
};

}  // namespace ratelimit::sim
