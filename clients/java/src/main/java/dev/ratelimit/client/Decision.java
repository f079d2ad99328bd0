// Decision.java — what the limiter answers (ratelimitd's and the C++ library's fields); a "no"
// is a Decision, never an exception. Durations in microseconds (ratelimitd's ms figures times
// 1000, so they render to the same whole seconds). Immutable.
package dev.ratelimit.client;

public record Decision(boolean allowed, String reason, long limit, long remaining,
                       long resetAfterUs, long retryAfterUs, long delayUs) {
  /** What a decision answers when ratelimitd cannot be reached: open admits, closed denies for 1 s. */
  public static Decision failure(FailurePolicy policy, long limit) {
    return policy == FailurePolicy.OPEN
        ? new Decision(true, "failed_open", limit, 0, 0, 0, 0)
        : new Decision(false, "failed_closed", limit, 0, 0, 1_000_000, 0);
  }
}
