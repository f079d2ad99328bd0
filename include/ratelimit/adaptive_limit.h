// adaptive_limit.h — the estimators of an adaptive concurrency limit (issue 30): how the round
// trips of a concurrency policy's leases move the number of units it admits at once. Gradient2
// (the default), AIMD and Vegas, after Netflix concurrency-limits' Gradient2Limit, AIMDLimit and
// VegasLimit (their definitions and default constants; deviations are listed below).
//
// Why here: this is decision math, so it has one home (src/core/adaptive_limit.cc), pure and
// clock-free — a sample carries its round trip, the caller measured it — held by the shared
// vectors tests/vectors/adaptive_limit.json, which its Lua mirror (src/redis/lua/adaptive.lua,
// a limit shared through Redis) passes too. Stores keep one AdaptiveState per policy and key
// and call update() once per sample; nothing here reads a clock, allocates or throws.
//
// Units: the limit is kept in milli-units (limit_m: 1 unit = 1000) so that smoothing moves it
// by fractions, and is applied as its floor in whole units (limit()); round trips are integer
// microseconds; Gradient2's long-term RTT is kept in nanoseconds (µs × 1000) so that its slow
// average moves on a 1 µs difference. Every division is a floor of non-negative integers below
// 2^53 (exact in a Lua double too).
//
// A sample is one lease's round trip: from its grant to its release (or the latency the client
// reported on release, which replaces it), the units held when it was granted (`inflight`,
// itself included), and whether it was dropped (outcome dropped/timeout, or a lease that expired
// unreleased — counted once, when its TTL passed, with the TTL as its round trip). A round trip
// of 0 (a release in the same microsecond) counts as 1 µs.
//
// How a sample moves the limit (L = limit_m / 1000 as a real number, floors as written):
//   gradient2  long = the average of the first 10 round trips, then an exponential average
//              long += (rtt·1000 − long)·2/601 (Netflix's 600-sample window); when long > 2·rtt
//              (latency came back down after a long load) long ×= 95/100. Not dropped and
//              inflight·2 < L: nothing more (app-limited: no evidence the limit is too low).
//              Else gradient g = clamp(1.5·long/rtt, 0.5, 1), L' = L·0.8 + (g·L + 4)·0.2.
//              Dropped: L' = L·0.9 (the gradient's floor, without the queue term, so drops
//              alone reach min_limit), and `long` is not fed (a drop says nothing about the
//              latency of the unloaded resource).
//   aimd       dropped: L' = L·0.9; else inflight·2 >= L: L' = L + 1; else unchanged.
//   vegas      dropped: L' = L − lg (lg = max(1, ⌊log10 ⌊L⌋⌋)). Else every 30·⌊L⌋-th sample
//              re-probes: noload = rtt, unchanged. Else rtt < noload (or none yet): noload = rtt,
//              unchanged. Else inflight·2 < L: unchanged. Else queue = ⌈L·(rtt − noload)/rtt⌉
//              and with alpha = 3·lg, beta = 6·lg: queue <= lg → L + beta; queue < alpha →
//              L + lg; queue > beta → L − lg; else unchanged.
// Then, every estimator: L' clamped to [min_limit, max_limit].
// Windows (Netflix's WindowedLimit): with window_us > 0 (the default, 1 s) update_at() does not
// move the limit per sample but per window: samples whose round trip is under 100 µs and not
// dropped are ignored; the others accumulate (sum of round trips, the largest inflight, any
// drop) until a sample ends at or after the window's end (a window starts at its first
// sample); then, if it holds at least 10 samples, the estimator above takes ONE sample {the
// mean round trip (floor), the largest inflight, dropped if any was} and a new window starts
// empty. Why: per-sample updates let Gradient2's long-term average (600 updates) follow a
// sustained overload within seconds, and then the limit climbs back; per window, 600 updates
// are 10 minutes. window_us = 0 updates per sample (the vectors' rules one by one).
// Bounds that hold after every update (and of initial_state): min_limit <= limit() <= max_limit.
// One sample moves the limit down by at most 10 % (gradient2: g >= 0.5 under smoothing 0.2 gives
// L' >= 0.9·L; aimd 0.9·L) or lg units (vegas), and up by at most 0.8 unit (gradient2),
// 1 unit (aimd) or beta = 6·lg units (vegas). So N drops in a row leave at least 0.9^N of the
// limit (gradient2, aimd), never less than min_limit; and a client that never releases adds one
// drop per lease, once, when the lease's TTL passes — it cannot pull the limit down faster than
// one sample per lease it was granted, and it holds those units only until the TTL.
// Averages move toward a sample by truncation toward the old value (|Δ| floored), so C++ and a
// Lua mirror agree on negative differences.
// Deviations from Netflix: one update per sample (no WindowedLimit), drops reduce Gradient2
// too (Netflix's ignores them; here an expired lease must count), Vegas' probe has no random
// jitter (pure math), every estimator honours min_limit (Netflix's Vegas floors at 1).
// Thread-safety: free functions, no shared state; an AdaptiveState belongs to its caller.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "ratelimit/status.h"

