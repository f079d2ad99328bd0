// decision.ts — the Decision every back-end answers (the same fields as ratelimitd's and the C++
// library's), the library's reply decoding, and the failure-policy decision.
// Invariants: allowed === (reason is 'within_limit' or 'failed_open'); a denial has delayUs 0,
// an admission retryAfterUs 0; durations are integer µs.

import { RateLimitError } from './errors';

export type Reason = 'within_limit' | 'over_limit' | 'exceeds_capacity' | 'policy_conflict' | 'failed_open' | 'failed_closed';
/** The function library's reason numbers (include/ratelimit/decision.h); undefined: one a rate
 *  decision never answers. 6, policy_conflict: the key holds live state of another definition of
 *  the policy's name (another algorithm, window or counting mode); nothing was counted, and
 *  retryAfterUs says when that state ends (docs/redis-functions.md). */
const REASONS: readonly (Reason | undefined)[] = ['within_limit', 'over_limit', 'exceeds_capacity', undefined, undefined, undefined, 'policy_conflict'];

export interface Decision {
  allowed: boolean;
  reason: Reason;
  /** Capacity of the policy (limit or burst). */
  limit: number;
  remaining: number;
  /** Until the limit is fully available again. */
  resetAfterUs: number;
  /** 0 when allowed; else the shortest wait after which the same request would be admitted. */
  retryAfterUs: number;
  /** Shaping leaky bucket: how long to hold an admitted request. */
  delayUs: number;
}

/** What the store cannot decide is answered by the failure policy (as the C++ RedisStore). */
export type FailurePolicy = 'open' | 'closed';
export const FAILED_CLOSED_RETRY_AFTER_US = 1_000_000;

export function failureDecision(policy: FailurePolicy, limit: number): Decision {
  return policy === 'open'
    ? { allowed: true, reason: 'failed_open', limit, remaining: 0, resetAfterUs: 0, retryAfterUs: 0, delayUs: 0 }
    : { allowed: false, reason: 'failed_closed', limit, remaining: 0, resetAfterUs: 0, retryAfterUs: FAILED_CLOSED_RETRY_AFTER_US, delayUs: 0 };
}

/** How the middleware answers a policy_conflict: the app's configuration error, not the end
 *  user's excess (issue 31 defect 8), so it is counted in the limiter's `failures` (both
 *  back-ends have it; a limiter of the app's own without one is left alone), logged naming the
 *  policy, and answered as the limiter failing ('open' passes the request, 'closed' answers as
 *  for a store failure), never as a 429 of its own — as Go's and Java's middleware count and
 *  report it. This counts and logs; the callers answer. */
export function reportConflict(limiter: object, policy: string, key: string, retryAfterUs: number): void {
  const counted = limiter as { failures?: unknown };
  if (typeof counted.failures === 'number') counted.failures++;
  console.error(`ratelimit: policy '${policy}' (key '${key}') is refused as policy_conflict: its state was written under another definition of that name (another algorithm, window or counting mode), which lives ${Math.ceil(retryAfterUs / 1000)} ms more; give a changed definition a new name. Answered by the failure policy.`);
}

/** Decision `i` of a library reply: four integers per decision (reason, remaining,
 *  reset_after_us, delay_us when allowed else retry_after_us). */
export function decodeAt(reply: unknown, i: number, limit: number): Decision {
  if (!Array.isArray(reply) || reply.length < 4 * (i + 1)) {
    throw new RateLimitError('protocol', `unexpected reply from the function library: ${JSON.stringify(reply)}`);
  }
  const b = 4 * i;
  const reason = REASONS[reply[b] as number];
  const remaining = reply[b + 1], reset = reply[b + 2], last = reply[b + 3];
  if (reason === undefined || !Number.isInteger(remaining) || !Number.isInteger(reset) || !Number.isInteger(last)) {
    throw new RateLimitError('protocol', `unexpected decision in the library's reply: ${JSON.stringify(reply.slice(b, b + 4))}`);
  }
  const allowed = reason === 'within_limit';
  return { allowed, reason, limit, remaining, resetAfterUs: reset, retryAfterUs: allowed ? 0 : last, delayUs: allowed ? last : 0 };
}
