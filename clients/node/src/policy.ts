// policy.ts — what a limit is, validated once, and the five policy arguments the Redis function
// library takes (docs/redis-functions.md, "Policy arguments").
//
// Why here: the Redis back-end sends a policy's parameters with every call, so they must be the
// very numbers ratelimitd would send for the same policy (src/core/policy.cc): the same ranges,
// the same bucket window (time_to_drain_us of a full bucket, in integer µs) and a rate that
// parses back to the same double. The ratelimitd back-end needs only the name.
// Invariants: every Policy value passed validation; `args` is computed once, never mutated.

import { RateLimitError } from './errors';
// The bounds of include/ratelimit/policy.h, generated into this package (policy_bounds.json;
// tests/redis/policy_bounds_test.cc fails when it drifts), never copied by hand.
import BOUNDS from './policy_bounds.json';

export type Algorithm =
  | 'fixed_window' | 'sliding_window_log' | 'sliding_window_counter' | 'token_bucket' | 'leaky_bucket';

export const ALGORITHMS: readonly Algorithm[] = [
  'fixed_window', 'sliding_window_log', 'sliding_window_counter', 'token_bucket', 'leaky_bucket',
];

/** A policy as configured: window algorithms take limit + window, buckets rate + burst. */
export type PolicySpec =
  | { algorithm: 'fixed_window' | 'sliding_window_log' | 'sliding_window_counter';
      limit: number; window: string | number; countDenied?: boolean; everyHit?: boolean }
  | { algorithm: 'token_bucket' | 'leaky_bucket'; rate: number; burst: number;
      mode?: 'police' | 'shape'; countDenied?: boolean };

/** A policy as its shorthand: "10/minute" (also second, hour, day) or "10/30s" (a count per a
 *  whole number of s, m, h or d), a sliding_window_counter policy (see parseRate). */
export type RateShorthand = string;

export const MAX_LIMIT: number = BOUNDS.max_limit;
export const MAX_EVERY_HIT_LIMIT: number = BOUNDS.max_every_hit_limit;
export const MAX_COST: number = BOUNDS.max_cost;
export const MAX_SLIDING_LOG_LIMIT: number = BOUNDS.max_sliding_log_limit;
export const MAX_KEY_BYTES: number = BOUNDS.max_key_bytes;
const MIN_WINDOW_US: number = BOUNDS.min_window_us;
const MAX_WINDOW_US: number = BOUNDS.max_window_us;
const MIN_RATE: number = BOUNDS.min_rate;
const MAX_RATE: number = BOUNDS.max_rate;
const UNIT: number = BOUNDS.unit;
const TWO_POW_53: number = BOUNDS.exact_integer_limit;
const NAME_RE = new RegExp(BOUNDS.policy_name_pattern);

/** A validated policy: its name, capacity, window (µs) and the library's arguments. */
export interface Policy {
  readonly name: string;
  readonly algorithm: Algorithm;
  /** Capacity in units: the limit, or the burst of a bucket (the q of RateLimit-Policy). */
  readonly limit: number;
  /** The window, or for a bucket the time to drain a full one (the w of RateLimit-Policy). */
  readonly windowUs: number;
  readonly everyHit: boolean;
  /** algorithm index, limit, window_us, rate, shape, counting — as the library reads them. */
  readonly args: readonly [string, string, string, string, string, string];
}

/** "500ms", "1s", "60s", "1m", "1h", "2d", "250us" (as ratelimitd's config), or µs as a number. */
export function parseDuration(text: string | number): number {
  if (typeof text === 'number') {
    if (!Number.isSafeInteger(text) || text <= 0) {
      throw new RateLimitError('invalid_policy', `window must be a positive integer of µs, got ${text}`);
    }
    return text;
  }
  const m = /^([0-9]+)(us|ms|s|m|h|d)$/.exec(text);
  if (!m) throw new RateLimitError('invalid_policy', `bad duration '${text}' (expected e.g. 500ms, 1s, 60s, 1m, 1h, 2d)`);
  const scale: Record<string, number> = { us: 1, ms: 1e3, s: 1e6, m: 60e6, h: 3600e6, d: 86400e6 };
  const us = Number(m[1]) * scale[m[2]];
  if (!Number.isSafeInteger(us) || us <= 0) throw new RateLimitError('invalid_policy', `bad duration '${text}'`);
  return us;
}

