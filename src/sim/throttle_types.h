// throttle_types.h — the settings and results of the simulator's throttling run (throttle.h):
// apart so that Report (replay.h) can carry them without the engine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ratelimit/policy.h"
#include "ratelimit/status.h"

namespace ratelimit::sim {

struct ThrottleOptions {
  std::optional<int64_t> concurrency;  // --concurrency: limit in flight per key
  Micros lease_ttl{30'000'000};        // --lease-ttl
  Micros hold{100'000};                // --hold: duration of a request that states none
  Micros max_wait{0};                  // --max-wait: 0 = no waiting
  int64_t max_queue = 100;             // --max-queue: waiters per key (with max_wait > 0)
  // Set by the run, as for the replay: the token bucket's fill at the run's start (nullopt:
  // full) and that start (nullopt: the first request).
  std::optional<double> token_fill;
  std::optional<int64_t> start_us;
  Policy token_policy = *Policy::token_bucket(10, 20);  // filled in by create()
  // Throttling runs when any of these is set.
  bool enabled() const { return concurrency.has_value() || max_wait.count() > 0; }
};

struct ThrottleResult {
  std::string algorithm;  // "fixed_window", ..., "concurrency"
  std::string policy;     // "10 per 1s", "5 in flight"
  int64_t offered = 0;
  int64_t admitted_at_once = 0;
  int64_t admitted_after_wait = 0;
  int64_t refused = 0;             // denied at arrival without waiting (or could never fit)
  int64_t refused_queue_full = 0;  // waiting on, but the key's queue held max_queue
  int64_t refused_timed_out = 0;   // would have waited past max_wait
  // Waits of the requests admitted after waiting, µs (0 when none).
  int64_t wait_p50_us = 0, wait_p99_us = 0, wait_max_us = 0;
  int64_t wait_mean_us = 0;  // over every admitted request (those at once wait 0)
  int64_t peak_in_flight = 0;          // all keys together: what the backend holds
  int64_t peak_in_flight_per_key = 0;  // the busiest key
  int64_t peak_queue = 0;              // the longest queue of one key
};

struct ThrottleReport {
  ThrottleOptions options;
  int64_t durations_from_trace = 0;  // requests whose duration came from the trace
  std::vector<ThrottleResult> results;  // the five rate algorithms, then concurrency if set
};

// Error naming the flag for an out-of-range setting.
Status validate(const ThrottleOptions& options);

}  // namespace ratelimit::sim
