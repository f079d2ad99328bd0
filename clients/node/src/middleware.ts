// middleware.ts — what the Express and Fastify middleware share: one decision per request
// (key, cost and skip from the caller's functions) and its rendering by headers.ts, so both
// answer exactly what ratelimitd answers. The adapters (express.ts, fastify.ts) only copy the
// answer into their framework's response.
// Failure policy: the limiter's own (onFailure): a store that cannot decide admits or denies;
// a key or cost the request brought that ratelimitd would refuse (RateLimitError invalid_key or
// invalid_cost: empty, too long) answers ratelimitd's 400 {"error", "message"} on either
// back-end (issue 31 defect 6: it was a 500); any other exception from a key/cost function is
// the application's bug and is passed on. A policy_conflict decision (issue 31 defect 8: another
// definition of the policy's name holds the key) is the application's configuration error:
// counted in the limiter's failures, logged, and answered as the limiter failing (its onFailure),
// never as a 429 of its own.
// Usage after the response (docs/usage.md): with `usage`, an admitted request's acquire of
// `cost` is a Reservation (usage.ts) that the adapter reconciles once the response is sent, with
// the units `usage` reads from the request and response (e.g. an LLM answer's token count).
// What users of express-rate-limit expect (issue 31): the header set and problem+json as
// ratelimitd's `headers:` / `problem_json:`, a custom refusal (statusCode, message, handler),
// the decision on the request (req.rateLimit), a default key (the client address through
// trusted proxies only, client_ip.ts) and skipSuccessfulRequests / skipFailedRequests (the
// admitted unit refunded after the response, by the same Reservation).

import { Decision, FailurePolicy, failureDecision, reportConflict } from './decision';
import { RateLimitError } from './errors';
import { TrustedProxies, clientAddress } from './client_ip';
import { HEADER_SETS, HeaderSet, PolicyInfo, RenderedAnswer, renderDecisions } from './headers';
import { RedisLimiter } from './redis';
import { Reservation } from './usage';

/** Either back-end (RedisLimiter, RatelimitdLimiter) or anything that decides alike. */
export interface Limiter {
  acquire(policy: string, key: string, options?: { cost?: number }): Promise<Decision>;
  describe(policy: string): PolicyInfo | undefined;
  /** The limiter's failure policy, which also answers a policy_conflict (default 'open'). */
  readonly onFailure?: FailurePolicy;
  /** Needed only with the `usage` option (both back-ends have it). */
  report?(policy: string, key: string, cost: number): Promise<Decision>;
}

export interface MiddlewareOptions<Req> {
  limiter: Limiter;
  /** The policy's name, or a function choosing it per request. */
  policy: string | ((req: Req) => string);
  /** The key a request counts against (e.g. a user id, an API key). Default: the client's
   *  address, X-Forwarded-For believed only from `trustedProxies` (as ratelimitd does). */
  key?: (req: Req) => string | Promise<string>;
  /** Proxies whose X-Forwarded-For the default key believes: addresses or CIDR blocks
   *  ("10.0.0.0/8", "::1"). Default none: the key is the connecting peer. */
  trustedProxies?: string[];
  /** The rate-limit fields sent, as ratelimitd's `headers:` (default 'ietf'). */
  headers?: HeaderSet;
  /** A 429's body as application/problem+json, as ratelimitd's `problem_json: true`. */
  problemJson?: boolean;
  /** Units the request takes (default 1). */
  cost?: number | ((req: Req) => number);
  /** Requests to let through without a decision or headers (health checks, internal calls). */
  skip?: (req: Req) => boolean;
}

/** The decision as the route handler sees it: req.rateLimit (Express and Fastify). */
export interface RateLimitInfo {
  policy: string;
  key: string;
  cost: number;
  allowed: boolean;
  reason: Decision['reason'];
  limit: number;
  remaining: number;
  /** Until the limit is fully available again, ms (rounded up). */
  resetMs: number;
  /** 0 when allowed, else the wait before the same request would pass, ms (rounded up). */
  retryAfterMs: number;
  decision: Decision;
}

