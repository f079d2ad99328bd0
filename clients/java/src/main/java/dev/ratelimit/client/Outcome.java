// Outcome.java — what a released lease's work came to, which an adaptive concurrency limit
// learns from (docs/throttling.md "Adaptive limits"): outcome "ok", "dropped" (the work failed
// for load: a 5xx, an exception), "timeout", or null (none: ratelimitd takes grant-to-release as
// the round trip); latency the work's own (zero: none sent).
// Invariant, checked when built so that a release never sends what ratelimitd refuses with 400
// (which would leave the lease held): outcome is null or one of the three; latency is 0 or more
// and under an hour (MAX_LATENCY). Anything else is RateLimitException invalid_outcome /
// invalid_latency. Immutable.
package dev.ratelimit.client;

import java.time.Duration;

public record Outcome(String outcome, Duration latency) {
  /** ratelimitd's bound on a release's latency (src/server/api/request.cc): under an hour. */
  public static final Duration MAX_LATENCY = Duration.ofHours(1);
  /** No outcome and no latency: the release sends no body. */
  public static final Outcome NONE = new Outcome(null, Duration.ZERO);

  public Outcome {
    if (outcome != null && !outcome.equals("ok") && !outcome.equals("dropped") && !outcome.equals("timeout")) {
      throw new RateLimitException("invalid_outcome", "outcome must be ok, dropped or timeout, got '" + outcome + "'");
    }
    if (latency == null) latency = Duration.ZERO;
    if (latency.isNegative() || latency.compareTo(MAX_LATENCY) >= 0) {
      throw new RateLimitException("invalid_latency", "latency must be 0 or more and under an hour, got " + latency);
    }
  }

  public static Outcome ok(Duration latency) { return new Outcome("ok", latency); }

  public static Outcome dropped(Duration latency) { return new Outcome("dropped", latency); }

  public static Outcome timeout(Duration latency) { return new Outcome("timeout", latency); }

  /** A latency in (fractional) milliseconds, as ratelimitd's latency_ms: NaN, infinite, negative
   *  or an hour or more is invalid_latency. */
  public static Outcome ofMillis(String outcome, double latencyMs) {
    if (Double.isNaN(latencyMs) || latencyMs < 0 || latencyMs >= MAX_LATENCY.toMillis()) {
      throw new RateLimitException("invalid_latency", "latency_ms must be a number, 0 or more and under 3600000, got " + latencyMs);
    }
    return new Outcome(outcome, Duration.ofNanos(Math.round(latencyMs * 1e6)));
  }
}
