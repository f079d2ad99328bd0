// LeaseOptions.java — the optional part of an acquireLease: priority (a class name of the
// policy's `classes`, sent as `priority`; null or empty: none, ratelimitd then uses the policy's
// lowest class) and maxWait (> 0: ratelimitd holds the request up to that long for a unit to
// free, its `max_wait_ms`; null or zero: answer at once). Checked by acquireLease (a negative
// maxWait is RateLimitException invalid_max_wait before anything is sent). Immutable.
package dev.ratelimit.client;

import java.time.Duration;

public record LeaseOptions(String priority, Duration maxWait) {
  public static final LeaseOptions NONE = new LeaseOptions(null, null);
}
