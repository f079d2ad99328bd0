// express.ts — Express (4 and 5) middleware: app.use(expressRateLimit({...})), or per route:
// app.get('/search', expressRateLimit({...}), handler). Admitted requests go on with the rate-limit
// fields set and the decision in req.rateLimit; denied ones end here with ratelimitd's 429 (or
// 400 for a cost over the capacity), or the refusal the options give. Errors go to next(err).
// Once an admitted request's response has been sent (res 'finish'), afterResponse refunds its
// unit (skipSuccessfulRequests / skipFailedRequests) or reports its usage (usage − cost).
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { RateLimitInfo, UsageOptions, afterResponse, checkOptions, decideRequest, defaultKey, needsAfterResponse, refusal } from './middleware';

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace Express {
    interface Request {
      /** The rate-limit decision for this request (set by expressRateLimit). */
      rateLimit?: RateLimitInfo;
    }
  }
}

export function expressRateLimit(opts: UsageOptions<Request, Response>): RequestHandler {
  checkOptions(opts);
  const keyOf = defaultKey<Request>(opts, (req) => [req.socket.remoteAddress, req.headers['x-forwarded-for']]);
  const after = needsAfterResponse(opts);
  return (req: Request, res: Response, next: NextFunction) => {
    decideRequest(opts, req, keyOf).then(async (answer) => {
      if (answer === null) return next();
      if (answer.info !== undefined) req.rateLimit = answer.info;
      for (const [name, value] of answer.headers) res.setHeader(name, value);
      if (answer.status === 200) {
        const r = answer.reservation;
        if (after && r !== undefined) res.on('finish', () => afterResponse(opts, r, req, res, res.statusCode));
        return next();
      }
      const out = refusal(opts, req, answer);
      if (out === null) return await opts.handler!(req, res, answer.info!);
      res.status(out.status).type(out.contentType).send(out.body);
    }).catch(next);
  };
}
