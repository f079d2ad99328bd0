// usage.ts — usage known after the response (docs/usage.md) on either back-end: a Reservation
// acquires an estimate before the work and reconciles it with the actual usage after (a report
// of actual − estimate: a refund when the work used less), or gives the estimate back when the
// work is abandoned. The Express middleware (middleware.ts, express.ts) reconciles the same way
// after the response, with the usage from the caller's function.
// Invariant: a reservation reports at most once, and only what the store did not already count:
// the estimate counts only when the acquire recorded it (reason within_limit); after a denial or
// a failure-policy answer nothing was recorded, so reconcile(actual) reports the whole actual
// (the work was done anyway) and cancel() sends nothing.

import { Decision } from './decision';
import { RateLimitError } from './errors';

/** What a reservation needs of a back-end (RedisLimiter and RatelimitdLimiter both are). */
export interface Reporter {
  acquire(policy: string, key: string, options?: { cost?: number }): Promise<Decision>;
  report(policy: string, key: string, cost: number): Promise<Decision>;
}

/** The units the acquire that answered `d` for `cost` recorded: cost if it was admitted by the
 *  store, else 0 (a denial, or the failure policy's answer: the store counted nothing). */
export function recordedBy(d: Decision, cost: number): number {
  return d.reason === 'within_limit' ? cost : 0;
}

export class Reservation {
  private settledWith: Promise<Decision | null> | null = null;

  constructor(
    private readonly limiter: Reporter,
    readonly policy: string,
    readonly key: string,
    /** The units acquired before the work. */
    readonly estimate: number,
    /** The acquire's answer: serve the work only when decision.allowed. */
    readonly decision: Decision,
  ) {}

  /** True once reconcile() or cancel() was called. */
  get settled(): boolean {
    return this.settledWith !== null;
  }

  /** Reports the work's actual usage: actual − what the acquire recorded (negative: a refund).
   *  Resolves to the report's answer, or null when there is nothing to report (a difference of
   *  0). Throws RateLimitError('invalid_request') if the reservation was already settled. */
  reconcile(actual: number): Promise<Decision | null> {
    if (this.settledWith !== null) {
      return Promise.reject(new RateLimitError('invalid_request', `reservation for '${this.key}' under '${this.policy}' is already settled`));
    }
    if (!Number.isSafeInteger(actual) || actual < 0) {
      return Promise.reject(new RateLimitError('invalid_cost', `actual usage must be a non-negative integer, got ${actual}`));
    }
    const delta = actual - recordedBy(this.decision, this.estimate);
    this.settledWith = delta === 0 ? Promise.resolve(null) : this.limiter.report(this.policy, this.key, delta);
    return this.settledWith;
  }

  /** The work was abandoned: gives the recorded estimate back (a refund; nothing is sent when
   *  nothing was recorded). Once settled, does nothing and resolves to the first settlement. */
  cancel(): Promise<Decision | null> {
    return this.settledWith ?? this.reconcile(0);
  }
}

/** Acquires `estimate` units of `key` under `policy` and returns the reservation to reconcile
 *  after the work (its `decision` says whether to do the work at all). */
export async function reserve(limiter: Reporter, policy: string, key: string, estimate: number): Promise<Reservation> {
  const decision = await limiter.acquire(policy, key, { cost: estimate });
  return new Reservation(limiter, policy, key, estimate, decision);
}
