// fastify.ts — a Fastify (4 and 5) onRequest hook: app.addHook('onRequest', fastifyRateLimit({...})).
// Admitted requests go on with RateLimit-Policy and RateLimit set; denied ones are answered here
// with ratelimitd's 429 (or 400 for a cost over the capacity). Errors reach Fastify's handler.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { MiddlewareOptions, checkOptions, decideRequest } from './middleware';

export function fastifyRateLimit(opts: MiddlewareOptions<FastifyRequest>) {
  checkOptions(opts);
  return async function rateLimitHook(req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const answer = await decideRequest(opts, req);
    if (answer === null) return;
    for (const [name, value] of answer.headers) reply.header(name, value);
    if (answer.status !== 200) {
      await reply.code(answer.status).type('application/json').send(answer.body);
    }
  };
}
