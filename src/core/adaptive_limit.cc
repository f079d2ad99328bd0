// adaptive_limit.cc — the estimators of an adaptive concurrency limit (Gradient2, AIMD, Vegas):
// how one lease's round trip moves a policy's learned limit. The rules, units and bounds are
// stated in include/ratelimit/adaptive_limit.h; this file is them in integer arithmetic, pure and
// clock-free, held by tests/vectors/adaptive_limit.json. Invariant after update():
// min_limit·1000 <= limit_m <= max_limit·1000.
#include "ratelimit/adaptive_limit.h"

#include <algorithm>
#include <string>

namespace ratelimit::adaptive {
namespace {

// Netflix Gradient2Limit's defaults.
constexpr int64_t kWarmupSamples = 10;   // long RTT: a plain average of the first 10
constexpr int64_t kLongWindow = 600;     // then an exponential average, factor 2 / (600 + 1)
constexpr int64_t kQueueUnits = 4;       // growth allowed while latency stays low
constexpr int64_t kSmoothingM = 200;     // 0.2, in milli
constexpr int64_t kToleranceM = 1500;    // 1.5, in milli
constexpr int64_t kMinGradientM = 500;   // the gradient's floor: at most halves per sample
// Netflix AIMDLimit's backoff ratio (0.9) and VegasLimit's probe multiplier (30).
constexpr int64_t kBackoffM = 900;
constexpr int64_t kProbeMultiplier = 30;

// `from` moved by num/den of (to − from), the step's magnitude floored (toward `from`).
int64_t approach(int64_t from, int64_t to, int64_t num, int64_t den) {
  return to >= from ? from + (to - from) * num / den : from - (from - to) * num / den;
}

// max(1, ⌊log10 n⌋) for n >= 0 (Netflix's Log10RootIntFunction).
int64_t log10_floor_at_least_1(int64_t n) {
  int64_t lg = 0;
  for (; n >= 10; n /= 10) ++lg;
  return std::max<int64_t>(1, lg);
}

// True when the sample shows no evidence the limit is too low: fewer than half of it in use.
bool app_limited(const AdaptiveState& s, int64_t inflight) { return inflight * 2 * kMilli < s.limit_m; }

int64_t gradient2(AdaptiveState& s, const Sample& x, int64_t rtt_us) {
  if (x.dropped) return s.limit_m * kBackoffM / kMilli;  // 0.8·L + 0.2·(0.5·L): no queue term
  {
    const int64_t rtt_ns = rtt_us * kMilli;
    if (s.samples < kWarmupSamples) {
      ++s.samples;
      s.long_rtt_ns = approach(s.long_rtt_ns, rtt_ns, 1, s.samples);
    } else {
      s.long_rtt_ns = approach(s.long_rtt_ns, rtt_ns, 2, kLongWindow + 1);
    }
    if (s.long_rtt_ns > 2 * rtt_ns) s.long_rtt_ns = s.long_rtt_ns * 95 / 100;
    if (app_limited(s, x.inflight)) return s.limit_m;
  }
  // gradient = tolerance · long / rtt, in milli: 1.5 · long_ns / (rtt_us · 1000) · 1000.
  const int64_t g_m = std::clamp(kToleranceM * s.long_rtt_ns / (rtt_us * kMilli), kMinGradientM, kMilli);
  const int64_t target_m = s.limit_m * g_m / kMilli + kQueueUnits * kMilli;
  return (s.limit_m * (kMilli - kSmoothingM) + target_m * kSmoothingM) / kMilli;
}

int64_t aimd(const AdaptiveState& s, const Sample& x) {
  if (x.dropped) return s.limit_m * kBackoffM / kMilli;
  return app_limited(s, x.inflight) ? s.limit_m : s.limit_m + kMilli;
}

int64_t vegas(AdaptiveState& s, const Sample& x, int64_t rtt_us) {
  const int64_t whole = s.limit_m / kMilli;
  const int64_t lg = log10_floor_at_least_1(whole);
  if (x.dropped) return s.limit_m - lg * kMilli;
  if (++s.probe_count >= kProbeMultiplier * std::max<int64_t>(1, whole)) {
    s.probe_count = 0;
    s.noload_rtt_us = rtt_us;
    return s.limit_m;
  }
  if (s.noload_rtt_us == 0 || rtt_us < s.noload_rtt_us) {
    s.noload_rtt_us = rtt_us;
    return s.limit_m;
  }
  if (app_limited(s, x.inflight)) return s.limit_m;
  // Units queued: ⌈L · (1 − noload / rtt)⌉ with L = limit_m / 1000, as one ceiling division.
  const int64_t num = s.limit_m * (rtt_us - s.noload_rtt_us);
  const int64_t den = rtt_us * kMilli;
  const int64_t queue = (num + den - 1) / den;
  const int64_t alpha = 3 * lg;
  const int64_t beta = 6 * lg;
  if (queue <= lg) return s.limit_m + beta * kMilli;
  if (queue < alpha) return s.limit_m + lg * kMilli;
  if (queue > beta) return s.limit_m - lg * kMilli;
  return s.limit_m;
}

}  // namespace

std::optional<Estimator> estimator_from_name(std::string_view name) {
  if (name == "gradient2") return Estimator::kGradient2;
  if (name == "aimd") return Estimator::kAimd;
  if (name == "vegas") return Estimator::kVegas;
  return std::nullopt;
}

std::string_view estimator_name(Estimator e) {
  switch (e) {
    case Estimator::kGradient2: return "gradient2";
    case Estimator::kAimd: return "aimd";
    case Estimator::kVegas: return "vegas";
  }
  return "gradient2";
}

Status validate(const AdaptiveConfig& c) {
  auto bad = [](const std::string& what) { return Status::invalid_argument(what); };
  if (c.min_limit < 1) return bad("min_limit must be at least 1, got " + std::to_string(c.min_limit));
  if (c.max_limit > kMaxAdaptiveLimit) {
    return bad("max_limit must be at most " + std::to_string(kMaxAdaptiveLimit) + ", got " + std::to_string(c.max_limit));
  }
  if (c.max_limit < c.min_limit) {
    return bad("max_limit (" + std::to_string(c.max_limit) + ") must be at least min_limit (" +
               std::to_string(c.min_limit) + ")");
  }
  if (c.initial_limit < c.min_limit || c.initial_limit > c.max_limit) {
    return bad("initial_limit (" + std::to_string(c.initial_limit) + ") must lie in [min_limit, max_limit] = [" +
               std::to_string(c.min_limit) + ", " + std::to_string(c.max_limit) + "]");
  }
  if (c.window_us != 0 && (c.window_us < kMinWindowUs || c.window_us > kMaxWindowUs)) {
    return bad("window must be 0 (per sample) or " + std::to_string(kMinWindowUs) + " ... " +
               std::to_string(kMaxWindowUs) + " microseconds, got " + std::to_string(c.window_us));
  }
  return Status::ok();
}

Status validate_latency_us(int64_t latency_us) {
  if (latency_us < 0 || latency_us > kMaxSampleUs) {
    return Status::invalid_argument("latency must be 0 ... " + std::to_string(kMaxSampleUs) +
                                    " microseconds (under 1 hour), got " + std::to_string(latency_us));
  }
  return Status::ok();
}

AdaptiveState initial_state(const AdaptiveConfig& c) {
  AdaptiveState s;
  s.limit_m = c.initial_limit * kMilli;
  return s;
}

int64_t update(const AdaptiveConfig& c, AdaptiveState& s, const Sample& sample) {
  const int64_t lo = c.min_limit * kMilli;
  const int64_t hi = c.max_limit * kMilli;
  s.limit_m = std::clamp(s.limit_m, lo, hi);
  const int64_t rtt_us = std::clamp<int64_t>(sample.rtt_us, 1, kMaxSampleUs);
  int64_t next = s.limit_m;
  switch (c.estimator) {
    case Estimator::kGradient2: next = gradient2(s, sample, rtt_us); break;
    case Estimator::kAimd: next = aimd(s, sample); break;
    case Estimator::kVegas: next = vegas(s, sample, rtt_us); break;
  }
  s.limit_m = std::clamp(next, lo, hi);
  return limit(s);
}

int64_t update_at(const AdaptiveConfig& c, AdaptiveState& s, const Sample& sample, int64_t now_us) {
  if (c.window_us == 0) return update(c, s, sample);
  if (sample.rtt_us < kWindowMinRttUs && !sample.dropped) return limit(s);
  if (s.window_count == 0) s.window_end_us = now_us + c.window_us;
  ++s.window_count;
  s.window_rtt_sum_us += std::clamp<int64_t>(sample.rtt_us, 0, kMaxSampleUs);
  s.window_max_inflight = std::max(s.window_max_inflight, sample.inflight);
  s.window_dropped = s.window_dropped || sample.dropped;
  if (now_us < s.window_end_us) return limit(s);
  const Sample merged{s.window_rtt_sum_us / s.window_count, s.window_max_inflight, s.window_dropped};
  const bool ready = s.window_count >= kWindowMinSamples;
  s.window_end_us = 0;
  s.window_count = 0;
  s.window_rtt_sum_us = 0;
  s.window_max_inflight = 0;
  s.window_dropped = false;
  return ready ? update(c, s, merged) : limit(s);
}

}  // namespace ratelimit::adaptive
