// replay.h — the replay engine: feeds a time-ordered request stream through all five
// algorithms, one independent state per client key and algorithm, and tallies a report.
//
// Why: this is ratelimit-sim's core. It holds no rate-limit math of its own: every decision is
// algo::decide() from the library (include/ratelimit/algorithms.h) on per-key AlgorithmState,
// exactly as the memory store makes it, with a manual clock (the request's own time).
// Invariants:
//   - Requests are added in non-decreasing time order (add() refuses a step back).
//   - Every key's token bucket holds `token_fill` tokens at the run's start time (the pattern's
//     origin, or the first request of a trace) and refills from there; other states start
//     fresh. Because of this, dropping an idle key (algo::idle_at_us <= now: its state equals a
//     fresh one) and re-creating it later gives the same decisions, so memory stays bounded by
//     the keys active at once, not by the keys ever seen.
//   - Counts are of requests (a request of cost 5 is one request, admitted or denied whole).
//   - "Peak admitted" is the largest number of admitted requests, over all keys together, in
//     any half-open interval [s, s + P) where P is the peak window (default: the policy's own
//     window(); for the buckets that is burst / rate, the time to drain a full bucket).
//     "Peak admitted per key" is the same for one key at a time, the largest over the keys:
//     the figure to hold against the policy's limit. A key is dropped only once its
//     admissions have also left the peak window, so both peaks are exact.
//   - Per-key tallies (for the top-keys table) are exact while at most max_tracked_keys keys
//     have been seen; beyond that the table keeps the busiest (when it reaches twice that, the
//     half with the fewest requests is dropped), and a key's counts may then miss up to
//     Report::top_keys_error requests from before it was last dropped.
// Not thread-safe: one Replay per thread.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ratelimit/algorithms.h"
#include "ratelimit/policy.h"
#include "ratelimit/status.h"
#include "distributed_types.h"
#include "throttle_types.h"

namespace ratelimit::sim {

// The simulator compares the rate algorithms (concurrency joins as a throttle lane, throttle.h):
// lane i is the rate algorithm of index i in kAlgorithmTable (policy.h).
inline constexpr size_t kAlgorithms = kRateAlgorithmCount;

// The parameters of the five policies. Defaults: the published comparison's.
struct PolicyParams {
  int64_t window_limit = 10;             // fixed window, sliding log, sliding counter
  Micros window{1'000'000};              // their window
  double token_rate = 10;                // tokens per second
  int64_t token_burst = 20;
  double leaky_rate = 10;                // units per second
  int64_t leaky_burst = 20;
  LeakyMode leaky_mode = LeakyMode::kPolice;
};

// One policy per rate algorithm, in table order (policies[i].algorithm() is Algorithm i):
// fixed_window, sliding_window_log, sliding_window_counter, token_bucket, leaky_bucket. Error
// (naming the flag) if any parameter is out of range.
Result<std::array<Policy, kAlgorithms>> make_policies(const PolicyParams& params);

// "10 per 1s", "10/s burst 20", "10/s burst 20 shape".
std::string describe_policy(const Policy& policy);

struct ReplayOptions {
  explicit ReplayOptions(std::array<Policy, kAlgorithms> p) : policies(std::move(p)) {}
  std::array<Policy, kAlgorithms> policies;
  // Tokens in every key's token bucket at the start (0 ... burst); nullopt = full.
  std::optional<double> token_fill;
  // Start of the run (the time token_fill refers to); nullopt = the first request's time.
  std::optional<int64_t> start_us;
  // Peak window for every algorithm; nullopt = each policy's window().
  std::optional<Micros> peak_window;
  // Chart: individual requests are kept while the run has at most this many (beyond it the
  // chart shows per-interval counts only).
  size_t max_chart_requests = 20'000;
  // Leaky bucket departures listed individually (count, first and last are always kept).
  size_t max_departures = 100'000;
  // Keys in the report's top-keys table, and keys tallied one by one (see the invariants).
  size_t top_keys = 10;
  size_t max_tracked_keys = 100'000;
};

// Per-interval figures over the whole run, in at most kMaxBins intervals whose width grows
// as the run does (constant memory for any trace length) through 1, 2, 10, 20, 100 ... ms —
// always 1 or 2 x 10^k µs, so a chart can group them into bars of 1, 2 or 5 x 10^k:
// admitted and denied requests, leaky-bucket departures (counts, summed when intervals
// merge), and the largest per-key count of admissions within the peak window seen at an
// admission in the interval (the maximum, kept when intervals merge). The origin is
// set_origin()'s (the run's start), else the first add()'s time; every later time must be
// >= it.
struct RateBins {
  static constexpr size_t kMaxBins = 2048;
  int64_t origin_us = 0;
  int64_t width_us = 1'000;  // 1 ms to start with
  std::vector<int64_t> admitted;
  std::vector<int64_t> denied;
  std::vector<int64_t> departed;
  std::vector<int64_t> key_peak;
  void set_origin(int64_t t_us) {
    origin_us = t_us;
    has_origin_ = true;
  }
  void add(int64_t t_us, bool allowed, int64_t key_window_count = 0);
  void add_departure(int64_t t_us);

