// index.ts — the package's public surface.
export { RedisLimiter, RedisLimiterOptions, DecideOptions, ReportOptions, escapeKey } from './redis';
export { RatelimitdLimiter, RatelimitdLimiterOptions } from './ratelimitd';
export { Decision, Reason, FailurePolicy } from './decision';
export { RateLimitError } from './errors';
export { Policy, PolicySpec, Algorithm, makePolicy, parseDuration } from './policy';
export { PolicyInfo, RenderedAnswer, renderDecisions } from './headers';
export { Limiter, MiddlewareOptions, UsageOptions, checkOptions, decideRequest, reportUsage } from './middleware';
export { expressRateLimit } from './express';
export { fastifyRateLimit } from './fastify';
export { FunctionLibrary, findLibrary } from './library';
export { Reporter, Reservation, recordedBy, reserve } from './usage';
export { Lease, LeaseOptions, Outcome, ReleaseOptions } from './leases';
export { ConcurrencyOptions, LeaseLimiter, expressConcurrencyLimit, fastifyConcurrencyLimit } from './concurrency';
