// RateLimitInfo.java — the filter's decision as the servlet (and a refusal handler) sees it: the
// request attribute ATTRIBUTE ("dev.ratelimit.decision"), as req.rateLimit in the Node
// middleware and request.state.rate_limit in the Python one. Set on every request the filter
// decided (admitted or refused), absent on a skipped one and on a 400 for a bad key.
// Durations in ms rounded up, as ratelimitd's body. Immutable.
package dev.ratelimit.client;

public record RateLimitInfo(String policy, String key, long cost, boolean allowed, String reason, long limit,
                            long remaining, long resetMs, long retryAfterMs, Decision decision) {
  /** The request attribute holding the RateLimitInfo of the filter's decision. */
  public static final String ATTRIBUTE = "dev.ratelimit.decision";

  static RateLimitInfo of(String policy, String key, long cost, Decision d) {
    return new RateLimitInfo(policy, key, cost, d.allowed(), d.reason(), d.limit(), d.remaining(),
        Headers.ceil(d.resetAfterUs(), 1000), d.allowed() ? 0 : Headers.ceil(d.retryAfterUs(), 1000), d);
  }
}
