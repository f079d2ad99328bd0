// patterns.cc — generation of the built-in patterns (formulas in patterns.h).
#include "patterns.h"

#include <cmath>
#include <sstream>

#include "py_random.h"
#include "timestamps.h"

namespace ratelimit::sim {
namespace {

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

Pattern make_a(const PatternParams& p) {
  Pattern out;
  out.name = 'A';
  out.description = "steady Poisson traffic, " + num(p.poisson_rate) + "/s for " +
                    num(p.poisson_duration_s) + "s, seed " + std::to_string(p.seed);
  PyRandom rng(p.seed);
  double t = 0;
  // Bounded: validate() caps rate * duration, and the loop stops far above that count.
  const auto cap = static_cast<size_t>(4 * kMaxPatternRequests);
  while (out.requests.size() < cap) {
    t += rng.expovariate(p.poisson_rate);
    if (t >= p.poisson_duration_s) break;
    out.requests.push_back({seconds_to_us(t), false});
  }
  return out;
}

Pattern make_b(const PatternParams& p) {
  Pattern out;
  out.name = 'B';
  out.description = "burst of " + std::to_string(p.burst_size) + " requests from " +
                    num(p.burst_start_s) + "s within " + num(p.burst_span_s) + "s";
  const auto n = static_cast<double>(p.burst_size);
  for (int64_t i = 0; i < p.burst_size; ++i) {
    const double t = p.burst_start_s + static_cast<double>(i) * p.burst_span_s / n;
    out.requests.push_back({seconds_to_us(t), false});
  }
  return out;
}

Pattern make_c() {
  Pattern out;
  out.name = 'C';
  out.description = "window-boundary attack: 10/s steady for 3s, then 10 at 3.9s and 10 at 4.0s";
  out.token_starts_empty = true;
  for (int w = 0; w < 3; ++w) {
    for (int i = 0; i < 10; ++i) out.requests.push_back({seconds_to_us(w + i / 10.0), false});
  }
  for (int i = 0; i < 10; ++i) out.requests.push_back({seconds_to_us(3.9 + i * 0.01), true});
  for (int i = 0; i < 10; ++i) out.requests.push_back({seconds_to_us(4.0 + i * 0.01), true});
  return out;
}

}  // namespace

Status validate(const PatternParams& p) {
  auto bad = [](const std::string& what) { return Status::invalid_argument(what); };
  if (!std::isfinite(p.poisson_rate) || p.poisson_rate <= 0) {
    return bad("--poisson-rate must be a positive number of requests per second, got " +
               num(p.poisson_rate));
  }
  if (!std::isfinite(p.poisson_duration_s) || p.poisson_duration_s <= 0 ||
      !seconds_in_range(p.poisson_duration_s)) {
    return bad("--poisson-duration must be a positive number of seconds, got " +
               num(p.poisson_duration_s));
  }
  if (p.poisson_rate * p.poisson_duration_s > kMaxPatternRequests) {
    return bad("--poisson-rate x --poisson-duration asks for about " +
               num(p.poisson_rate * p.poisson_duration_s) +
               " requests; the built-in pattern holds at most 1e7 (use --trace for more)");
  }
  if (p.burst_size < 1 || p.burst_size > kMaxBurstSize) {
    return bad("--burst-size must be between 1 and " + std::to_string(kMaxBurstSize) +
               ", got " + std::to_string(p.burst_size));
  }
  if (!seconds_in_range(p.burst_start_s)) {
    return bad("--burst-start must be a non-negative number of seconds, got " +
               num(p.burst_start_s));
  }
  if (!seconds_in_range(p.burst_span_s) || !seconds_in_range(p.burst_start_s + p.burst_span_s)) {
    return bad("--burst-span must be a non-negative number of seconds, got " +
               num(p.burst_span_s));
  }
  return {};
}

Result<Pattern> make_pattern(char name, const PatternParams& params) {
  if (auto s = validate(params); !s.is_ok()) return s;
  switch (name) {
    case 'A': case 'a': return make_a(params);
    case 'B': case 'b': return make_b(params);
    case 'C': case 'c': return make_c();
    default: break;
  }
  return Status::invalid_argument(std::string("unknown pattern '") + name +
                                  "' (expected A, B or C)");
}

}  // namespace ratelimit::sim
