// policy.cc — validation of policy parameters, cost, names and durations
// (see include/ratelimit/policy.h for the invariants every Policy value keeps).
//
// Every bounded parameter is one row of the range tables below (kLimit, kWindow, ...), checked
// by one function per kind (check(IntRange), check(DurationRange)), so each bound and its
// message live in one place; a duration's bounds are written with the units parse_duration
// reads (kDurationUnits), e.g. "window must be between 1ms and 366d, got 999us".
#include "ratelimit/policy.h"

#include <charconv>
#include <cmath>
#include <functional>
#include <string>
#include <string_view>

#include "ratelimit/algorithms.h"
#include "units.h"

namespace ratelimit {
namespace {

constexpr double kTwoPow53 = 9007199254740992.0;  // largest range of exact integers in a double

std::string format_rate(double rate) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, rate);
  std::string s(buf, r.ptr);
  std::erase(s, '+');
  return s;
}

// The units of a duration, largest first: what parse_duration reads, and how a bound is shown.
struct DurationUnit {
  std::string_view suffix;
  int64_t scale;  // microseconds
};
constexpr DurationUnit kDurationUnits[] = {{"d", 86'400'000'000}, {"h", 3'600'000'000},
                                           {"m", 60'000'000},     {"s", 1'000'000},
                                           {"ms", 1'000},         {"us", 1}};

// `d` in the largest unit that divides it exactly: 1000us -> "1ms", 60s -> "1m".
std::string format_bound(Micros d) {
  for (const DurationUnit& u : kDurationUnits) {
    if (d.count() % u.scale == 0) return std::to_string(d.count() / u.scale) + std::string(u.suffix);
  }
  return std::to_string(d.count()) + "us";  // unreachable: the last unit divides everything
}

// A parameter's inclusive range, named as the message shows it.
struct IntRange {
  const char* what;
  int64_t lo, hi;
};
struct DurationRange {
  const char* what;
  Micros lo, hi;
};

constexpr IntRange kLimit{"limit", 1, kMaxLimit};
constexpr IntRange kBurst{"burst", 1, kMaxLimit};
constexpr IntRange kEveryHitLimit{"limit", 0, kMaxEveryHitLimit};
constexpr IntRange kCost{"cost", 1, kMaxCost};
constexpr DurationRange kWindow{"window", kMinWindow, kMaxWindow};
constexpr DurationRange kConcurrencyLeaseTtl{"lease_ttl", kMinWindow, kMaxConcurrencyLeaseTtl};
constexpr DurationRange kSyncInterval{"sync_interval", kMinSyncInterval, kMaxSyncInterval};
constexpr DurationRange kConsistencyLeaseTtl{"lease_ttl", kMinLeaseTtl, kMaxLeaseTtl};

// "<what> must be between <lo> and <hi>, got <v>" when v is outside [lo, hi].
Status check(const IntRange& r, int64_t v) {
  if (v < r.lo || v > r.hi) {
    return Status::invalid_argument(std::string(r.what) + " must be between " +
                                    std::to_string(r.lo) + " and " + std::to_string(r.hi) +
                                    ", got " + std::to_string(v));
  }
  return {};
}

// "<what> must be between <lo> and <hi>, got <v>us", the bounds in their largest exact unit.
Status check(const DurationRange& r, Micros v) {
  if (v < r.lo || v > r.hi) {
    return Status::invalid_argument(std::string(r.what) + " must be between " +
                                    format_bound(r.lo) + " and " + format_bound(r.hi) +
                                    ", got " + std::to_string(v.count()) + "us");
  }
  return {};
}

// A bucket's window: the time it takes to refill from empty to its burst.
Micros bucket_window(double rate_per_second, int64_t burst) {
  return Micros{algo::time_to_drain_us(burst * algo::kUnit, rate_per_second)};
}

// The default name of a windowed policy: "<label>:l<limit>:w<window>us".
std::string windowed_name(const char* label, int64_t limit, Micros window) {
  return std::string(label) + ":l" + std::to_string(limit) + ":w" +
         std::to_string(window.count()) + "us";
}

// Only the sliding window counter multiplies a count by a window length: its retry arithmetic
// reaches (limit + 1) * window_us, which must stay an exact integer in a Lua double.
Status check_counter_product(int64_t limit, Micros window) {
  if (static_cast<double>(limit + 1) * static_cast<double>(window.count()) > kTwoPow53) {
    return Status::invalid_argument(
        "limit x window overflows exact arithmetic ((limit + 1) * window_us must be <= 2^53, "
        "e.g. at most 100000 per day): use a smaller limit or window");
  }
  return {};
}

Status check_rate(double rate, int64_t burst) {
  if (!std::isfinite(rate) || rate < kMinRate || rate > kMaxRate) {
    return Status::invalid_argument("rate must be a finite number of units per second between "
                                    "1e-06 and 1e9, got " + format_rate(rate));
  }
  // The drain time of a full (or, in count-denied mode, doubly full) bucket must fit in µs.
  if (2.0 * static_cast<double>(burst) * static_cast<double>(algo::kUnit) / rate > kTwoPow53) {
    return Status::invalid_argument("burst / rate is too long (over 140 years to refill)");
  }
  return {};
}

}  // namespace

const char* algorithm_name(Algorithm a) {
  const auto index = algorithm_index(a);
  return index < kAlgorithmCount ? kAlgorithmTable[index].name : "unknown";
}

Result<Algorithm> parse_algorithm(std::string_view name) {
  std::string expected;  // "a, b, ... or z"
  for (size_t i = 0; i < kAlgorithmCount; ++i) {
    if (name == kAlgorithmTable[i].name) return kAlgorithmTable[i].algorithm;
    if (i > 0) expected += i + 1 == kAlgorithmCount ? " or " : ", ";
    expected += kAlgorithmTable[i].name;
  }
  return Status::not_found("unknown algorithm '" + std::string(name) + "' (expected " + expected +
                           ")");
}

Result<Policy> Policy::fixed_window(int64_t limit, Micros window) {
  if (auto s = check(kLimit, limit); !s.is_ok()) return s;
  if (auto s = check(kWindow, window); !s.is_ok()) return s;
  return make(Algorithm::kFixedWindow, limit, window, 0, windowed_name("fixed_window", limit, window));
}

Result<Policy> Policy::fixed_window_every_hit(int64_t limit, Micros window) {
  if (auto s = check(kEveryHitLimit, limit); !s.is_ok()) return s;
  if (auto s = check(kWindow, window); !s.is_ok()) return s;
  Policy p = make(Algorithm::kFixedWindow, limit, window, 0,
                  windowed_name("fixed_window_every_hit", limit, window));
  p.every_hit_ = true;
  return p;
}

Result<Policy> Policy::sliding_window_log(int64_t limit, Micros window) {
  if (auto s = check(kLimit, limit); !s.is_ok()) return s;
  if (limit > kMaxSlidingLogLimit) {
    return Status::invalid_argument(
        "sliding_window_log keeps one entry per admitted request, so its limit is capped at " +
        std::to_string(kMaxSlidingLogLimit) + " (got " + std::to_string(limit) +
        "); use sliding_window_counter for larger limits");
  }
  if (auto s = check(kWindow, window); !s.is_ok()) return s;
  return make(Algorithm::kSlidingWindowLog, limit, window, 0,
              windowed_name("sliding_window_log", limit, window));
}

Result<Policy> Policy::sliding_window_counter(int64_t limit, Micros window) {
  if (auto s = check(kLimit, limit); !s.is_ok()) return s;
  if (auto s = check(kWindow, window); !s.is_ok()) return s;
  if (auto s = check_counter_product(limit, window); !s.is_ok()) return s;
  return make(Algorithm::kSlidingWindowCounter, limit, window, 0,
              windowed_name("sliding_window_counter", limit, window));
}

Result<Policy> Policy::token_bucket(double rate_per_second, int64_t burst) {
  if (auto s = check(kBurst, burst); !s.is_ok()) return s;
  if (auto s = check_rate(rate_per_second, burst); !s.is_ok()) return s;
  return make(Algorithm::kTokenBucket, burst, bucket_window(rate_per_second, burst), rate_per_second,
              "token_bucket:r" + format_rate(rate_per_second) + ":b" + std::to_string(burst));
}

Result<Policy> Policy::leaky_bucket(double rate_per_second, int64_t burst, LeakyMode mode) {
  if (auto s = check(kBurst, burst); !s.is_ok()) return s;
  if (auto s = check_rate(rate_per_second, burst); !s.is_ok()) return s;
  Policy p = make(Algorithm::kLeakyBucket, burst, bucket_window(rate_per_second, burst), rate_per_second,
                  "leaky_bucket:r" + format_rate(rate_per_second) + ":b" + std::to_string(burst) +
                      (mode == LeakyMode::kShape ? ":shape" : ":police"));
  p.leaky_mode_ = mode;
  return p;
}

Result<Policy> Policy::concurrency(int64_t limit, Micros lease_ttl) {
  if (auto s = check(kLimit, limit); !s.is_ok()) return s;
  if (limit > kMaxConcurrencyLimit) {
    return Status::invalid_argument("a concurrency policy keeps one entry per lease held, so its "
                                    "limit is capped at " + std::to_string(kMaxConcurrencyLimit) +
                                    " (got " + std::to_string(limit) + ")");
  }
  if (auto s = check(kConcurrencyLeaseTtl, lease_ttl); !s.is_ok()) return s;
  return make(Algorithm::kConcurrency, limit, lease_ttl, 0,
              "concurrency:l" + std::to_string(limit) + ":ttl" + std::to_string(lease_ttl.count()) + "us");
}

Result<Policy> Policy::adaptive_concurrency(const adaptive::AdaptiveConfig& config, Micros lease_ttl) {
  if (auto s = adaptive::validate(config); !s.is_ok()) return s;
  auto p = concurrency(config.max_limit, lease_ttl);
  if (!p.ok()) return p.status();
  Policy out = std::move(*p);
  out.adaptive_ = config;
  out.set_name("concurrency:adaptive:" + std::string(adaptive::estimator_name(config.estimator)) + ":min" +
               std::to_string(config.min_limit) + ":init" + std::to_string(config.initial_limit) + ":max" +
               std::to_string(config.max_limit) + ":ttl" + std::to_string(lease_ttl.count()) + "us");
  return out;
}

Result<Policy> Policy::with_name(std::string name) const {
  if (auto s = validate_policy_name(name); !s.is_ok()) return s;
  Policy p = *this;
  p.set_name(std::move(name));
  return p;
}

Policy Policy::make(Algorithm algorithm, int64_t limit, Micros window, double rate, std::string name) {
  Policy p;
  p.algorithm_ = algorithm;
  p.limit_ = limit;
  p.window_ = window;
  p.rate_ = rate;
  p.set_name(std::move(name));
  return p;
}

void Policy::set_name(std::string name) {
  name_ = std::move(name);
  name_hash_ = std::hash<std::string_view>{}(name_);
}

Policy Policy::with_count_denied(bool on) const {
  Policy p = *this;
  p.count_denied_ = on;
  // Every denied attempt must reach the store to be counted: only exact can do that.
  if (on) p.consistency_ = {};
  return p;
}

const char* consistency_name(Consistency c) {
  switch (c) {
    case Consistency::kExact: return "exact";
    case Consistency::kLease: return "lease";
    case Consistency::kAsync: return "async";
  }
  return "unknown";
}

Result<Consistency> parse_consistency(std::string_view text) {
  for (auto c : {Consistency::kExact, Consistency::kLease, Consistency::kAsync}) {
    if (text == consistency_name(c)) return c;
  }
  return Status::invalid_argument("unknown consistency '" + std::string(text) +
                                  "' (expected exact, lease or async)");
}

Result<Policy> Policy::with_consistency(const ConsistencyOptions& o) const {
  if (auto s = check(kSyncInterval, o.sync_interval); !s.is_ok()) return s;
  if (auto s = check(kConsistencyLeaseTtl, o.lease_ttl); !s.is_ok()) return s;
  if (o.lease_max < 0 || o.lease_max > limit_) {
    return Status::invalid_argument("lease_max must be between 0 (default: limit / 20) and the "
                                    "limit (" + std::to_string(limit_) + "), got " +
                                    std::to_string(o.lease_max));
  }
  if (o.mode != Consistency::kExact) {
    const bool windowed = algorithm_ == Algorithm::kFixedWindow ||
                          algorithm_ == Algorithm::kSlidingWindowCounter;
    if (!windowed) {
      return Status::invalid_argument(
          std::string("consistency ") + consistency_name(o.mode) +
          " is defined for fixed_window and sliding_window_counter only, not " +
          algorithm_name(algorithm_) +
          " (a bucket's units move in time, a log keeps one entry per request: see "
          "docs/distributed.md)");
    }
    if (every_hit_ || count_denied_) {
      return Status::invalid_argument(std::string("consistency ") + consistency_name(o.mode) +
                                      " cannot count denied attempts (every attempt must reach "
                                      "the store): use consistency exact");
    }
  }
  if (o.across_regions) {
    const bool windowed = algorithm_ == Algorithm::kFixedWindow ||
                          algorithm_ == Algorithm::kSlidingWindowCounter;
    if (!windowed) {
      return Status::invalid_argument(
          std::string("scope global (counted across regions) is defined for fixed_window and "
                      "sliding_window_counter only, not ") +
          algorithm_name(algorithm_) +
          ": regions exchange a grow-only count per window, which a bucket's level or a log's "
          "timestamps are not (docs/distributed.md); use scope: region to limit per region");
    }
    if (o.mode != Consistency::kExact) {
      return Status::invalid_argument(std::string("scope global needs consistency exact (got ") +
                                      consistency_name(o.mode) +
                                      "): lease and async count within one region; use scope: "
                                      "region with them");
    }
    if (every_hit_ || count_denied_) {
      return Status::invalid_argument(
          "scope global cannot count denied attempts (a region's count must grow only by "
          "admissions): use scope: region");
    }
  }
  Policy p = *this;
  p.consistency_ = o;
  return p;
}

bool Policy::same_state_meaning(const Policy& other) const {
  if (algorithm_ != other.algorithm_) return false;
  if (algorithm_ == Algorithm::kConcurrency) return true;
  if (count_denied_ != other.count_denied_ || every_hit_ != other.every_hit_) return false;
  return is_bucket() || window_ == other.window_;
}

Result<Policy> Policy::with_limit(int64_t limit) const {
  if (adaptive_) {
    return Status::invalid_argument("an adaptive concurrency policy learns its limit: a limit of one's own is refused");
  }
  Result<Policy> base = [&]() -> Result<Policy> {
    switch (algorithm_) {
      case Algorithm::kFixedWindow:
        return every_hit_ ? fixed_window_every_hit(limit, window_) : fixed_window(limit, window_);
      case Algorithm::kSlidingWindowLog:
        return sliding_window_log(limit, window_);
      case Algorithm::kSlidingWindowCounter:
        return sliding_window_counter(limit, window_);
      case Algorithm::kTokenBucket:
        return token_bucket(rate_, limit);
      case Algorithm::kLeakyBucket:
        return leaky_bucket(rate_, limit, leaky_mode_);
      case Algorithm::kConcurrency:
        return concurrency(limit, window_);
    }
    return Status::invalid_argument("unknown algorithm");
  }();
  if (!base.ok()) return base.status();
  Policy p = *base;
  p.count_denied_ = count_denied_;
  p.name_ = name_;
  p.name_hash_ = name_hash_;
  // The consistency settings are re-validated against the new capacity (lease_max <= limit).
  if (consistency_ == ConsistencyOptions{}) return p;
  return p.with_consistency(consistency_);
}

Status validate_cost(int64_t cost) { return check(kCost, cost); }

Status validate_cost(const Policy& policy, int64_t cost) {
  if (cost == 0 && policy.counts_every_hit()) return {};
  return validate_cost(cost);
}

Status validate_policy_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxPolicyNameLength) {
    return Status::invalid_argument("policy name must be 1 to " +
                                    std::to_string(kMaxPolicyNameLength) + " characters");
  }
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == ':' || c == '-';
    if (!ok) {
      return Status::invalid_argument("policy name '" + std::string(name) +
                                      "' may contain only letters, digits and _ . : -");
    }
  }
  return {};
}

Result<Micros> parse_duration(std::string_view text) {
  auto bad = [&](const char* why) {
    return Status::invalid_argument("invalid duration '" + std::string(text) + "': " + why +
                                    " (expected e.g. 500ms, 1s, 60s, 1m, 1h, 1d)");
  };
  int64_t n = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec == std::errc::result_out_of_range) return bad("number too large");
  if (ec != std::errc() || ptr == text.data()) return bad("must start with a whole number");
  std::string_view unit(ptr, static_cast<size_t>(text.data() + text.size() - ptr));
  if (unit.empty()) return bad("missing unit");
  int64_t scale = 0;
  for (const DurationUnit& u : kDurationUnits) {
    if (unit == u.suffix) scale = u.scale;
  }
  if (scale == 0) return bad("unknown unit");
  if (n <= 0) return bad("must be positive");
  if (n > INT64_MAX / scale) return bad("too long");
  return Micros{n * scale};
}

}  // namespace ratelimit