 private:
  bool has_origin_ = false;
  size_t index_for(int64_t t_us);  // merges until t_us fits, grows the vectors
};

struct ChartLane {
  std::vector<int64_t> admitted_us;   // when complete
  std::vector<int64_t> denied_us;     // when complete
  std::vector<int64_t> departures_us; // leaky bucket, when complete
  RateBins bins;
};

struct ChartData {
  bool complete = true;  // every request is in the lanes' lists (else only bins)
  std::array<ChartLane, kAlgorithms> lanes;
};

struct AlgorithmResult {
  explicit AlgorithmResult(Policy p) : policy(std::move(p)) {}
  Policy policy;
  int64_t requests = 0;
  int64_t admitted = 0;
  int64_t denied = 0;
  // Distinct keys denied at least once. Counted through a set of 64-bit key hashes (8 bytes
  // and a hash-set node per limited key, whatever the key's length), so two keys could
  // collide: with a million limited keys the chance is about 3e-8.
  int64_t clients_limited = 0;
  int64_t peak_admitted = 0;
  int64_t peak_admitted_per_key = 0;
  Micros peak_window{0};
  int64_t marked_requests = 0;  // pattern C: the attack requests
  int64_t marked_admitted = 0;
  // Leaky bucket only: admitted request k departs at t_k + reset_after (Decision of its
  // admission: the time for the virtual queue to drain the level after adding it).
  int64_t departures = 0;
  int64_t first_departure_us = 0;
  int64_t last_departure_us = 0;
  std::vector<int64_t> departure_list_us;  // up to max_departures, in admission order
};

// One key's tallies, per algorithm in report order.
struct KeyRow {
  std::string key;
  int64_t offered = 0;
  std::array<int64_t, kAlgorithms> admitted{};
  std::array<int64_t, kAlgorithms> peak{};  // admitted within one peak window, at most
};

struct Report {
  std::string title;          // "pattern C", "trace access.log"
  std::string description;    // what the stream is
  int64_t requests = 0;
  int64_t first_us = 0;       // first and last request time (0 if none)
  int64_t last_us = 0;
  int64_t start_us = 0;       // run start (token fill reference)
  int64_t marked_first_us = -1;  // first and last marked (attack) request; -1 if none
  int64_t marked_last_us = -1;
  std::optional<double> token_fill;  // nullopt = full
  int64_t skipped_lines = 0;  // trace lines that did not parse and were skipped
  std::vector<std::string> warnings;  // the first few skipped lines, with their reasons
  // Traces: the input's time resolution (see TimeResolution; 0 for patterns), --spread's span
  // (0: off), requests keyed '-' for a missing --key part, and what the reader should know
  // about the result (a resolution too coarse for the windows) — shown in every output.
  int64_t resolution_us = 0;
  int64_t spread_us = 0;
  int64_t missing_key_parts = 0;
  std::vector<std::string> notices;
  int64_t peak_live_keys = 0;
  std::vector<KeyRow> top_keys;  // by requests offered, most first (ReplayOptions::top_keys)
  int64_t top_keys_error = 0;    // 0: exact; else counts may miss up to this many requests
  std::vector<AlgorithmResult> algorithms;  // report order (see make_policies)
  ChartData chart;
  std::optional<ThrottleReport> throttle;   // --concurrency / --max-wait (throttle.h)
  std::optional<DistributedReport> distributed;  // --instances / --regions (distributed.h)
};

class Replay {
 public:
  // Error if token_fill is outside 0 ... burst or not finite, or the peak window is not
  // positive.
  static Result<Replay> create(ReplayOptions options);

  Replay(Replay&&) noexcept;
  Replay& operator=(Replay&&) noexcept;
  ~Replay();

  // One request. Error (and nothing recorded) if t_us < the previous request's time, t_us is
  // outside 0 ... kMaxTimestampUs, the key is empty, or cost is outside 1 ... kMaxCost.
  Status add(int64_t t_us, std::string_view key, int64_t cost = 1, bool marked = false);

  // Keys currently holding state (for tests of the expiry bound).
  size_t live_keys() const;

  // The tallies so far. The chart's departures and the report's totals are complete.
  Report report() const;

 private:
  struct Impl;
  explicit Replay(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ratelimit::sim
