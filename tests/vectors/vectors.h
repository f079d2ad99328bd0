// vectors.h — the shared test vectors (tests/vectors/<algorithm>.json): loader and runner.
//
// Why: DESIGN.md requires that every store (the pure functions, MemoryStore, Redis) gives
// identical decisions. The expected values in the JSON files were worked out by hand from the
// definitions; this library parses them and replays them against any system under test, so a
// store's test is a few lines:
//
//   ratelimit::ManualClock clock;
//   MyStore store(..., &clock);                       // the store must read time from `clock`
//   auto files = ratelimit::vectors::load_all(RATELIMIT_VECTORS_DIR);
//   ASSERT_TRUE(files.ok()) << files.status().to_string();
//   for (const auto& f : *files) {
//     auto failures = ratelimit::vectors::run_vectors(store, clock, f);
//     EXPECT_TRUE(failures.empty()) << ratelimit::vectors::format_failures(failures);
//   }
//
// File format (store-neutral; times are absolute µs, >= 0):
//   {"algorithm": "token_bucket",
//    "cases": [{"name": "...", "comment": "...",
//               "policy": {"limit": 10, "window_us": 1000000}          (window algorithms)
//                      or {"rate": 2.5, "burst": 5, "mode": "police"}  (buckets; mode: leaky)
//                      or {"limit": 10, "lease_ttl_us": 1000000}       (concurrency),
//               "count_denied": false,                                  (optional, default false)
//               "every_hit": false,          (optional; fixed_window: Policy::fixed_window_every_hit)
//               "steps": [{"t_us": 0, "cost": 1, "op": "acquire",       (cost default 1;
//                          "key": "a",                         op acquire|peek|reset|report;
//                          "expect": {"allowed": true, "reason": "within_limit",   key default
//                                     "remaining": 9, "reset_after_us": 1000000,   "k")
//                                     "retry_after_us": 0, "delay_us": 0}}]}]}
//   A step may carry its own "policy" (the case's shape; count_denied/every_hit from the case):
//   that step is decided under it — a reload that redefined the policy, e.g. lowered a limit
//   under a state that counts more. A "reset" step has no "expect". A "report" step records
//   usage after the fact (algo::report: cost may be negative, a refund) on a rate policy. Every decision field is required in "expect"; the runner
//   also checks Decision::limit against the policy's capacity.
//   Concurrency steps may also have op release|renew and "lease": "<name>": an admitted acquire
//   binds the name (case-local) to the lease id the store returned; a release or renew names a
//   bound lease, or an unbound name, which stands for a foreign id (drawn at random, never
//   issued). The runner checks that every concurrency decision carries its lease (an admitted
//   acquire: a non-empty id; release, renew: the id asked about) and no other decision does.
// Invariants: each case starts from fresh keys — the runners prefix every key with a prefix
// unique to the run and the case (unique_run_prefix()), so a persistent store (Redis) needs no
// cleanup between runs. Steps run in order; the clock is set to t_us before each step.
// Errors are values: a malformed file gives a Status naming the file, case and step.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/algorithms.h"
#include "ratelimit/clock.h"
#include "ratelimit/decision.h"
#include "ratelimit/policy.h"
#include "ratelimit/status.h"
#include "ratelimit/store.h"

namespace ratelimit::vectors {

// The algorithms with a vector file, in the order load_all() returns them.
inline constexpr Algorithm kAllAlgorithms[] = {
    Algorithm::kFixedWindow, Algorithm::kSlidingWindowLog, Algorithm::kSlidingWindowCounter,
    Algorithm::kTokenBucket, Algorithm::kLeakyBucket, Algorithm::kConcurrency};

enum class StepOp : uint8_t { kAcquire, kPeek, kReset, kRelease, kRenew, kReport };

struct Expect {
  bool allowed = false;
  DecisionReason reason = DecisionReason::kOverLimit;
  int64_t remaining = 0;
  int64_t reset_after_us = 0;
  int64_t retry_after_us = 0;
  int64_t delay_us = 0;
};

struct Step {
  int64_t t_us = 0;
  int64_t cost = 1;
  StepOp op = StepOp::kAcquire;
  std::string key = "k";         // case-local key name; runners add a unique prefix
  std::optional<Expect> expect;  // absent only for kReset
  // "policy" on a step: the case's policy redefined for this step (a reload that changed it; same
  // name, so the key's state carries over); absent: the case's.
  std::optional<Policy> policy;
  std::string lease;             // concurrency: the case-local lease name (may be empty)
  // Filled in by run_file before the step reaches a DecideFn: for release/renew the lease the
  // name is bound to (or a foreign id); for an acquire a fresh id, which a pure runner uses
  // (a store draws its own).
  LeaseId lease_id;
};

// The core op of a step (precondition: not kReset).
algo::Op algo_op(StepOp op);
// The step on a Store: acquire, peek, release or renew (precondition: not kReset).
Result<Decision> store_step(Store& store, const Policy& policy, const std::string& key,
                            const Step& step);

struct Case {
  std::string name;
  Policy policy;  // built from the JSON, count-denied mode applied
  std::vector<Step> steps;
};

struct VectorFile {
  std::string path;
  Algorithm algorithm = Algorithm::kFixedWindow;
  std::vector<Case> cases;
};

// Parses one file. Errors: unreadable file, malformed JSON, unknown field values, an invalid
// policy (Policy's own message), a step out of order (t_us decreasing is allowed: it tests a
// clock stepping back; negative t_us is not).
Result<VectorFile> load_file(const std::string& path);
// Loads <dir>/<algorithm_name>.json for every algorithm in kAllAlgorithms.
Result<std::vector<VectorFile>> load_all(const std::string& dir);

// "acquire", "peek", "reset", "release", "renew".
const char* step_op_name(StepOp op);
// Empty when `d` matches `e` (and d.limit == limit); else "field: got X, want Y; ...".
std::string compare(const Expect& e, int64_t limit, const Decision& d);

// One mismatch or error while replaying a file.
struct Failure {
  std::string file;
  std::string case_name;
  size_t step = 0;  // index in the case's steps
  std::string message;
};
// One line per failure, for a test's failure message.
std::string format_failures(const std::vector<Failure>& failures);

// A prefix no earlier run can have used (random + time), e.g. "vec-3f9c...-": keys of one run
// never meet state left by another run in a persistent store.
std::string unique_run_prefix();

// The system under test, one step at a time: perform `op` (never kReset here) for `key` under
// `policy` at time `t_us` and return its decision.
using DecideFn = std::function<Result<Decision>(const Policy& policy, const std::string& key,
                                                const Step& step)>;
// Forgets `key` under `policy` (the reset step).
using ResetFn = std::function<Status(const Policy& policy, const std::string& key)>;

// Replays every case of `file` through `decide`/`reset`. Keys are
// "<key_prefix><case index>:<step key>". Returns every mismatch (empty = pass).
std::vector<Failure> run_file(const VectorFile& file, const std::string& key_prefix,
                              const DecideFn& decide, const ResetFn& reset);

// Replays `file` against a Store that reads its time from `clock` (the clock is set to each
// step's t_us before the call). Uses unique_run_prefix() unless `key_prefix` is given.
std::vector<Failure> run_vectors(Store& store, ManualClock& clock, const VectorFile& file,
                                 std::optional<std::string> key_prefix = std::nullopt);

// Replays `file` against the pure functions (algo::decide), one AlgorithmState per key.
std::vector<Failure> run_vectors_pure(const VectorFile& file);

}  // namespace ratelimit::vectors
