// concurrency.ts — concurrency middleware for Express and Fastify: each request holds a lease of
// a ratelimitd concurrency policy (leases.ts) while its handler runs, as Netflix's
// concurrency-limits servlet filter does. Acquired before the handler: refused → ratelimitd's
// 429 (Retry-After, its RateLimit fields, the body rendered by headers.ts as the rate middleware
// renders a denial); the failure policy answers as on the rate path (failed_open runs the handler
// without a lease), and answers a policy_conflict too (counted in the limiter's failures and
// logged: the app's configuration error).
// Released once, when the response's socket side is done ('close', which Node
// emits after 'finish' too, and alone when the client went away):
//   - the handler took longer than `timeoutMs` → outcome 'timeout' (the handler is not cut off:
//     Node cannot stop it; a response that finishes late is counted as a timeout);
//   - status ≥ 500 (Express and Fastify answer a thrown error or rejected handler with 500)
//     → 'dropped'; else 'ok'; each with the measured latency from grant to response end;
//   - the client disconnected before the response was complete → released without an outcome
//     (ratelimitd takes grant-to-release as the round trip; a cancel says nothing about load).
// A priority class is read from `priorityHeader` when configured and sent as `priority`.

import type { ServerResponse } from 'http';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Decision, FAILED_CLOSED_RETRY_AFTER_US, FailurePolicy, reportConflict } from './decision';
import { RateLimitError } from './errors';
import { RenderedAnswer, renderDecisions } from './headers';
import { Lease, LeaseOptions, ReleaseOptions } from './leases';

/** RatelimitdLimiter, or anything that leases alike. */
export interface LeaseLimiter {
  acquireLease(policy: string, key: string, options?: LeaseOptions): Promise<Lease>;
  releaseLease(lease: Lease, options?: ReleaseOptions): Promise<boolean>;
  /** The limiter's failure policy, which also answers a policy_conflict (default 'open'). */
  readonly onFailure?: FailurePolicy;
}

export interface ConcurrencyOptions<Req> {
  limiter: LeaseLimiter;
  /** The concurrency policy's name, or a function choosing it per request. */
  policy: string | ((req: Req) => string);
  key: (req: Req) => string | Promise<string>;
  cost?: number | ((req: Req) => number);
  skip?: (req: Req) => boolean;
  /** A request header naming the priority class (e.g. 'x-priority'); absent: none sent. */
  priorityHeader?: string;
  /** Wait up to this long for room (a policy with max_wait) instead of a 429. */
  maxWaitMs?: number;
  /** A response slower than this (ms) is released with outcome 'timeout'. */
  timeoutMs?: number;
  /** Told when a release is refused (a bug: releases of unreachable ratelimitd never throw). */
  onReleaseError?: (err: Error) => void;
}

const BAD_REQUEST = new Set(['invalid_key', 'invalid_cost']);
const MAX_LATENCY_MS = 3_600_000;

export function checkConcurrencyOptions<Req>(opts: ConcurrencyOptions<Req>): void {
  if (!opts || !opts.limiter || typeof opts.limiter.acquireLease !== 'function') {
    throw new RateLimitError('invalid_policy', 'concurrency middleware: `limiter` must have acquireLease (a RatelimitdLimiter)');
  }
  if (typeof opts.key !== 'function') throw new RateLimitError('invalid_policy', 'concurrency middleware: `key` must be a function of the request');
  if (typeof opts.policy !== 'function' && (typeof opts.policy !== 'string' || opts.policy === '')) {
    throw new RateLimitError('invalid_policy', 'concurrency middleware: `policy` must be a policy name or a function of the request');
  }
  if (opts.timeoutMs !== undefined && !(opts.timeoutMs > 0)) throw new RateLimitError('invalid_policy', 'concurrency middleware: `timeoutMs` must be above 0');
}

/** A refused lease as the rate middleware renders a denial, with ratelimitd's own fields. */
export function renderRefusal(lease: Lease): RenderedAnswer {
  const d: Decision = { allowed: false, reason: lease.reason, limit: lease.limit, remaining: lease.remaining, resetAfterUs: lease.retryAfterUs, retryAfterUs: lease.retryAfterUs, delayUs: 0 };
  const answer = renderDecisions([d], [{ name: lease.policy, quota: lease.limit, windowUs: 0 }]);
  answer.headers = answer.headers.filter(([name]) => name !== 'RateLimit-Policy' && name !== 'RateLimit');
  if (lease.rateLimit !== null && answer.status === 429) answer.headers.unshift(['RateLimit', lease.rateLimit]);
  if (lease.rateLimitPolicy !== null) answer.headers.unshift(['RateLimit-Policy', lease.rateLimitPolicy]);
  return answer;
}

