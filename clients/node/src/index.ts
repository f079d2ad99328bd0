// index.ts — the package's public surface.
export { RedisLimiter, RedisLimiterOptions, DecideOptions, ReportOptions, escapeKey } from './redis';
export { RatelimitdLimiter, RatelimitdLimiterOptions } from './ratelimitd';
export { Decision, Reason, FailurePolicy } from './decision';
export { RateLimitError } from './errors';
export { Policy, PolicySpec, Algorithm, RateShorthand, makePolicy, parseDuration, parseRate } from './policy';
export { HeaderSet, PolicyInfo, RenderOptions, RenderedAnswer, renderDecisions } from './headers';
export { TrustedProxies, clientAddress, parseAddress } from './client_ip';
export { Limiter, MiddlewareOptions, RateLimitInfo, UsageOptions, afterResponse, checkOptions, decideRequest, defaultKey, refusal, reportUsage } from './middleware';
export { expressRateLimit } from './express';
export { fastifyRateLimit } from './fastify';
export { FunctionLibrary, findLibrary } from './library';
export { Reporter, Reservation, recordedBy, reserve } from './usage';
export { Lease, LeaseOptions, Outcome, ReleaseOptions } from './leases';
export { ConcurrencyOptions, LeaseLimiter, expressConcurrencyLimit, fastifyConcurrencyLimit } from './concurrency';
