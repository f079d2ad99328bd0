// Limiter.java — what the filter and Reservation need of a back-end: decisions (acquire, peek,
// report) and a policy's quota and window for the headers. Two implementations: RatelimitdClient
// (ratelimitd over HTTP, its policies) and RedisLimiter (the function library on Redis directly,
// policies defined in the app); both answer the same Decision for the same state, and a failure
// by their failure policy (reasons failed_open / failed_closed), never by an exception.
// Bad input throws RateLimitException with ratelimitd's code.
// Thread-safety: implementations are safe to share between threads.
package dev.ratelimit.client;

import java.util.Optional;

public interface Limiter {
  /** Consumes `cost` units of `key`'s allowance under `policy` unless that would exceed it. */
  Decision acquire(String policy, String key, long cost);

  /** What acquire would answer, consuming nothing. */
  Decision peek(String policy, String key, long cost);

  /** Records usage known after the fact (docs/usage.md): `cost` units even past the limit (the
   *  key is then in debt), or, negative, a refund; 0 records nothing. Always allowed. */
  Decision report(String policy, String key, long cost);

  /** The quota and window RateLimit-Policy shows for `policy`, when known. */
  Optional<PolicyInfo> describe(String policy);

  /** Decisions the failure policy answered. */
  long failures();

  /** Acquires `estimate` units now, to reconcile with the actual usage after the work. */
  default Reservation reserve(String policy, String key, long estimate) {
    return new Reservation(this, policy, key, estimate, acquire(policy, key, estimate));
  }
}
