// fastify.ts — a Fastify (4 and 5) onRequest hook: app.addHook('onRequest', fastifyRateLimit({...})).
// Admitted requests go on with RateLimit-Policy and RateLimit set; denied ones are answered here
// with ratelimitd's 429 (or 400 for a cost over the capacity). Errors reach Fastify's handler.
// With `usage`, an admitted request's usage is reported once its response has been sent (the
// raw response's 'finish'): usage(req, reply) − cost.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { UsageOptions, checkOptions, decideRequest, reportUsage } from './middleware';

export function fastifyRateLimit(opts: UsageOptions<FastifyRequest, FastifyReply>) {
  checkOptions(opts);
  return async function rateLimitHook(req: FastifyRequest, reply: FastifyReply): Promise<void> {
    const answer = await decideRequest(opts, req);
    if (answer === null) return;
    for (const [name, value] of answer.headers) reply.header(name, value);
    if (answer.status !== 200) {
      await reply.code(answer.status).type('application/json').send(answer.body);
      return;
    }
    const r = answer.reservation;
    if (opts.usage !== undefined && r !== undefined) reply.raw.on('finish', () => reportUsage(opts, r, req, reply));
  };
}
