// capacity.h — a backend with a capacity behind a concurrency limit, in the simulator
// (`ratelimit-sim capacity`, docs/simulator.md; issue 30): `workers` servers with a service
// time each (`service` ± `jitter`), a FIFO in front of them, Poisson arrivals at a load (a
// multiple of the backend's capacity workers / service) in phases, and a limit on the requests
// in flight (admitted and not yet answered, queued or served) that refuses the rest at once.
// Each phase answers goodput (answers within the client's `timeout` per second), refusals and
// the latency of admitted requests (p50, p99), and the limit's range.
//
// Why: a fixed limit is right only for one capacity. Set high, it admits what the backend can
// only queue: latency grows by the queue, goodput falls once answers come later than clients
// wait. Set low, it refuses what the backend could serve. How wrong a fixed limit is at each
// load and capacity is what an adaptive limit must beat; this measures both on one model.
// A LimitSource is where the limit comes from: a fixed number, or one of src/core's estimators
// (include/ratelimit/adaptive_limit.h, windowed as the daemon runs them) fed each answered
// request's round trip (from admission to answer, as a lease measures it), the requests in
// flight when it was admitted (itself included) and whether its client had given up.
// Invariants: deterministic for a seed (arrivals and service times from PyRandom); integer µs;
// in flight never exceeds the limit in force at admission; not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ratelimit/adaptive_limit.h"
#include "ratelimit/policy.h"
#include "ratelimit/priority.h"
#include "ratelimit/status.h"

namespace ratelimit::sim {

struct CapacityPhase {
  double duration_s = 10;
  double load = 1;      // offered rate as a multiple of the *first* phase's capacity
  int64_t workers = 0;  // 0: as before (the first phase: the scenario's)
};

struct CapacityScenario {
  int64_t workers = 20;
  Micros service{20'000};
  double jitter = 0.1;             // each service time uniform in service × (1 ± jitter)
  Micros timeout{1'000'000};       // a client waits this long; a later answer is not goodput
  std::vector<CapacityPhase> phases;
  uint64_t seed = 42;
  // Priority classes (include/ratelimit/priority.h; empty: none), each arrival's class drawn by
  // `shares` (one per class, summing to 1). As the daemon does: a class is admitted below its
  // class_limit; at the limit a class without headroom waits up to `max_wait` (then refused),
  // its waiters served by weight (pick_class / charge_class); a class with headroom is refused.
  std::vector<algo::PriorityClass> classes;
  std::vector<double> shares;
  Micros max_wait{0};
};

// The scenarios: 50 -> 90 -> 200 -> 100 % of capacity (10 s each), then 3x capacity
// with the capacity halved halfway (20 workers, then 10).
CapacityScenario capacity_load_steps();
CapacityScenario capacity_halved_at_3x();
// Issue 30's classes: critical and sheddable (headroom 0.5) at 50 % each, 2x capacity for 20 s,
// critical waiting up to 1 s at the limit.
CapacityScenario capacity_classes_at_2x();

// Where the limit comes from. sample() is told of each answered request: its round trip
// (admission to answer), the requests in flight when it was admitted (itself included) and
// whether it was dropped (answered after the client's timeout).
class LimitSource {
 public:
  virtual ~LimitSource() = default;
  virtual std::string name() const = 0;
  virtual int64_t limit() const = 0;
  virtual void sample(int64_t now_us, int64_t rtt_us, int64_t inflight, bool dropped) = 0;
};

std::unique_ptr<LimitSource> fixed_limit(int64_t limit);
// An estimator of src/core; InvalidArgument for a config adaptive::validate refuses.
Result<std::unique_ptr<LimitSource>> adaptive_limit(const adaptive::AdaptiveConfig& config);

struct CapacityPhaseResult {
  double from_s = 0, to_s = 0;
  double load = 0;
  int64_t workers = 0;
  int64_t offered = 0, admitted = 0, refused = 0;
  double goodput_rps = 0;              // answers within the timeout, per second of the phase
  double capacity_rps = 0;             // workers / service
  int64_t p50_us = 0, p99_us = 0;      // round trips of the phase's answers
  int64_t limit_min = 0, limit_max = 0;
  struct PerClass {
    int64_t offered = 0, admitted = 0, refused = 0, waited = 0;  // waited: entered the queue
    int64_t wait_p99_us = 0, wait_max_us = 0;  // of the class's admitted requests, 0 when none waited
  };
  std::vector<PerClass> classes;  // one per scenario class, in its order
};

struct CapacityRun {
  std::string limiter;
  int64_t unloaded_p99_us = 0;  // the service time's own p99 (no queue)
  std::vector<CapacityPhaseResult> phases;
};

// Runs `scenario` with limits from `source`. InvalidArgument for a bad scenario (workers
// 1 ... 100,000, service 1 µs ... 1 h, jitter 0 ... 0.9, timeout > 0, 1 ... 100 phases of
// 0 < duration <= 1 h and 0 <= load <= 100).
Result<CapacityRun> run_capacity(const CapacityScenario& scenario, LimitSource& source);

// Runs as the table ratelimit-sim capacity prints.
std::string render_capacity(const CapacityScenario& scenario, const std::vector<CapacityRun>& runs);

}  // namespace ratelimit::sim