// units.h drained_u and time_to_drain_us, in the same double arithmetic.
function drainedU(elapsedUs: number, rate: number): number {
  return Math.trunc(elapsedUs * rate);
}
function timeToDrainUs(needU: number, rate: number): number {
  if (needU <= 0) return 0;
  let t = Math.ceil(needU / rate);
  while (t > 0 && drainedU(t - 1, rate) >= needU) t--;
  while (drainedU(t, rate) < needU) t++;
  return t;
}

function checkLimit(what: string, v: number, max = MAX_LIMIT, min = 1): void {
  if (!Number.isSafeInteger(v) || v < min || v > max) {
    throw new RateLimitError('invalid_policy', `${what} must be an integer between ${min} and ${max}, got ${v}`);
  }
}

function checkWindow(us: number): void {
  if (us < MIN_WINDOW_US || us > MAX_WINDOW_US) {
    throw new RateLimitError('invalid_policy', `window must be between 1ms and 366d, got ${us}us`);
  }
}

const RATE_RE = /^([1-9][0-9]{0,15})\/(?:(second|minute|hour|day)|([1-9][0-9]{0,8})(s|m|h|d))$/;
const RATE_UNIT_S: Record<string, number> = { second: 1, minute: 60, hour: 3600, day: 86400, s: 1, m: 60, h: 3600, d: 86400 };

/** "10/minute" → a sliding_window_counter of limit 10 over 60 s (the window algorithm whose
 *  memory does not grow with the limit, and whose boundary burst is bounded, unlike a fixed
 *  window's). Strict: no spaces, no plural, no "per"; anything else throws RateLimitError
 *  invalid_policy naming the accepted forms, so a typo fails when the limiter is made. */
export function parseRate(text: RateShorthand): PolicySpec {
  const m = typeof text === 'string' ? RATE_RE.exec(text) : null;
  if (!m) {
    throw new RateLimitError('invalid_policy', `bad rate ${JSON.stringify(text)}: expected "<count>/<second|minute|hour|day>" or "<count>/<n><s|m|h|d>", e.g. "10/minute" or "100/30s"`);
  }
  const seconds = m[2] !== undefined ? RATE_UNIT_S[m[2]] : Number(m[3]) * RATE_UNIT_S[m[4]];
  return { algorithm: 'sliding_window_counter', limit: Number(m[1]), window: `${seconds}s` };
}

/** Validates `spec` as ratelimitd validates a policy of its config file; throws RateLimitError.
 *  A string is the "10/minute" shorthand (parseRate). */