/** The adapters' options: the above, a custom refusal, and what happens after the response. */
export interface UsageOptions<Req, Res> extends MiddlewareOptions<Req> {
  /** Status of a refusal (default 429, ratelimitd's). Headers and Retry-After are kept. */
  statusCode?: number;
  /** Body of a refusal instead of ratelimitd's: a string (text/plain), an object (JSON), or a
   *  function of the request and decision giving either. */
  message?: string | object | ((req: Req, info: RateLimitInfo) => string | object);
  /** Answers a refusal itself (the rate-limit headers already set): e.g. a page, a redirect. */
  handler?: (req: Req, res: Res, info: RateLimitInfo) => void | Promise<void>;
  /** Refund the unit of a request whose response status is below 400 (count only failures). */
  skipSuccessfulRequests?: boolean;
  /** Refund the unit of a request whose response status is 400 or above (count only successes). */
  skipFailedRequests?: boolean;
  /** The units an admitted request used, read once its response is sent (e.g. from a header the
   *  handler set, or res.locals): reported as usage − cost (`cost` is then the estimate taken
   *  before the work; less used is refunded). undefined or null: the estimate stands. */
  usage?: (req: Req, res: Res) => number | undefined | null;
  /** Told when a report after the response fails (bad usage, a refused report); the limiter's
   *  failure policy answers store failures as for any decision. Default: ignored. */
  onReportError?: (err: Error) => void;
}

/** A rendered answer, the decision for req.rateLimit and, for a request the store admitted,
 *  its reservation to reconcile. */
export type DecidedRequest = RenderedAnswer & { reservation?: Reservation; info?: RateLimitInfo };

/** Refuses options that would fail every request (issue 31 defect 7): no limiter, a `key` that
 *  is not a function, no policy, or a policy name the RedisLimiter lacks (ratelimitd's policies
 *  are its own, known from its answers). The adapters call it when they are made. */
export function checkOptions<Req>(opts: MiddlewareOptions<Req>): void {
  const bad = (what: string) => new RateLimitError('invalid_policy', `middleware: ${what}`);
  if (!opts || !opts.limiter) throw bad('`limiter` is required');
  if (opts.key !== undefined && typeof opts.key !== 'function') throw bad('`key` must be a function of the request (or left out: the client address)');
  if (opts.trustedProxies !== undefined) new TrustedProxies(opts.trustedProxies);
  if (opts.headers !== undefined && !HEADER_SETS.includes(opts.headers)) throw bad(`\`headers\` must be one of ${HEADER_SETS.join(', ')}, got '${opts.headers}'`);
  const o = opts as UsageOptions<Req, unknown>;
  if (o.statusCode !== undefined && (!Number.isInteger(o.statusCode) || o.statusCode < 400 || o.statusCode > 599)) throw bad(`\`statusCode\` must be an integer 400-599, got ${o.statusCode}`);
  if (o.handler !== undefined && typeof o.handler !== 'function') throw bad('`handler` must be a function (req, res, info)');
  if ((o.skipSuccessfulRequests || o.skipFailedRequests) && typeof opts.limiter.report !== 'function') {
    throw bad('`skipSuccessfulRequests` / `skipFailedRequests` need a limiter with report() (both back-ends have it)');
  }
  if (typeof opts.policy !== 'function' && (typeof opts.policy !== 'string' || opts.policy === '')) {
    throw new RateLimitError('invalid_policy', 'middleware: `policy` must be a policy name or a function of the request');
  }
  if (typeof opts.policy === 'string' && opts.limiter instanceof RedisLimiter) opts.limiter.policy(opts.policy);
  const u = opts as UsageOptions<Req, unknown>;
  if (u.usage !== undefined && (typeof u.usage !== 'function' || typeof opts.limiter.report !== 'function')) {
    throw new RateLimitError('invalid_policy', 'middleware: `usage` must be a function of the request and response, with a limiter that has report()');
  }
}

/** The codes of input ratelimitd answers 400 for: the request's, not the application's. */
const BAD_REQUEST = new Set(['invalid_key', 'invalid_cost']);

/** The default key function: the client address of (peer, X-Forwarded-For) through
 *  `trustedProxies` (client_ip.ts). The adapters say where their request keeps both. */
export function defaultKey<Req>(opts: MiddlewareOptions<Req>, peerOf: (req: Req) => [string | undefined, string | string[] | undefined]) {
  const trusted = new TrustedProxies(opts.trustedProxies ?? []);
  return (req: Req): string => {
    const [peer, xff] = peerOf(req);
    return clientAddress(peer ?? '', Array.isArray(xff) ? xff.join(', ') : xff, trusted);
  };
}

