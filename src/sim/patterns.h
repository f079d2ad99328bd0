// patterns.h — the built-in request streams A (steady Poisson), B (burst) and C (window-
// boundary attack), reproducing a published comparison of the classic rate-limit algorithms.
//
// Why: the same three experiments, generated exactly as the comparison's Python did (same
// seed, same formulas, same double arithmetic), let anyone check the library's numbers
// against the published ones and against each other.
// Invariants: requests are sorted by time; every time is seconds_to_us() of the formula's
// double (see timestamps.h); all requests belong to one client and cost 1.
//   A: t = 0; repeat t += expovariate(rate); stop at the first t >= duration (not a request).
//   B: burst_start + (i * burst_span) / burst_size for i = 0 ... burst_size - 1
//      (defaults: 5.0 + i * 0.02 / 30 — evaluated in that order, as Python does).
//   C: w + i / 10 for w = 0, 1, 2 and i = 0 ... 9 (steady), then the attack, marked:
//      3.9 + i * 0.01 and 4.0 + i * 0.01 for i = 0 ... 9.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ratelimit/status.h"

namespace ratelimit::sim {

struct PatternParams {
  uint64_t seed = 42;              // A: Python's random.Random(seed)
  double poisson_rate = 6;         // A: requests per second, > 0
  double poisson_duration_s = 30;  // A: seconds, > 0
  int64_t burst_size = 30;         // B: requests in the burst, >= 1
  double burst_start_s = 5.0;      // B: time of the first request, >= 0
  double burst_span_s = 0.02;      // B: request i arrives at start + i * span / size, >= 0
};

// Limits that keep a pattern's size sane (its requests are held in memory).
inline constexpr double kMaxPatternRequests = 10'000'000;
inline constexpr int64_t kMaxBurstSize = 10'000'000;

struct PatternRequest {
  int64_t t_us = 0;
  bool marked = false;  // C: one of the 20 attack requests, whose admissions are reported apart
};

struct Pattern {
  char name = 'A';           // 'A', 'B' or 'C'
  std::string description;   // "steady Poisson traffic, 6/s for 30s, seed 42"
  bool token_starts_empty = false;  // C: the comparison runs the token bucket from empty
  std::vector<PatternRequest> requests;
};

// Checks the parameters (a clear message naming the flag's value on error).
Status validate(const PatternParams& params);

// Builds pattern 'A', 'B' or 'C' (upper or lower case). Error for another name or invalid
// parameters.
Result<Pattern> make_pattern(char name, const PatternParams& params);

}  // namespace ratelimit::sim
