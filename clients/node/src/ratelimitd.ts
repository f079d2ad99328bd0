// ratelimitd.ts — the ratelimitd back-end: decisions by POST /v1/acquire and /v1/peek of a
// running ratelimitd (its policies, its store), answered as the same Decision the Redis back-end
// gives, so the middleware renders the same headers either way.
//
// What comes back: the JSON body (ms figures, rounded up by ratelimitd: converted back to µs,
// they render to the same whole seconds) and RateLimit-Policy, from which the policy's quota and
// window are learned (ratelimitd's default `headers: ietf`; with another header set give
// `windows`). 400 unknown_policy / invalid input throws RateLimitError; 400
// cost_exceeds_capacity is a Decision (reason exceeds_capacity); no answer within `timeoutMs`,
// a refused connection or a 5xx decide by `onFailure`, counted in `failures`. report() is POST
// /v1/report (usage known after the fact, docs/usage.md): always 200 with the key's state.

import { Decision, FailurePolicy, failureDecision } from './decision';
import { RateLimitError } from './errors';
import { Reservation, reserve } from './usage';
import { PolicyInfo } from './headers';
import { parseDuration } from './policy';
import { Lease, LeaseOptions, LeaseTransport, ReleaseOptions, acquireLease, releaseLease, renewLease } from './leases';

export interface RatelimitdLimiterOptions {
  /** e.g. "http://127.0.0.1:8080". */
  url: string;
  onFailure?: FailurePolicy;
  /** Bound on one call, ms (default 250). */
  timeoutMs?: number;
  /** Windows by policy name, only if ratelimitd does not send RateLimit-Policy. */
  windows?: Record<string, string | number>;
  /** Sent as Authorization: Bearer for /v1/reset (ratelimitd's admin token). */
  adminToken?: string;
  onError?: (err: Error) => void;
}

const POLICY_ITEM = /"((?:[^"\\]|\\.)*)";q=(\d+);w=(\d+)/g;

export class RatelimitdLimiter {
  failures = 0;
  private readonly base: string;
  /** What a decision answers when ratelimitd cannot ('open' admits, 'closed' denies). */
  readonly onFailure: FailurePolicy;
  private readonly timeoutMs: number;
  private readonly infos = new Map<string, PolicyInfo>();