type Taken = { lease: Lease; headers: [string, string][] } | { answer: RenderedAnswer } | null;

async function take<Req>(opts: ConcurrencyOptions<Req>, req: Req, headers: Record<string, string | string[] | undefined>): Promise<Taken> {
  if (opts.skip?.(req)) return null;
  const policy = typeof opts.policy === 'function' ? opts.policy(req) : opts.policy;
  const key = await opts.key(req);
  const cost = typeof opts.cost === 'function' ? opts.cost(req) : opts.cost ?? 1;
  const options: LeaseOptions = { cost, maxWaitMs: opts.maxWaitMs };
  const p = opts.priorityHeader === undefined ? undefined : headers[opts.priorityHeader.toLowerCase()];
  if (typeof p === 'string' && p !== '') options.priority = p;
  let lease: Lease;
  try {
    lease = await opts.limiter.acquireLease(policy, key, options);
  } catch (e) {
    if (!(e instanceof RateLimitError) || !BAD_REQUEST.has(e.code)) throw e;
    return { answer: { status: 400, headers: [['Cache-Control', 'no-store']], body: JSON.stringify({ error: e.code, message: e.message }) } };
  }
  if (lease.reason === 'policy_conflict') {
    // The app's configuration error, not the caller's: logged and answered as ratelimitd failing.
    reportConflict(opts.limiter, policy, key, lease.retryAfterUs);
    lease = (opts.limiter.onFailure ?? 'open') === 'open'
      ? { ...lease, allowed: true, reason: 'failed_open', id: null, retryAfterUs: 0 }
      : { ...lease, reason: 'failed_closed', retryAfterUs: FAILED_CLOSED_RETRY_AFTER_US };
  }
  if (!lease.allowed) return { answer: renderRefusal(lease) };
  const h: [string, string][] = [];
  if (lease.rateLimitPolicy !== null) h.push(['RateLimit-Policy', lease.rateLimitPolicy]);
  if (lease.rateLimit !== null) h.push(['RateLimit', lease.rateLimit]);
  return { lease, headers: h };
}

/** Releases `lease` once `res` is done, with the outcome described above. */
export function holdLease<Req>(opts: ConcurrencyOptions<Req>, lease: Lease, res: ServerResponse): void {
  const start = performance.now();
  const release = () => {
    const ms = performance.now() - start;
    const latencyMs = ms < MAX_LATENCY_MS ? ms : undefined;
    let r: ReleaseOptions = {};
    if (!res.writableFinished) r = {};
    else if (opts.timeoutMs !== undefined && ms > opts.timeoutMs) r = { outcome: 'timeout', latencyMs };
    else if (res.statusCode >= 500) r = { outcome: 'dropped', latencyMs };
    else r = { outcome: 'ok', latencyMs };
    opts.limiter.releaseLease(lease, r).catch((e: Error) => opts.onReleaseError?.(e));
  };
  if (res.closed) release();
  else res.once('close', release);
}

export function expressConcurrencyLimit(opts: ConcurrencyOptions<Request>): RequestHandler {
  checkConcurrencyOptions(opts);
  return (req: Request, res: Response, next: NextFunction) => {
    take(opts, req, req.headers).then((t) => {
      if (t === null) return next();
      if ('answer' in t) {
        for (const [name, value] of t.answer.headers) res.setHeader(name, value);
        res.status(t.answer.status).type('application/json').send(t.answer.body);
        return;
      }
      for (const [name, value] of t.headers) res.setHeader(name, value);
      holdLease(opts, t.lease, res);
      if (!res.closed) next();
    }, next);
  };
}

/** An onRequest hook: app.addHook('onRequest', fastifyConcurrencyLimit({...})). */
export function fastifyConcurrencyLimit(opts: ConcurrencyOptions<FastifyRequest>) {
  checkConcurrencyOptions(opts);
  return async function concurrencyHook(req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const t = await take(opts, req, req.headers);
    if (t === null) return;
    if ('answer' in t) {
      for (const [name, value] of t.answer.headers) reply.header(name, value);
      await reply.code(t.answer.status).type('application/json').send(t.answer.body);
      return;
    }
    for (const [name, value] of t.headers) reply.header(name, value);
    holdLease(opts, t.lease, reply.raw);
  };
}
