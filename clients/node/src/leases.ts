// leases.ts — concurrency leases through ratelimitd (docs/throttling.md): POST /v1/leases takes
// `cost` units of a concurrency policy, DELETE /v1/leases/{id} gives them back (with the work's
// outcome and latency, which an adaptive limit learns from), POST /v1/leases/{id}/renew extends
// one. RatelimitdLimiter's acquireLease/releaseLease/renewLease call these.
// Input that ratelimitd would refuse (empty key or policy, a cost that is not a whole number ≥ 1,
// an outcome or latency it answers 400 for) is refused here before anything is sent; ratelimitd's
// own 4xx codes (unknown_policy, limit_not_allowed, invalid_max_wait, …) are thrown as
// RateLimitError with ratelimitd's code. No answer within the limiter's timeout, a refused
// connection or a 5xx is answered by its failure policy, as the rate path: 'open' grants a Lease
// without an id (the work proceeds unprotected; releasing it sends nothing), 'closed' refuses
// with reason failed_closed and a 1 s Retry-After. A release never throws for an unreachable
// ratelimitd (it answers false: the lease then lapses at its TTL), so a `finally` can call it.

import { FAILED_CLOSED_RETRY_AFTER_US, FailurePolicy, Reason } from './decision';
import { RateLimitError } from './errors';

export type Outcome = 'ok' | 'dropped' | 'timeout';
const OUTCOMES: readonly string[] = ['ok', 'dropped', 'timeout'];
/** ratelimitd's bound on a reported latency (src/server/api/request.cc): under an hour. */
const MAX_LATENCY_MS = 3_600_000;

export interface LeaseOptions {
  /** Units held (default 1). */
  cost?: number;
  /** The priority class, sent as `priority` only when given. */
  priority?: string;
  /** Wait at most this long for room instead of a refusal (a policy with max_wait). */
  maxWaitMs?: number;
}

export interface ReleaseOptions {
  outcome?: Outcome;
  /** The work's own latency; absent: ratelimitd takes grant-to-release. */
  latencyMs?: number;
}

/** A granted lease (allowed) or a refusal. A grant without an id is the failure policy's. */
export interface Lease {
  allowed: boolean;
  reason: Reason;
  /** null when not granted, or granted by the failure policy (nothing to release). */
  id: string | null;
  policy: string;
  key: string;
  limit: number;
  remaining: number;
  /** Until the lease lapses unless renewed (granted), ms. */
  expiresMs: number;
  /** The shortest wait after which the same request could be granted (refused), µs. */
  retryAfterUs: number;
  /** ratelimitd's RateLimit-Policy and RateLimit fields, to pass on to the client. */
  rateLimitPolicy: string | null;
  rateLimit: string | null;
}

/** What the lease calls need of a RatelimitdLimiter. */
export interface LeaseTransport {
  base: string;
  timeoutMs: number;
  onFailure: FailurePolicy;
  /** Counts and reports a call that the failure policy answered. */
  failed: (e: Error) => void;
}

interface Answer { status: number; body: Record<string, unknown>; headers: Headers }

async function call(t: LeaseTransport, method: string, path: string, body?: object): Promise<Answer | null> {
  let res: Response;
  let text: string;
  try {
    res = await fetch(t.base + path, {
      method, headers: body === undefined ? {} : { 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body), signal: AbortSignal.timeout(t.timeoutMs),
    });
    text = await res.text();
    if (res.status >= 500) throw new RateLimitError('unavailable', `ratelimitd answered ${res.status}: ${text.slice(0, 200)}`);
  } catch (e) {
    t.failed(e as Error);
    return null;
  }
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new RateLimitError('protocol', `ratelimitd answered something that is not JSON: ${text.slice(0, 200)}`);
  }
  return { status: res.status, body: parsed, headers: res.headers };
}

function thrown(a: Answer): RateLimitError {
  const code = typeof a.body.error === 'string' ? a.body.error : 'protocol';
  return new RateLimitError(code, `ratelimitd answered ${a.status}: ${typeof a.body.message === 'string' ? a.body.message : JSON.stringify(a.body)}`);
}

function check(ok: boolean, code: string, message: string): void {
  if (!ok) throw new RateLimitError(code, message);
}

