// run_detail.h — what run.cc and trace_run.cc share inside ratelimit-sim's run: the options
// each engine (replay, throttle) gets from a RunOptions, and the streamed trace run. Internal
// to src/sim.
// Invariants: a pattern and a trace build their engines' options the same way (these
// functions), so the two inputs are simulated alike.
#pragma once

#include <array>
#include <optional>

#include "replay.h"
#include "run.h"
#include "throttle.h"

namespace ratelimit::sim::detail {

// The token bucket's starting fill for a run: the pattern's default (empty for the patterns
// that start empty, else full), full, or a given number of tokens.
std::optional<double> fill_for(const TokenFill& fill, bool pattern_starts_empty);

// The replay engine's options for a run: its policies, fill and start.
ReplayOptions replay_options(const RunOptions& o, const std::array<Policy, kAlgorithms>& policies,
                             std::optional<double> fill, std::optional<int64_t> start);

// The throttle engine's options for a run: the run's throttle settings with its fill and start.
ThrottleOptions throttle_options(const RunOptions& o, std::optional<double> fill,
                                 std::optional<int64_t> start);

// Streams the trace at *o.trace_path through every engine the options ask for (one pass,
// bounded memory unless --unsorted=sort) and returns its Report; a bad line is an error naming
// path:line, or with --skip-bad a counted warning. (trace_run.cc)
Result<Report> run_trace(const RunOptions& o, const std::array<Policy, kAlgorithms>& policies,
                         const ProgressFn& progress);

}  // namespace ratelimit::sim::detail