/** The decision for `req` rendered, or null when skipped. `key` is opts.key or the default. */
export async function decideRequest<Req>(opts: MiddlewareOptions<Req>, req: Req, defaultKeyOf?: (req: Req) => string): Promise<DecidedRequest | null> {
  if (opts.skip?.(req)) return null;
  const policy = typeof opts.policy === 'function' ? opts.policy(req) : opts.policy;
  const keyOf = opts.key ?? defaultKeyOf;
  if (keyOf === undefined) throw new RateLimitError('invalid_policy', 'middleware: no `key` function');
  const key = await keyOf(req);
  const cost = typeof opts.cost === 'function' ? opts.cost(req) : opts.cost ?? 1;
  let decision: Decision;
  try {
    decision = await opts.limiter.acquire(policy, key, { cost });
  } catch (e) {
    if (!(e instanceof RateLimitError) || !BAD_REQUEST.has(e.code)) throw e;
    return { status: 400, headers: [['Cache-Control', 'no-store']], contentType: 'application/json', body: JSON.stringify({ error: e.code, message: e.message }) };
  }
  if (decision.reason === 'policy_conflict') {
    reportConflict(opts.limiter, policy, key, decision.retryAfterUs);
    decision = failureDecision(opts.limiter.onFailure ?? 'open', decision.limit || (opts.limiter.describe(policy)?.quota ?? 0));
  }
  const render = { headers: opts.headers, problemJson: opts.problemJson };
  const rateLimit: RateLimitInfo = {
    policy, key, cost, allowed: decision.allowed, reason: decision.reason, limit: decision.limit, remaining: decision.remaining,
    resetMs: Math.ceil(decision.resetAfterUs / 1000), retryAfterMs: Math.ceil(decision.retryAfterUs / 1000), decision,
  };
  const info = opts.limiter.describe(policy);
  if (info === undefined) {
    // ratelimitd has not answered once since the app started, so nothing says the policy's
    // quota and window: the failure policy still answers (issue 31 defect 1), without the
    // RateLimit-Policy and RateLimit fields it cannot fill in truthfully.
    if (decision.reason !== 'failed_open' && decision.reason !== 'failed_closed') {
      throw new RateLimitError('protocol', `no quota or window known for policy '${policy}'`);
    }
    const answer: DecidedRequest = renderDecisions([decision], [{ name: policy, quota: decision.limit, windowUs: 0 }], render);
    answer.headers = answer.headers.filter(([name]) => name === 'Retry-After' || name === 'Cache-Control');
    answer.info = rateLimit;
    return answer;
  }
  const answer: DecidedRequest = renderDecisions([decision], [{ ...info, quota: decision.limit || info.quota }], render);
  answer.info = rateLimit;
  if (opts.limiter.report !== undefined && decision.allowed) {
    answer.reservation = new Reservation(opts.limiter as Required<Limiter>, policy, key, cost, decision);
  }
  return answer;
}

/** Reconciles `reservation` with what `usage` reads after the response (see UsageOptions);
 *  never throws: a failure goes to onReportError. */
export function reportUsage<Req, Res>(opts: UsageOptions<Req, Res>, reservation: Reservation, req: Req, res: Res): void {
  let actual: number | undefined | null;
  try {
    actual = opts.usage!(req, res);
  } catch (e) {
    opts.onReportError?.(e as Error);
    return;
  }
  if (actual === undefined || actual === null) return;
  reservation.reconcile(actual).catch((e: Error) => opts.onReportError?.(e));
}

/** What a refusal (a 429) sends: ratelimitd's answer, or the status and body the options give.
 *  null when `handler` answers it instead. */
export function refusal<Req, Res>(opts: UsageOptions<Req, Res>, req: Req, answer: DecidedRequest): { status: number; contentType: string; body: string } | null {
  const contentType = answer.contentType ?? 'application/json';
  if (answer.status !== 429 || answer.info === undefined) return { status: answer.status, contentType, body: answer.body };
  if (opts.handler !== undefined) return null;
  const status = opts.statusCode ?? 429;
  if (opts.message === undefined) return { status, contentType, body: answer.body };
  const m = typeof opts.message === 'function' ? opts.message(req, answer.info) : opts.message;
  return typeof m === 'string' ? { status, contentType: 'text/plain; charset=utf-8', body: m } : { status, contentType: 'application/json', body: JSON.stringify(m) };
}

/** After an admitted request's response (status `status`): its unit refunded when the skip
 *  options say this outcome does not count, else its usage reported (`usage`). Never throws. */
export function afterResponse<Req, Res>(opts: UsageOptions<Req, Res>, reservation: Reservation, req: Req, res: Res, status: number): void {
  const failed = status >= 400;
  if ((failed && opts.skipFailedRequests) || (!failed && opts.skipSuccessfulRequests)) {
    reservation.cancel().catch((e: Error) => opts.onReportError?.(e));
    return;
  }
  if (opts.usage !== undefined) reportUsage(opts, reservation, req, res);
}

/** Whether an admitted request needs afterResponse. */
export const needsAfterResponse = <Req, Res>(opts: UsageOptions<Req, Res>) =>
  opts.usage !== undefined || opts.skipSuccessfulRequests === true || opts.skipFailedRequests === true;
