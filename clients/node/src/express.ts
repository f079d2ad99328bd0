// express.ts — Express (4 and 5) middleware: app.use(expressRateLimit({...})). Admitted requests
// go on with RateLimit-Policy and RateLimit set; denied ones end here with ratelimitd's 429 (or
// 400 for a cost over the capacity). Errors go to next(err). With `usage`, an admitted
// request's usage is reported once its response has been sent (res 'finish'): usage − cost.
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { UsageOptions, checkOptions, decideRequest, reportUsage } from './middleware';

export function expressRateLimit(opts: UsageOptions<Request, Response>): RequestHandler {
  checkOptions(opts);
  return (req: Request, res: Response, next: NextFunction) => {
    decideRequest(opts, req).then((answer) => {
      if (answer === null) return next();
      for (const [name, value] of answer.headers) res.setHeader(name, value);
      if (answer.status === 200) {
        const r = answer.reservation;
        if (opts.usage !== undefined && r !== undefined) res.on('finish', () => reportUsage(opts, r, req, res));
        return next();
      }
      res.status(answer.status).type('application/json').send(answer.body);
    }, next);
  };
}
