// distributed_vectors.h — the shared vectors of the lease/async store calls
// (tests/vectors/distributed.json): loader and runner.
//
// Why: reserve() and add_hits() (include/ratelimit/consistency.h) are decision math with a
// Redis mirror (src/redis/lua/distributed.lua); this file holds the two together the way
// vectors.h holds the algorithms: the JSON was worked out by hand, the core replays it
// (tests/core) and the Redis functions replay it (tests/redis), and both must answer every
// SharedView exactly.
//
// File format (times absolute µs, >= 0):
//   {"cases": [{"name", "comment", "algorithm": "fixed_window" | "sliding_window_counter",
//               "policy": {"limit", "window_us"},
//               "steps": [{"t_us", "op": "reserve", "want", "give_back_window_us" (default 0),
//                          "give_back" (default 0), "expect": {SharedView fields}}
//                      or {"t_us", "op": "add_hits", "window_us", "hits", "expect": {...}}]}]}
// Every step's key is the case's own (the runner makes it unique per run); expect holds all five
// SharedView fields (now_us, window_start_us, prev, curr, granted; dropped defaults to 0).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ratelimit/consistency.h"
#include "ratelimit/policy.h"
#include "ratelimit/status.h"
#include "vectors.h"

namespace ratelimit::vectors {

struct DistributedStep {
  enum class Op : uint8_t { kReserve, kAddHits };
  int64_t t_us = 0;
  Op op = Op::kReserve;
  int64_t want = 0;                 // reserve
  int64_t give_back_window_us = 0;  // reserve
  int64_t give_back = 0;            // reserve
  int64_t window_us = 0;            // add_hits
  int64_t hits = 0;                 // add_hits
  algo::SharedView expect;
};

struct DistributedCase {
  std::string name;
  Policy policy;  // with consistency lease (both calls are defined for lease and async alike)
  std::vector<DistributedStep> steps;
};

// Parses the file. Errors name the case and step (malformed JSON, a missing field, an invalid
// policy, an algorithm the calls are not defined for).
Result<std::vector<DistributedCase>> load_distributed(const std::string& path);

// The system under test: perform `step` on `key` under `policy` (time t_us) and return the view.
using DistributedFn = std::function<Result<algo::SharedView>(
    const Policy& policy, const std::string& key, const DistributedStep& step)>;

// Replays every case; keys are "<key_prefix><case index>". Every mismatch is a Failure.
std::vector<Failure> run_distributed(const std::vector<DistributedCase>& cases,
                                     const std::string& key_prefix, const DistributedFn& fn);

// The pure functions (algo::reserve / algo::add_hits), one state per case.
std::vector<Failure> run_distributed_pure(const std::vector<DistributedCase>& cases);

}  // namespace ratelimit::vectors
