// rlqs.h — a fleet of Envoys against ratelimitd's Rate Limit Quota Service, in the simulator
// (`ratelimit-sim rlqs`, docs/simulator.md): each Envoy reports its usage of one bucket every
// report interval and enforces the assignment it gets back locally, as Envoy's
// rate_limit_quota filter does; the server divides the bucket's global rate by max-min fairness
// of the reported demand (include/ratelimit/fair_share.h, the service's own math). Per phase of
// a demand scenario it answers how fast the assignments reach their max-min shares
// (convergence), how much of the limit is used (utilisation), how fairly (Jain's index), and
// how far the fleet goes over the global limit in any second — as a function of the interval.
//
// Why: the server decides only every interval and Envoy enforces between reports, so the
// division lags demand by up to an interval plus a TTL, and every new token bucket starts full
// (a burst of max_tokens). What that costs is a property of the interval, which a user picks;
// this measures it instead of guessing.
//
// The model (what Envoy does, from its source; what the server does, from fair_share.h):
//   - requests of a client arrive evenly spaced at its demand (a step function of time), from
//     a per-client phase offset; a client that leaves sends nothing more (its stream closed);
//   - a client's first request is decided by `no_assignment` (ALLOW_ALL by default) and at once
//     triggers its first report (time_elapsed 0: demand unknown); then it reports every
//     `interval` (allowed + denied since its last report, time_elapsed = interval);
//   - the server answers each report at once (no latency) through fair_share::BucketShares;
//     an assignment differing in its token bucket (or blanket rule) replaces the client's
//     bucket with a full one (Envoy builds a new TokenBucketImpl); an equal one only renews
//     the TTL; an expired one falls back to `no_assignment` (Envoy's expired_assignment_behavior
//     unset);
//   - a token bucket holds max_tokens and refills tokens_per_fill per fill_interval,
//     continuously (Envoy's TokenBucketImpl), one token per request.
// Invariants: deterministic (no randomness); every share and assignment is fair_share's; times
// are integer µs. Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ratelimit/status.h"

namespace ratelimit::sim {

// One Envoy: its demand over time (rps from each start time on, the first at 0), and when it
// leaves (closes its stream), if it does.
struct RlqsClient {
  std::string name;
  std::vector<std::pair<double, double>> demand;  // (from_s, rps), ascending from_s, first 0
  std::optional<double> leaves_at_s;
};

struct RlqsScenario {
  int64_t capacity_rps = 300;      // the bucket's global limit
  std::vector<double> phases_s;    // phase boundaries after 0 (a phase ends where the next starts)
  double duration_s = 0;           // the run; the last phase ends here
  std::vector<RlqsClient> clients;
};

// The scenario (issue 29): 300 rps shared by three clients wanting 10, 100 and 1,000;
// at 60 s the third drops to 20 and the second rises to 1,000; at 120 s the third leaves; 180 s.
RlqsScenario rlqs_three_clients();

struct RlqsOptions {
  std::vector<int64_t> intervals_s = {1, 2, 5, 10};  // report intervals to compare
  bool no_assignment_allows = true;                  // ALLOW_ALL (true) or DENY_ALL
  double tolerance = 0.10;                           // "converged": every share within ±10 %
  // The server's rlqs.reporting_interval (s): the interval it assumes for a client whose
  // reports have not shown one yet. 0: each run's own interval (configured to match Envoy's).
  int64_t server_interval_s = 1;
};

struct RlqsPhase {
  double from_s = 0;
  double to_s = 0;
  std::vector<int64_t> target_rps;      // max-min shares of the true demands (left clients: 0)
  std::optional<double> converged_s;    // every assignment within ±tolerance of its target
                                        // from this many seconds into the phase (nullopt: not
                                        // by its end)
  std::optional<double> settled_s;      // the same within ±1 rps (the exact share, floored)
  double utilisation = 0;               // second half: admitted / min(capacity, Σ demand)
  double jain = 0;                      // second half: Jain's index of admitted_i / target_i
};

struct RlqsRun {
  int64_t interval_s = 0;
  int64_t ttl_s = 0;
  std::vector<RlqsPhase> phases;
  int64_t worst_second_over = 0;  // most requests admitted above the limit in any whole second
  int64_t reports = 0;
};

// Runs `scenario` once per interval. InvalidArgument for a bad scenario or options (capacity
// 1 ... 10^6 rps, intervals 1 ... 3600 s, a client without demand, demands < 0 or above
// 10^6 rps, unordered times, duration over a day).
Result<std::vector<RlqsRun>> run_rlqs(const RlqsScenario& scenario, const RlqsOptions& options);

// The runs as the table ratelimit-sim rlqs prints.
std::string render_rlqs(const RlqsScenario& scenario, const std::vector<RlqsRun>& runs);

}  // namespace ratelimit::sim