export function makePolicy(name: string, given: PolicySpec | RateShorthand): Policy {
  const spec = typeof given === 'string' ? parseRate(given) : given;
  if (typeof name !== 'string' || !NAME_RE.test(name)) {
    throw new RateLimitError('invalid_policy', `policy name must be 1-64 characters of [A-Za-z0-9_.:-], got '${name}'`);
  }
  if (spec === null || typeof spec !== 'object') throw new RateLimitError('invalid_policy', `policy '${name}': not an object`);
  const index = ALGORITHMS.indexOf(spec.algorithm);
  if (index < 0) {
    throw new RateLimitError('invalid_policy', `policy '${name}': unknown algorithm '${(spec as { algorithm: string }).algorithm}' (expected ${ALGORITHMS.join(', ')})`);
  }
  const counting = (everyHit: boolean) => (everyHit ? '2' : spec.countDenied ? '1' : '0');
  if (spec.algorithm === 'token_bucket' || spec.algorithm === 'leaky_bucket') {
    checkLimit('burst', spec.burst);
    const rate = spec.rate;
    if (typeof rate !== 'number' || !Number.isFinite(rate) || rate < MIN_RATE || rate > MAX_RATE) {
      throw new RateLimitError('invalid_policy', `policy '${name}': rate must be a finite number of units per second between 1e-06 and 1e9, got ${rate}`);
    }
    if ((2 * spec.burst * UNIT) / rate > TWO_POW_53) {
      throw new RateLimitError('invalid_policy', `policy '${name}': burst / rate is too long (over 140 years to refill)`);
    }
    const mode = spec.algorithm === 'leaky_bucket' ? spec.mode ?? 'police' : 'police';
    if (mode !== 'police' && mode !== 'shape') throw new RateLimitError('invalid_policy', `policy '${name}': mode must be police or shape`);
    const windowUs = timeToDrainUs(spec.burst * UNIT, rate);
    return Object.freeze({
      name, algorithm: spec.algorithm, limit: spec.burst, windowUs, everyHit: false,
      // String(rate) is the shortest text that parses back to the same double (Lua's strtod).
      args: [String(index), String(spec.burst), String(windowUs), String(rate), mode === 'shape' ? '1' : '0', counting(false)] as const,
    });
  }
  const w = spec as Extract<PolicySpec, { limit: number }>;
  const everyHit = w.algorithm === 'fixed_window' && w.everyHit === true;
  if (everyHit) checkLimit('limit', w.limit, MAX_EVERY_HIT_LIMIT, 0);
  else checkLimit('limit', w.limit);
  const windowUs = parseDuration(w.window);
  checkWindow(windowUs);
  if (w.algorithm === 'sliding_window_log' && w.limit > MAX_SLIDING_LOG_LIMIT) {
    throw new RateLimitError('invalid_policy', `policy '${name}': sliding_window_log keeps one entry per admitted request, so its limit is capped at ${MAX_SLIDING_LOG_LIMIT} (got ${w.limit}); use sliding_window_counter for larger limits`);
  }
  if (w.algorithm === 'sliding_window_counter' && (w.limit + 1) * windowUs > TWO_POW_53) {
    throw new RateLimitError('invalid_policy', `policy '${name}': limit x window overflows exact arithmetic ((limit + 1) * window_us must be <= 2^53)`);
  }
  return Object.freeze({
    name, algorithm: w.algorithm, limit: w.limit, windowUs, everyHit,
    args: [String(index), String(w.limit), String(windowUs), '0', '0', counting(everyHit)] as const,
  });
}

/** Checks a key (1 ... 512 bytes of UTF-8, as ratelimitd) and a cost; throws RateLimitError. */
export function validateRequest(policy: Policy, key: string, cost: number): void {
  if (typeof key !== 'string' || key.length === 0) throw new RateLimitError('invalid_key', 'key must be a non-empty string');
  const bytes = Buffer.byteLength(key, 'utf8');
  if (bytes > MAX_KEY_BYTES) throw new RateLimitError('invalid_key', `key is ${bytes} bytes; the maximum is ${MAX_KEY_BYTES}`);
  const min = policy.everyHit ? 0 : 1;
  if (!Number.isSafeInteger(cost) || cost < min || cost > MAX_COST) {
    throw new RateLimitError('invalid_cost', `cost must be an integer between ${min} and ${MAX_COST}, got ${cost}`);
  }
}

/** Checks a report's key and cost (usage known after the fact, docs/usage.md): a whole number
 *  from -MAX_COST (a refund) to MAX_COST, 0 included, as ratelimitd's validate_report_cost. */
export function validateReport(policy: Policy, key: string, cost: number): void {
  validateRequest(policy, key, 1);
  if (!Number.isSafeInteger(cost) || cost < -MAX_COST || cost > MAX_COST) {
    throw new RateLimitError('invalid_cost', `cost of a report must be an integer between ${-MAX_COST} and ${MAX_COST}, got ${cost}`);
  }
}
