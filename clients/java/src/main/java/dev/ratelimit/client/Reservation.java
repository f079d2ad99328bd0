// Reservation.java — usage known after the response (docs/usage.md): an estimate acquired before
// the work (Limiter.reserve, on ratelimitd or on Redis), reconciled with the actual usage after
// it (a report of actual − estimate: a refund when the work used less), or given back when the
// work is abandoned (cancel(), or close() at the end of try-with-resources when unreconciled).
// Invariant: it reports at most once, and only what the store did not already count: the
// estimate counts only when the acquire recorded it (reason within_limit); after a denial or a
// failure-policy answer nothing was recorded, so reconcile(actual) reports the whole actual (the
// work was done anyway) and cancel() sends nothing.
// Thread-safety: settled from any thread; the first settlement wins.
package dev.ratelimit.client;

import java.util.Optional;

public final class Reservation implements AutoCloseable {
  private final Limiter client;
  private final String policy;
  private final String key;
  private final long estimate;
  private final Decision decision;
  private boolean settled;
  private Optional<Decision> settlement = Optional.empty();

  Reservation(Limiter client, String policy, String key, long estimate, Decision decision) {
    this.client = client;
    this.policy = policy;
    this.key = key;
    this.estimate = estimate;
    this.decision = decision;
  }

  /** The acquire's answer: do the work only when decision().allowed(). */
  public Decision decision() { return decision; }

  public long estimate() { return estimate; }

  public synchronized boolean settled() { return settled; }

  /** The units the acquire that answered `d` for `cost` recorded: cost if the store admitted
   *  it, else 0 (a denial, or the failure policy's answer: nothing was counted). */
  public static long recordedBy(Decision d, long cost) { return "within_limit".equals(d.reason()) ? cost : 0; }

  /** Reports actual − what the acquire recorded (negative: a refund); the report's answer, or
   *  empty when there is nothing to report. RateLimitException invalid_request once settled,
   *  invalid_cost for a negative actual. */
  public synchronized Optional<Decision> reconcile(long actual) {
    if (actual < 0) throw new RateLimitException("invalid_cost", "actual usage must not be negative, got " + actual);
    if (settled) throw new RateLimitException("invalid_request", "reservation for '" + key + "' under '" + policy + "' is already settled");
    settled = true;
    long delta = actual - recordedBy(decision, estimate);
    if (delta != 0) settlement = Optional.of(client.report(policy, key, delta));
    return settlement;
  }

  /** The work was abandoned: gives the recorded estimate back (nothing is sent when nothing was
   *  recorded). Once settled, does nothing and answers the first settlement. */
  public synchronized Optional<Decision> cancel() { return settled ? settlement : reconcile(0); }

  /** cancel(): a reservation left unsettled by its try-with-resources block gives its estimate back. */
  @Override
  public void close() { cancel(); }
}