namespace ratelimit::adaptive {

enum class Estimator : uint8_t { kGradient2, kAimd, kVegas };

inline constexpr int64_t kMilli = 1000;
// Bounds of min_limit / initial_limit / max_limit: a concurrency policy's own bound
// (kMaxConcurrencyLimit in policy.h, one state entry per lease).
inline constexpr int64_t kMaxAdaptiveLimit = 100'000;
// The longest round trip or reported latency a sample may carry: 1 hour exclusive. A longer one
// is absurd input (refused by validate_latency_us, never seen by update()).
inline constexpr int64_t kMaxSampleUs = int64_t{3'600} * 1'000'000 - 1;

inline constexpr int64_t kDefaultWindowUs = 1'000'000;
inline constexpr int64_t kMinWindowUs = 10'000;
inline constexpr int64_t kMaxWindowUs = 60'000'000;
inline constexpr int64_t kWindowMinSamples = 10;
// How long a store keeps a key's learned limit after its last sample once no lease is held
// (then the key starts again from initial_limit): 10 minutes, Gradient2's long window at 1 s.
inline constexpr int64_t kRetainUs = int64_t{600} * 1'000'000;
inline constexpr int64_t kWindowMinRttUs = 100;

// "gradient2", "aimd", "vegas"; nullopt for anything else.
std::optional<Estimator> estimator_from_name(std::string_view name);
std::string_view estimator_name(Estimator e);

struct AdaptiveConfig {
  Estimator estimator = Estimator::kGradient2;
  int64_t min_limit = 1;
  int64_t initial_limit = 20;
  int64_t max_limit = 200;
  int64_t window_us = kDefaultWindowUs;  // 0 (per sample) or kMinWindowUs ... kMaxWindowUs
  bool operator==(const AdaptiveConfig&) const = default;
};

// OK when 1 <= min_limit <= initial_limit <= max_limit <= kMaxAdaptiveLimit and window_us is 0
// or kMinWindowUs ... kMaxWindowUs; else
// InvalidArgument naming the first bound broken.
[[nodiscard]] Status validate(const AdaptiveConfig& c);

// A latency given by a client (the release's reported latency): 0 ... kMaxSampleUs, else
// InvalidArgument. Callers check it before building a Sample.
[[nodiscard]] Status validate_latency_us(int64_t latency_us);

struct AdaptiveState {
  int64_t limit_m = 0;       // the learned limit in milli-units
  int64_t long_rtt_ns = 0;   // gradient2: the long-term average round trip, ns
  int64_t samples = 0;       // gradient2: samples averaged so far (stops counting at 10)
  int64_t noload_rtt_us = 0; // vegas: the no-load round trip (0 = none yet)
  int64_t probe_count = 0;   // vegas: samples since the last probe
  int64_t window_end_us = 0; // the open window's end (0: no window open)
  int64_t window_count = 0;  // samples in the open window
  int64_t window_rtt_sum_us = 0;
  int64_t window_max_inflight = 0;
  bool window_dropped = false;
  int64_t last_sample_us = 0; // the store's: when the key last took a sample (its idle time)
  bool operator==(const AdaptiveState&) const = default;
};

struct Sample {
  int64_t rtt_us = 0;    // 0 ... kMaxSampleUs (0 counts as 1)
  int64_t inflight = 0;  // units held when the lease was granted, itself included (>= 0)
  bool dropped = false;  // outcome dropped/timeout, or the lease expired unreleased
};

// What a lease's release says of its round trip (ratelimitd: the release body's "outcome" and
// "latency_ms"), checked by the caller (validate_latency_us) before it reaches a store.
struct ReleaseReport {
  bool dropped = false;     // outcome dropped or timeout: the work failed for want of capacity
  int64_t latency_us = -1;  // the latency the client measured, replacing grant-to-release; -1: none
  bool operator==(const ReleaseReport&) const = default;
};

// The state of a key that has seen no sample: limit = initial_limit. Precondition: validate(c).
AdaptiveState initial_state(const AdaptiveConfig& c);

// The whole units the state admits at once: floor(limit_m / 1000).
inline int64_t limit(const AdaptiveState& s) { return s.limit_m / kMilli; }

// Moves `s` by one sample (the rules above) and returns limit(s). Preconditions: validate(c);
// `s` came from initial_state(c) or update(c, ...) — a state from another config is first
// clamped into [min_limit, max_limit]; 0 <= rtt_us <= kMaxSampleUs, inflight >= 0.
// Ignores c.window_us (one update per sample).
int64_t update(const AdaptiveConfig& c, AdaptiveState& s, const Sample& sample);

// The sample ended at `now_us` (the caller's clock, read once): with c.window_us = 0 the same as
// update(); else accumulated into the open window, which is applied as one update() when it has
// ended (the rules above). Returns limit(s). Time stepping back only delays the window's end.
int64_t update_at(const AdaptiveConfig& c, AdaptiveState& s, const Sample& sample, int64_t now_us);

}  // namespace ratelimit::adaptive
