// policy.h — what a limit is: an algorithm and its parameters, validated once.
//
// Why: a Policy is built only through the named constructors below, each of which validates
// its parameters and returns an error value for anything out of range, so every Policy in
// the program is valid and the algorithms never see a zero window, a NaN rate or an overflow.
// Invariants (hold for every Policy value):
//   - limit(), burst(): 1 ... kMaxLimit (a fixed_window_every_hit: 0 ... kMaxEveryHitLimit);
//     window(): kMinWindow ... kMaxWindow;
//   - sliding_window_counter: (limit + 1) * window_us <= 2^53 (exact in a Lua double);
//   - rate(): finite, kMinRate ... kMaxRate tokens per second;
//   - sliding_window_log: limit <= kMaxSlidingLogLimit (its state grows with the limit);
//   - concurrency: limit <= kMaxConcurrencyLimit (one state entry per lease held), window() is
//     the lease TTL, kMinWindow ... kMaxConcurrencyLeaseTtl;
//   - name(): 1 ... kMaxPolicyNameLength characters of [A-Za-z0-9_.:-].
// Policy is an immutable value type; copies are cheap and thread-safe to share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

#include "ratelimit/adaptive_limit.h"
#include "ratelimit/clock.h"
#include "ratelimit/status.h"

namespace ratelimit {

enum class Algorithm : uint8_t {
  kFixedWindow,
  kSlidingWindowLog,
  kSlidingWindowCounter,
  kTokenBucket,
  kLeakyBucket,
  // Not a rate: at most `limit` units held at once by leases (Policy::concurrency).
  kConcurrency,
};

// What an algorithm limits: a rate (units per window or per second) or how many units are held
// at once (leases). Rate algorithms are the ones the simulator compares and the envoyproxy/
// ratelimit loader, the consistency modes and the one-shot HTTP APIs take.
enum class AlgorithmKind : uint8_t { kRate, kConcurrency };

// The algorithm table: every algorithm defined once. Row i describes Algorithm(i), and i — the
// algorithm's index — is also, everywhere else, the number that stands for it:
//   - the alternative of algo::AlgorithmState holding its state (algorithms.h: built from this
//     table and algo::StateOf, so the order cannot drift);
//   - the memory store's slot tag (src/memory/shard.h) and the denial cache's algorithm byte;
//   - its Redis script id and FCALL function name (src/redis/lua_scripts.h: ScriptId), and the
//     algorithm id every Lua entry point takes (the `algorithms` table embed_lua.cmake generates
//     from its own list of names; the ctest algorithm_table_test holds that list to this table).
// Concurrency is a row: it has a state type, a script and a Lua id like the rates, and leaving it
// out would leave those unchecked; its kind keeps it out of what takes rates only. Rate rows come
// first, so the rates are the indices 0 ... kRateAlgorithmCount - 1.
struct AlgorithmInfo {
  Algorithm algorithm;
  const char* name;  // the name DESIGN.md, the config, metrics and the Lua functions use
  AlgorithmKind kind;
};
inline constexpr AlgorithmInfo kAlgorithmTable[] = {
    {Algorithm::kFixedWindow, "fixed_window", AlgorithmKind::kRate},
    {Algorithm::kSlidingWindowLog, "sliding_window_log", AlgorithmKind::kRate},
    {Algorithm::kSlidingWindowCounter, "sliding_window_counter", AlgorithmKind::kRate},
    {Algorithm::kTokenBucket, "token_bucket", AlgorithmKind::kRate},
    {Algorithm::kLeakyBucket, "leaky_bucket", AlgorithmKind::kRate},
    {Algorithm::kConcurrency, "concurrency", AlgorithmKind::kConcurrency},
};
inline constexpr size_t kAlgorithmCount = std::size(kAlgorithmTable);

// The algorithm's index (see kAlgorithmTable).
constexpr size_t algorithm_index(Algorithm a) { return static_cast<size_t>(a); }
// Its row.
constexpr const AlgorithmInfo& algorithm_info(Algorithm a) {
  return kAlgorithmTable[algorithm_index(a)];
}
// The algorithm whose index is `index` (a number read from a store, a wire or a file);
// nullopt for anything that is not an index of the table. Never cast such a number yourself.
constexpr std::optional<Algorithm> algorithm_at(uint64_t index) {
  if (index >= kAlgorithmCount) return std::nullopt;
  return kAlgorithmTable[index].algorithm;
}

namespace detail {
constexpr bool algorithm_table_in_order() {
  for (size_t i = 0; i < kAlgorithmCount; ++i) {
    if (algorithm_index(kAlgorithmTable[i].algorithm) != i) return false;
  }
  return true;
}
constexpr size_t count_rate_rows() {
  size_t n = 0;
  while (n < kAlgorithmCount && kAlgorithmTable[n].kind == AlgorithmKind::kRate) ++n;
  for (size_t i = n; i < kAlgorithmCount; ++i) {
    if (kAlgorithmTable[i].kind == AlgorithmKind::kRate) return kAlgorithmCount + 1;  // not first
  }
  return n;
}
}  // namespace detail
static_assert(detail::algorithm_table_in_order(), "row i of kAlgorithmTable is Algorithm(i)");
// The last enumerator has the last row. (An enumerator added after it without a row: the
// switches over Algorithm — algo::fresh_state, the residues — warn, and -Werror fails the build.)
static_assert(algorithm_index(Algorithm::kConcurrency) + 1 == kAlgorithmCount);

// How many rate algorithms there are; they are the first rows of the table.
inline constexpr size_t kRateAlgorithmCount = detail::count_rate_rows();
static_assert(kRateAlgorithmCount <= kAlgorithmCount, "rate rows come first in kAlgorithmTable");

// "fixed_window", "sliding_window_log", ... (the names DESIGN.md and the config use).
const char* algorithm_name(Algorithm a);
// Inverse of algorithm_name; kNotFound for anything else.
[[nodiscard]] Result<Algorithm> parse_algorithm(std::string_view name);

// Leaky bucket behaviour: police = drop what overflows (a meter); shape = also tell the caller
// how long to hold an admitted request (Decision::delay) so output leaves at the rate.
enum class LeakyMode : uint8_t { kPolice, kShape };

inline constexpr int64_t kMaxLimit = 1'000'000'000;          // limit and burst
inline constexpr int64_t kMaxEveryHitLimit = 4'294'967'295;  // envoyproxy/ratelimit's uint32
inline constexpr int64_t kMaxEveryHitCount = int64_t{1} << 52;  // a window's count stops there
inline constexpr int64_t kMaxCost = 1'000'000'000;           // cost of one request
inline constexpr int64_t kMaxSlidingLogLimit = 100'000;      // entries per key, see docs/design.md
inline constexpr int64_t kMaxConcurrencyLimit = 100'000;     // units held per key at once
inline constexpr Micros kMaxConcurrencyLeaseTtl{24LL * 3600 * 1'000'000};  // 1 day
inline constexpr Micros kMinWindow{1'000};                   // 1 ms
inline constexpr Micros kMaxWindow{366LL * 24 * 3600 * 1'000'000};  // 366 days
inline constexpr double kMinRate = 1e-6;                     // tokens per second
inline constexpr double kMaxRate = 1e9;
inline constexpr size_t kMaxPolicyNameLength = 64;

// How a policy's count is shared by the processes that use one store (the modes, which
// algorithms each is defined for, and their bounds: include/ratelimit/consistency.h).
enum class Consistency : uint8_t {
  kExact,  // one atomic store call per decision (the default)
  kLease,  // a slice of the limit reserved atomically, decided locally; never over the limit
  kAsync,  // decided locally on the last known global count, hits pushed every sync_interval
};
// "exact", "lease", "async".
const char* consistency_name(Consistency c);
// Inverse of consistency_name; kInvalidArgument for anything else.
Result<Consistency> parse_consistency(std::string_view text);

inline constexpr Micros kMinSyncInterval{1'000};        // 1 ms
inline constexpr Micros kMaxSyncInterval{60'000'000};   // 1 min
inline constexpr Micros kMinLeaseTtl{1'000};            // 1 ms
inline constexpr Micros kMaxLeaseTtl{3'600'000'000};    // 1 h

// A policy's consistency settings, each with its default. Config (native policies):
//   api: { algorithm: fixed_window, limit: 1000, window: 1s,
//          consistency: lease, lease_max: 50, lease_ttl: 1s, sync_interval: 100ms }
struct ConsistencyOptions {
  Consistency mode = Consistency::kExact;
  // async: how often each instance pushes its hits and refreshes its view of the global count;
  // lease: how often unused slices past their lifetime are given back. 1 ms ... 1 min.
  Micros sync_interval{100'000};
  // lease: the most units one slice holds (a request costing more reserves exactly its cost).
  // 0 = the default, max(1, limit / 20). 0 ... limit.
  int64_t lease_max = 0;
  // lease: the longest an instance holds a slice before giving back what it did not use (a
  // slice also ends with its window). 1 ms ... 1 h.
  Micros lease_ttl{1'000'000};
  // Counted across regions (include/ratelimit/regions.h, RegionStore): a region decides on its
  // own count plus the last known counts of the other regions. Defined for fixed_window and
  // sliding_window_counter with mode exact, not in count-denied or every-hit mode. Config:
  // `scope: global` (false: `scope: region`, each region limits on its own).
  bool across_regions = false;

  friend bool operator==(const ConsistencyOptions&, const ConsistencyOptions&) = default;
};

class Policy {
 public:
  // Window algorithms: at most `limit` units per `window`.
  static Result<Policy> fixed_window(int64_t limit, Micros window);
  static Result<Policy> sliding_window_log(int64_t limit, Micros window);
  static Result<Policy> sliding_window_counter(int64_t limit, Micros window);
  // envoyproxy/ratelimit's counter (its Redis INCRBY): a fixed window in which every hit is
  // counted, admitted or denied, and a request is admitted when the count *after* adding its
  // cost is <= limit. Unlike fixed_window it also accepts limit 0 (everything over) and cost 0
  // (check only: admitted when the count is <= limit, nothing changes). The stored count is
  // kept at most limit + 1: every count above the limit decides alike, so state stays bounded
  // while decisions stay exact. counts_every_hit() is true; algorithm() is kFixedWindow.
  static Result<Policy> fixed_window_every_hit(int64_t limit, Micros window);
  // Bucket algorithms: `rate` units per second on average, bursts of up to `burst` units.
  static Result<Policy> token_bucket(double rate_per_second, int64_t burst);
  static Result<Policy> leaky_bucket(double rate_per_second, int64_t burst,
                                     LeakyMode mode = LeakyMode::kPolice);

  // Concurrency (throttling, not a rate): at most `limit` units held at once per key. An acquire
  // of cost c takes a lease of weight c that holds c units until it is released or until
  // `lease_ttl` passes without a renew (a holder that dies loses its lease then). Decisions:
  // remaining = limit - units held; reset_after = until every current lease has expired;
  // retry_after (denied) = until enough current leases expire for the request to fit, if none
  // is released first. window() is lease_ttl; rate() is 0. Count-denied mode has no effect.
  static Result<Policy> concurrency(int64_t limit, Micros lease_ttl);
  // Concurrency whose limit adapts (adaptive_limit.h): each key's limit starts at
  // initial_limit and moves within [min_limit, max_limit] by the round trips of its leases.
  // limit() is max_limit (the capacity: a cost above it is kExceedsCapacity); adaptive() holds
  // the config. Errors: validate(config), max_limit <= kMaxConcurrencyLimit, the lease TTL.
  static Result<Policy> adaptive_concurrency(const adaptive::AdaptiveConfig& config, Micros lease_ttl);

  // A copy under another name. The name namespaces the policy's keys in a store, so two
  // policies with different names never share state. Default name: a canonical description
  // of the parameters ("token_bucket:r10:b20"). Error if the name is not valid (see top).
  Result<Policy> with_name(std::string name) const;

  // A copy in "count denied attempts" mode (login throttling: every attempt counts, admitted
  // or not). Denied attempts are recorded with bounded state: window algorithms record at most
  // `limit` units per window (the sliding log keeps the newest `limit`), buckets run into a
  // debt of at most one `burst` (tokens >= -burst, level <= 2 * burst).
  Policy with_count_denied(bool on = true) const;

  // A copy with these consistency settings. kInvalidArgument (saying why) for a value out of
  // range, or a mode the policy's algorithm does not define (consistency.h: lease and async
  // for fixed_window and sliding_window_counter, not in count-denied or every-hit mode).
  Result<Policy> with_consistency(const ConsistencyOptions& options) const;

  // A copy with another capacity — `limit` for the window algorithms, `burst` for the buckets —
  // and everything else kept: name (so the same keys, the same counters), window or rate, mode,
  // count-denied, consistency. For a caller's own limit within bounds a configuration allows (ratelimitd's
  // per-request `limit`): the state's meaning does not depend on the capacity (a window's count,
  // a log's entries, a bucket's taken units or level), nor does the time it becomes idle, so a
  // key keeps its count when its limit changes. Validated like the factories (e.g. the sliding
  // log's kMaxSlidingLogLimit, the sliding counter's (L + 1) * W bound): an error value, never a
  // half-valid policy.
  Result<Policy> with_limit(int64_t limit) const;

  // Whether a state written under this policy means the same under `other` (same name
  // assumed): the same algorithm and, for rate algorithms, the same counting mode (count-denied,
  // every-hit), and for the window algorithms the same window. What does not change a state's
  // meaning — capacity (limit, burst), a bucket's rate, a leaky bucket's mode, consistency, a
  // concurrency policy's TTL or estimator — only changes what is decided from it, so a store
  // applies it to the live state (a reload that raises a limit). A store refuses a call whose
  // policy does not share the meaning of the key's live state: reason kPolicyConflict (issue
  // 31: two definitions under one name used to share one count silently). Pure.
  bool same_state_meaning(const Policy& other) const;

  Algorithm algorithm() const { return algorithm_; }
  const std::string& name() const { return name_; }
  // A hash of name(), computed once when the name is set, so a store can place the policy's
  // keys without hashing the name on every request. Equal names have equal hashes (so it adds
  // nothing to operator==). Not seeded and not stable across builds: a store that must resist
  // chosen collisions mixes in its own seed, and still compares the names themselves.
  uint64_t name_hash() const { return name_hash_; }
  // Capacity in units: L for window algorithms, b for buckets.
  int64_t limit() const { return limit_; }
  // Window length; for buckets, the time to drain a full bucket (burst / rate), rounded up;
  // for concurrency, the lease TTL.
  Micros window() const { return window_; }
  // Concurrency: how long a lease lives without a renew (== window()); 0 for rate policies.
  Micros lease_ttl() const { return algorithm_ == Algorithm::kConcurrency ? window_ : Micros{0}; }
  bool is_concurrency() const { return algorithm_ == Algorithm::kConcurrency; }
  // Tokens (units) per second; 0 for window algorithms.
  double rate() const { return rate_; }
  LeakyMode leaky_mode() const { return leaky_mode_; }
  bool count_denied() const { return count_denied_; }
  // True for fixed_window_every_hit (see there).
  bool counts_every_hit() const { return every_hit_; }
  const ConsistencyOptions& consistency() const { return consistency_; }
  // An adaptive concurrency policy's estimator config; nullopt for every other policy.
  const std::optional<adaptive::AdaptiveConfig>& adaptive() const { return adaptive_; }
  bool is_bucket() const {
    return algorithm_ == Algorithm::kTokenBucket || algorithm_ == Algorithm::kLeakyBucket;
  }

  friend bool operator==(const Policy&, const Policy&) = default;

 private:
  Policy() = default;
  // The fields every factory sets, after its checks passed (the factories differ only there).
  static Policy make(Algorithm algorithm, int64_t limit, Micros window, double rate, std::string name);
  void set_name(std::string name);  // sets name_ and name_hash_ together
  Algorithm algorithm_ = Algorithm::kFixedWindow;
  LeakyMode leaky_mode_ = LeakyMode::kPolice;
  bool count_denied_ = false;
  bool every_hit_ = false;
  ConsistencyOptions consistency_;
  std::optional<adaptive::AdaptiveConfig> adaptive_;
  int64_t limit_ = 0;
  Micros window_{0};
  double rate_ = 0;
  std::string name_;
  uint64_t name_hash_ = 0;  // std::hash of name_, kept in step by set_name()
};

// Checks a request's cost: 1 ... kMaxCost. A cost above the policy's capacity is valid input
// (it yields a Decision with reason kExceedsCapacity), an absurd one is an error.
Status validate_cost(int64_t cost);
// As above, but for a policy that counts every hit cost 0 (check only) is valid too.
Status validate_cost(const Policy& policy, int64_t cost);

// Checks a policy name (see top): used by Policy::with_name and by configuration loaders.
Status validate_policy_name(std::string_view name);

// Parses "500ms", "1s", "60s", "1m", "1h", "2d", "250us" (a positive integer and a unit).
// Error message names the offending text.
Result<Micros> parse_duration(std::string_view text);

}  // namespace ratelimit
