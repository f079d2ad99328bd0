// LeaseOptions.java — the optional part of an acquireLease: priority (a class name of the
// policy's `classes`, sent as `priority`; null or empty: none, ratelimitd then uses the policy's
// lowest class) and maxWait, sent as `max_wait_ms`: how long ratelimitd may hold the request for
// a unit to free, capped by the policy's own `max_wait` (a request may wait less, never more);
// zero: do not wait; null: the policy's max_wait (none unless it has one: then give the client
// a timeout above it, or the wait ends in the failure policy). Checked by acquireLease (a
// negative maxWait is RateLimitException invalid_max_wait before anything is sent). Immutable.
package dev.ratelimit.client;

import java.time.Duration;

public record LeaseOptions(String priority, Duration maxWait) {
  public static final LeaseOptions NONE = new LeaseOptions(null, null);
}
