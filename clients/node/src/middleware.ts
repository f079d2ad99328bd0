// middleware.ts — what the Express and Fastify middleware share: one decision per request
// (key, cost and skip from the caller's functions) and its rendering by headers.ts, so both
// answer exactly what ratelimitd answers. The adapters (express.ts, fastify.ts) only copy the
// answer into their framework's response.
// Failure policy: the limiter's own (onFailure): a store that cannot decide admits or denies;
// a key or cost the request brought that ratelimitd would refuse (RateLimitError invalid_key or
// invalid_cost: empty, too long) answers ratelimitd's 400 {"error", "message"} on either
// back-end (issue 31 defect 6: it was a 500); any other exception from a key/cost function is
// the application's bug and is passed on.
// Usage after the response (docs/usage.md): with `usage`, an admitted request's acquire of
// `cost` is a Reservation (usage.ts) that the adapter reconciles once the response is sent, with
// the units `usage` reads from the request and response (e.g. an LLM answer's token count).

import { Decision } from './decision';
import { RateLimitError } from './errors';
import { PolicyInfo, RenderedAnswer, renderDecisions } from './headers';
import { RedisLimiter } from './redis';
import { Reservation } from './usage';

/** Either back-end (RedisLimiter, RatelimitdLimiter) or anything that decides alike. */
export interface Limiter {
  acquire(policy: string, key: string, options?: { cost?: number }): Promise<Decision>;
  describe(policy: string): PolicyInfo | undefined;
  /** Needed only with the `usage` option (both back-ends have it). */
  report?(policy: string, key: string, cost: number): Promise<Decision>;
}

export interface MiddlewareOptions<Req> {
  limiter: Limiter;
  /** The policy's name, or a function choosing it per request. */
  policy: string | ((req: Req) => string);
  /** The key a request counts against (e.g. the client's address, a user id, an API key). */
  key: (req: Req) => string | Promise<string>;
  /** Units the request takes (default 1). */
  cost?: number | ((req: Req) => number);
  /** Requests to let through without a decision or headers (health checks, internal calls). */
  skip?: (req: Req) => boolean;
}

/** The Express middleware's options: the above, and usage known after the response. */
export interface UsageOptions<Req, Res> extends MiddlewareOptions<Req> {
  /** The units an admitted request used, read once its response is sent (e.g. from a header the
   *  handler set, or res.locals): reported as usage − cost (`cost` is then the estimate taken
   *  before the work; less used is refunded). undefined or null: the estimate stands. */
  usage?: (req: Req, res: Res) => number | undefined | null;
  /** Told when a report after the response fails (bad usage, a refused report); the limiter's
   *  failure policy answers store failures as for any decision. Default: ignored. */
  onReportError?: (err: Error) => void;
}

/** A rendered answer and, for a request the store admitted, its reservation to reconcile. */
export type DecidedRequest = RenderedAnswer & { reservation?: Reservation };

/** Refuses options that would fail every request (issue 31 defect 7): no limiter, a `key` that
 *  is not a function, no policy, or a policy name the RedisLimiter lacks (ratelimitd's policies
 *  are its own, known from its answers). The adapters call it when they are made. */
export function checkOptions<Req>(opts: MiddlewareOptions<Req>): void {
  if (!opts || !opts.limiter) throw new RateLimitError('invalid_policy', 'middleware: `limiter` is required');
  if (typeof opts.key !== 'function') throw new RateLimitError('invalid_policy', 'middleware: `key` must be a function of the request');
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

/** The decision for `req` rendered, or null when skipped. */
export async function decideRequest<Req>(opts: MiddlewareOptions<Req>, req: Req): Promise<DecidedRequest | null> {
  if (opts.skip?.(req)) return null;
  const policy = typeof opts.policy === 'function' ? opts.policy(req) : opts.policy;
  const key = await opts.key(req);
  const cost = typeof opts.cost === 'function' ? opts.cost(req) : opts.cost ?? 1;
  let decision: Decision;
  try {
    decision = await opts.limiter.acquire(policy, key, { cost });
  } catch (e) {
    if (!(e instanceof RateLimitError) || !BAD_REQUEST.has(e.code)) throw e;
    return { status: 400, headers: [['Cache-Control', 'no-store']], body: JSON.stringify({ error: e.code, message: e.message }) };
  }
  const info = opts.limiter.describe(policy);
  if (info === undefined) {
    // ratelimitd has not answered once since the app started, so nothing says the policy's
    // quota and window: the failure policy still answers (issue 31 defect 1), without the
    // RateLimit-Policy and RateLimit fields it cannot fill in truthfully.
    if (decision.reason !== 'failed_open' && decision.reason !== 'failed_closed') {
      throw new RateLimitError('protocol', `no quota or window known for policy '${policy}'`);
    }
    const answer = renderDecisions([decision], [{ name: policy, quota: decision.limit, windowUs: 0 }]);
    answer.headers = answer.headers.filter(([name]) => name !== 'RateLimit-Policy' && name !== 'RateLimit');
    return answer;
  }
  const answer: DecidedRequest = renderDecisions([decision], [{ ...info, quota: decision.limit || info.quota }]);
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
