// Lease.java — one answer of RatelimitdClient.acquireLease (POST /v1/leases, docs/throttling.md):
// a granted lease (allowed, with the id to release or renew it) or a refusal (over_limit with
// retryAfter, exceeds_capacity), as the Go, Node and Python clients' Lease. A grant without an
// id is the failure policy's (failed_open: ratelimitd could not be asked, or its store failed
// open): releasing or renewing it sends nothing. failed_closed is a refusal for 1 s.
// Invariants: allowed == (reason is within_limit or failed_open); id != null only when allowed;
// limit, remaining and the RateLimit fields are ratelimitd's (0 / null when it did not answer).
// Thread-safety: immutable but for expires, which renewLease updates (volatile): a lease may be
// renewed from one thread while another reads it.
package dev.ratelimit.client;

import java.time.Duration;

public final class Lease {
  private final boolean allowed;
  private final String reason;
  private final String id;
  private final String policy;
  private final String key;
  private final long limit;
  private final long remaining;
  private volatile Duration expires;
  private final Duration retryAfter;
  private final String rateLimitPolicy;
  private final String rateLimit;

  Lease(boolean allowed, String reason, String id, String policy, String key, long limit, long remaining,
        Duration expires, Duration retryAfter, String rateLimitPolicy, String rateLimit) {
    this.allowed = allowed;
    this.reason = reason;
    this.id = id;
    this.policy = policy;
    this.key = key;
    this.limit = limit;
    this.remaining = remaining;
    this.expires = expires;
    this.retryAfter = retryAfter;
    this.rateLimitPolicy = rateLimitPolicy;
    this.rateLimit = rateLimit;
  }

  /** Granted: the work may run (with a lease to release when id() is not null). */
  public boolean allowed() { return allowed; }

  /** within_limit, over_limit, exceeds_capacity, policy_conflict, failed_open or failed_closed. */
  public String reason() { return reason; }

  /** The lease id ratelimitd issued; null for a refusal or the failure policy's grant. */
  public String id() { return id; }

  public String policy() { return policy; }

  public String key() { return key; }

  /** The policy's limit for this key as ratelimitd answered it (an adaptive policy's learned one). */
  public long limit() { return limit; }

  /** Units left for the key once this lease was granted (refused: what was left). */
  public long remaining() { return remaining; }

  /** Until the lease lapses unless renewed (granted); a renew sets it anew. */
  public Duration expires() { return expires; }

  void expires(Duration d) { expires = d; }

  /** The shortest wait before the same request could be granted (refused); zero when granted. */
  public Duration retryAfter() { return retryAfter; }

  /** ratelimitd's RateLimit-Policy field for this answer; null when it did not answer. */
  public String rateLimitPolicy() { return rateLimitPolicy; }

  /** ratelimitd's RateLimit field for this answer; null when it did not answer. */
  public String rateLimit() { return rateLimit; }

  @Override
  public String toString() {
    return "Lease[allowed=" + allowed + ", reason=" + reason + ", id=" + id + ", policy=" + policy + ", key=" + key
        + ", limit=" + limit + ", remaining=" + remaining + ", expires=" + expires + ", retryAfter=" + retryAfter + "]";
  }
}