  constructor(private readonly options: RatelimitdLimiterOptions) {
    this.base = options.url.replace(/\/+$/, '');
    if (!/^https?:\/\//.test(this.base)) throw new RateLimitError('invalid_policy', `url must be http:// or https://, got '${options.url}'`);
    this.onFailure = options.onFailure ?? 'open';
    this.timeoutMs = options.timeoutMs ?? 250;
    for (const [name, w] of Object.entries(options.windows ?? {})) this.infos.set(name, { name, quota: 0, windowUs: parseDuration(w) });
  }

  acquire(policy: string, key: string, options: { cost?: number } = {}): Promise<Decision> {
    return this.decide('/v1/acquire', policy, key, options.cost ?? 1);
  }

  peek(policy: string, key: string, options: { cost?: number } = {}): Promise<Decision> {
    return this.decide('/v1/peek', policy, key, options.cost ?? 1);
  }

  /** Records usage known after the fact (POST /v1/report): `cost` units even past the limit, or,
   *  negative, a refund; ratelimitd checks the range (limits.max_cost) and the policy's kind. */
  report(policy: string, key: string, cost: number): Promise<Decision> {
    return this.decide('/v1/report', policy, key, cost);
  }

  /** As RedisLimiter.reserve: acquire `estimate` now, reconcile with the actual usage after. */
  reserve(policy: string, key: string, estimate: number): Promise<Reservation> {
    return reserve(this, policy, key, estimate);
  }

  async reset(policy: string, key: string): Promise<void> {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (this.options.adminToken) headers.authorization = `Bearer ${this.options.adminToken}`;
    const res = await fetch(`${this.base}/v1/reset`, { method: 'POST', headers, body: JSON.stringify({ key, policy }), signal: AbortSignal.timeout(this.timeoutMs) });
    const body = await res.text();
    if (res.status !== 200) throw errorOf(res.status, body);
  }

  /** A lease of a concurrency policy (leases.ts): granted, refused, or the failure policy's. */
  acquireLease(policy: string, key: string, options: LeaseOptions = {}): Promise<Lease> {
    return acquireLease(this.leaseTransport(), policy, key, options);
  }

  /** Gives a lease back with the work's outcome; never throws for an unreachable ratelimitd. */
  releaseLease(lease: Lease, options: ReleaseOptions = {}): Promise<boolean> {
    return releaseLease(this.leaseTransport(), lease, options);
  }

  renewLease(lease: Lease): Promise<boolean> {
    return renewLease(this.leaseTransport(), lease);
  }

  private leaseTransport(): LeaseTransport {
    return {
      base: this.base, timeoutMs: this.timeoutMs, onFailure: this.onFailure,
      failed: (e) => { this.failures++; this.options.onError?.(e); },
    };
  }

  /** The quota and window of `policy`, known once ratelimitd has answered for it. */
  describe(policy: string): PolicyInfo | undefined {
    return this.infos.get(policy);
  }

  // Input is checked by ratelimitd (its limits.max_key_length and max_cost may differ from the
  // library's); only what cannot be sent as JSON is refused here.
  private async decide(path: string, policy: string, key: string, cost: number): Promise<Decision> {
    if (typeof key !== 'string' || key.length === 0) throw new RateLimitError('invalid_key', 'key must be a non-empty string');
    if (!Number.isSafeInteger(cost)) throw new RateLimitError('invalid_cost', `cost must be an integer, got ${cost}`);
    let res: Response;
    let text: string;
    try {
      res = await fetch(this.base + path, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ key, policy, cost }), signal: AbortSignal.timeout(this.timeoutMs),
      });
      text = await res.text();
      if (res.status >= 500) throw new RateLimitError('unavailable', `ratelimitd answered ${res.status}: ${text}`);
    } catch (e) {
      this.failures++;
      this.options.onError?.(e as Error);
      return failureDecision(this.onFailure, this.infos.get(policy)?.quota ?? 0);
    }
    const body = parseJson(text);
    this.learn(res.headers.get('ratelimit-policy'));
    if (res.status === 400 && body.error === 'cost_exceeds_capacity') {
      return { allowed: false, reason: 'exceeds_capacity', limit: Number(body.limit), remaining: 0, resetAfterUs: 0, retryAfterUs: 0, delayUs: 0 };
    }
    if (res.status === 409 && body.error === 'policy_conflict') { // another definition of the name holds the key
      const waitUs = Number(body.retry_after_ms ?? 0) * 1000;
      return { allowed: false, reason: 'policy_conflict', limit: 0, remaining: 0, resetAfterUs: waitUs, retryAfterUs: waitUs, delayUs: 0 };
    }
    if (res.status !== 200 && res.status !== 429) throw errorOf(res.status, text);
    const allowed = body.allowed === true;
    const info = this.infos.get(policy);
    if (info !== undefined && info.quota === 0) info.quota = Number(body.limit);
    return {
      allowed, reason: allowed ? 'within_limit' : 'over_limit', limit: Number(body.limit), remaining: Number(body.remaining),
      resetAfterUs: Number(body.reset_ms) * 1000, retryAfterUs: Number(body.retry_after_ms) * 1000, delayUs: Number(body.delay_ms) * 1000,
    };
  }

  private learn(field: string | null): void {
    if (field === null) return;
    for (const m of field.matchAll(POLICY_ITEM)) {
      const name = m[1].replace(/\\(.)/g, '$1');
      if (!this.infos.has(name) || this.infos.get(name)!.quota === 0) this.infos.set(name, { name, quota: Number(m[2]), windowUs: Number(m[3]) * 1_000_000 });
    }
  }
}

function parseJson(text: string): Record<string, unknown> {
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch {
    throw new RateLimitError('protocol', `ratelimitd answered something that is not JSON: ${text.slice(0, 200)}`);
  }
}

function errorOf(status: number, text: string): RateLimitError {
  let body: Record<string, unknown> = {};
  try { body = JSON.parse(text) as Record<string, unknown>; } catch { /* keep the text */ }
  // ratelimitd's error names are this package's codes where they mean the same.
  const known = ['unknown_policy', 'invalid_key', 'invalid_cost'];
  const code = typeof body.error !== 'string' ? 'protocol' : known.includes(body.error) ? body.error : 'invalid_request';
  return new RateLimitError(code, `ratelimitd answered ${status}: ${typeof body.message === 'string' ? body.message : text.slice(0, 200)}`);
}
