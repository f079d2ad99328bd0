// fastify.ts — a Fastify (4 and 5) onRequest hook: app.addHook('onRequest', fastifyRateLimit({...}))
// for the whole app, or a route's own: app.get('/search', { onRequest: fastifyRateLimit({...}) }, h).
// Admitted requests go on with the rate-limit fields set and the decision in req.rateLimit;
// denied ones are answered here with ratelimitd's 429 (or 400 for a cost over the capacity), or
// the refusal the options give. Errors reach Fastify's handler. Once an admitted request's
// response has been sent (the raw response's 'finish'), afterResponse refunds its unit
// (skipSuccessfulRequests / skipFailedRequests) or reports its usage (usage(req, reply) − cost).
import type { FastifyReply, FastifyRequest } from 'fastify';
import { RateLimitInfo, UsageOptions, afterResponse, checkOptions, decideRequest, defaultKey, needsAfterResponse, refusal } from './middleware';

declare module 'fastify' {
  interface FastifyRequest {
    /** The rate-limit decision for this request (set by fastifyRateLimit). */
    rateLimit?: RateLimitInfo;
  }
}

export function fastifyRateLimit(opts: UsageOptions<FastifyRequest, FastifyReply>) {
  checkOptions(opts);
  const keyOf = defaultKey<FastifyRequest>(opts, (req) => [req.raw.socket.remoteAddress, req.headers['x-forwarded-for']]);
  const after = needsAfterResponse(opts);
  return async function rateLimitHook(req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const answer = await decideRequest(opts, req, keyOf);
    if (answer === null) return;
    if (answer.info !== undefined) req.rateLimit = answer.info;
    for (const [name, value] of answer.headers) reply.header(name, value);
    if (answer.status !== 200) {
      const out = refusal(opts, req, answer);
      if (out === null) {
        await opts.handler!(req, reply, answer.info!);
        return;
      }
      await reply.code(out.status).type(out.contentType).send(out.body);
      return;
    }
    const r = answer.reservation;
    if (after && r !== undefined) reply.raw.on('finish', () => afterResponse(opts, r, req, reply, reply.statusCode));
  };
}