export async function acquireLease(t: LeaseTransport, policy: string, key: string, options: LeaseOptions = {}): Promise<Lease> {
  const cost = options.cost ?? 1;
  check(typeof policy === 'string' && policy.length > 0, 'invalid_policy', 'policy must be a non-empty string');
  check(typeof key === 'string' && key.length > 0, 'invalid_key', 'key must be a non-empty string');
  check(Number.isSafeInteger(cost) && cost >= 1, 'invalid_cost', `cost must be a whole number of at least 1, got ${cost}`);
  check(options.priority === undefined || (typeof options.priority === 'string' && options.priority.length > 0), 'invalid_priority', 'priority must be a non-empty string');
  check(options.maxWaitMs === undefined || (Number.isSafeInteger(options.maxWaitMs) && options.maxWaitMs >= 0), 'invalid_max_wait', `maxWaitMs must be a whole number of ms, 0 or more, got ${options.maxWaitMs}`);
  const body: Record<string, unknown> = { key, policy, cost };
  if (options.priority !== undefined) body.priority = options.priority;
  if (options.maxWaitMs !== undefined) body.max_wait_ms = options.maxWaitMs;
  const a = await call(t, 'POST', '/v1/leases', body);
  const lease: Lease = { allowed: false, reason: 'over_limit', id: null, policy, key, limit: 0, remaining: 0, expiresMs: 0, retryAfterUs: 0, rateLimitPolicy: null, rateLimit: null };
  if (a === null) {
    return t.onFailure === 'open'
      ? { ...lease, allowed: true, reason: 'failed_open' }
      : { ...lease, reason: 'failed_closed', retryAfterUs: FAILED_CLOSED_RETRY_AFTER_US };
  }
  lease.rateLimitPolicy = a.headers.get('ratelimit-policy');
  lease.rateLimit = a.headers.get('ratelimit');
  lease.limit = Number(a.body.limit ?? 0);
  if (a.status === 400 && a.body.error === 'cost_exceeds_capacity') return { ...lease, reason: 'exceeds_capacity' };
  if (a.status === 409 && a.body.error === 'policy_conflict') { // another definition of the name holds the key
    return { ...lease, reason: 'policy_conflict', retryAfterUs: Number(a.body.retry_after_ms ?? 0) * 1000 };
  }
  if (a.status !== 200 && a.status !== 429) throw thrown(a);
  lease.remaining = Number(a.body.remaining ?? 0);
  if (a.status === 429) return { ...lease, retryAfterUs: Number(a.body.retry_after_ms ?? 0) * 1000 };
  // ratelimitd's own store failed and its failure policy admitted: "lease_id": null, a grant with
  // nothing to release or renew (this client's failed_open). It used to be a protocol error, and
  // so a 500 in the middleware.
  if ('lease_id' in a.body && a.body.lease_id === null) return { ...lease, allowed: true, reason: 'failed_open', expiresMs: Number(a.body.expires_ms ?? 0) };
  if (typeof a.body.lease_id !== 'string') throw new RateLimitError('protocol', `a granted lease without a lease_id: ${JSON.stringify(a.body)}`);
  return { ...lease, allowed: true, reason: 'within_limit', id: a.body.lease_id, expiresMs: Number(a.body.expires_ms) };
}

/** true when the units were given back; false when the lease had lapsed or was released before,
 *  was the failure policy's, or ratelimitd could not be reached (then it lapses at its TTL). */
export async function releaseLease(t: LeaseTransport, lease: Lease, options: ReleaseOptions = {}): Promise<boolean> {
  check(options.outcome === undefined || OUTCOMES.includes(options.outcome), 'invalid_outcome', `outcome must be one of ${OUTCOMES.join(', ')}, got ${options.outcome}`);
  const l = options.latencyMs;
  check(l === undefined || (typeof l === 'number' && Number.isFinite(l) && l >= 0 && l < MAX_LATENCY_MS), 'invalid_latency', `latencyMs must be a number of ms, 0 or more and under ${MAX_LATENCY_MS}, got ${l}`);
  if (!lease.allowed || lease.id === null) return false;
  const body: Record<string, unknown> = {};
  if (options.outcome !== undefined) body.outcome = options.outcome;
  if (l !== undefined) body.latency_ms = l;
  const a = await call(t, 'DELETE', `/v1/leases/${encodeURIComponent(lease.id)}`, Object.keys(body).length > 0 ? body : undefined);
  if (a === null) return false;
  if (a.status === 409 && a.body.error === 'policy_conflict') return false; // the key now holds another definition's state
  if (a.status !== 200) throw thrown(a);
  return a.body.released === true;
}

/** true when the lease now lasts its policy's lease_ttl from now; false when it had lapsed or was
 *  released (acquire a new one). Unreachable: the failure policy ('open': true). */
export async function renewLease(t: LeaseTransport, lease: Lease): Promise<boolean> {
  if (!lease.allowed) return false;
  if (lease.id === null) return true;
  const a = await call(t, 'POST', `/v1/leases/${encodeURIComponent(lease.id)}/renew`);
  if (a === null) return t.onFailure === 'open';
  if ((a.status === 404 && a.body.error === 'lease_not_held') || (a.status === 409 && a.body.error === 'policy_conflict')) return false;
  if (a.status !== 200) throw thrown(a);
  if (typeof a.body.expires_ms === 'number') lease.expiresMs = a.body.expires_ms;
  return a.body.renewed === true;
}
