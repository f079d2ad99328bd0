// headers.ts — the one place this package turns decisions into an HTTP answer, exactly as
// ratelimitd renders them (src/http/render.cc, its default `headers: ietf`):
//   200 when allowed, 429 when denied, 400 when the cost exceeds the capacity (no wait helps);
//   RateLimit-Policy: `"name";q=<quota>;w=<window s, rounded up>` per policy;
//   RateLimit:        `"name";r=<remaining>;t=<s>` per policy — t until the limit is fully
//                     available again when allowed, until this request would pass when denied;
//   on 429 Retry-After = max(1, ceil(retry_after s)) of the most restrictive decision, and
//   Cache-Control: no-store; the body {"allowed","policy","limit","remaining","reset_ms",
//   "retry_after_ms","delay_ms"} of the most restrictive decision (ms rounded up).
//   Header sets (ratelimitd's `headers:`): 'ietf' as above; 'draft6' RateLimit-Limit,
//   -Remaining, -Reset of the most restrictive decision; 'x-ratelimit' the same values as
//   X-RateLimit-*; 'none' no rate-limit fields (Retry-After and Cache-Control stay on a 429).
//   problemJson (ratelimitd's `problem_json: true`): a 429's body is an RFC 9457 problem.
// Invariant: Retry-After equals the t of the denying item with the longest wait (and -Reset).

import { Decision } from './decision';

/** What the headers need of a policy besides its decision. */
export interface PolicyInfo {
  name: string;
  /** q: capacity (limit or burst). */
  quota: number;
  /** w: the window, or the time to drain a full bucket, µs. */
  windowUs: number;
}

/** Which rate-limit fields an answer carries, as ratelimitd's `headers:` setting. */
export type HeaderSet = 'ietf' | 'draft6' | 'x-ratelimit' | 'none';
export const HEADER_SETS: readonly HeaderSet[] = ['ietf', 'draft6', 'x-ratelimit', 'none'];

export interface RenderOptions {
  /** Default 'ietf', ratelimitd's default. */
  headers?: HeaderSet;
  /** A 429's body as application/problem+json (ratelimitd's `problem_json: true`). */
  problemJson?: boolean;
}

const TRIPLES: Partial<Record<HeaderSet, [string, string, string]>> = {
  draft6: ['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset'],
  'x-ratelimit': ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'],
};
const QUOTA_EXCEEDED = 'https://iana.org/assignments/http-problem-types#quota-exceeded';
const REDUCED_CAPACITY = 'https://iana.org/assignments/http-problem-types#temporary-reduced-capacity';

export interface RenderedAnswer {
  status: number;
  /** In the order to send them. */
  headers: [string, string][];
  body: string;
  /** 'application/problem+json' for a problem; absent or 'application/json' otherwise. */
  contentType?: string;
}

const ceilDiv = (us: number, unit: number) => (us <= 0 ? 0 : Math.floor((us - 1) / unit) + 1);
export const ceilSeconds = (us: number) => ceilDiv(us, 1_000_000);
export const ceilMillis = (us: number) => ceilDiv(us, 1_000);

const retryAfterSeconds = (d: Decision) => Math.max(1, ceilSeconds(d.retryAfterUs));
const resetSeconds = (d: Decision) => (d.allowed ? ceilSeconds(d.resetAfterUs) : retryAfterSeconds(d));

/** An sf-string: '"' and '\' escaped, anything outside printable ASCII as '?'. */
export function sfString(s: string): string {
  let out = '"';
  for (const ch of Buffer.from(s, 'utf8')) {
    if (ch === 0x22 || ch === 0x5c) out += '\\' + String.fromCharCode(ch);
    else if (ch >= 0x20 && ch <= 0x7e) out += String.fromCharCode(ch);
    else out += '?';
  }
  return out + '"';
}

// algo::most_restrictive (src/core/decide.cc): the highest (denied, exceeds capacity,
// retry_after, -remaining), the first of equals.
function rank(d: Decision): number[] {
  return [d.allowed ? 0 : 1, d.reason === 'exceeds_capacity' ? 1 : 0, d.retryAfterUs, -d.remaining];
}
function mostRestrictive(ds: Decision[]): number {
  let best = 0;
  for (let i = 1; i < ds.length; i++) {
    const a = rank(ds[i]), b = rank(ds[best]);
    const j = a.findIndex((v, n) => v !== b[n]);
    if (j >= 0 && a[j] > b[j]) best = i;
  }
  return best;
}

/** The answer for one or several policies' decisions (same order in both arrays). */
export function renderDecisions(decisions: Decision[], policies: PolicyInfo[], options: RenderOptions = {}): RenderedAnswer {
  const set = options.headers ?? 'ietf';
  const triple = TRIPLES[set];
  const k = mostRestrictive(decisions);
  const d = decisions[k];
  const p = policies[k];
  const policyField = policies.map((pi) => `${sfString(pi.name)};q=${pi.quota};w=${ceilSeconds(pi.windowUs)}`).join(', ');
  const contentType = 'application/json';
  if (d.reason === 'exceeds_capacity') {
    const message = `the request's cost exceeds the capacity (${d.limit}) of policy '${p.name}': it can never be admitted`;
    const headers: [string, string][] = [];
    if (set === 'ietf') headers.push(['RateLimit-Policy', policyField]);
    if (triple) headers.push([triple[0], String(d.limit)]);
    headers.push(['Cache-Control', 'no-store']);
    return { status: 400, headers, contentType, body: JSON.stringify({ error: 'cost_exceeds_capacity', message, policy: p.name, limit: d.limit }) };
  }
  const headers: [string, string][] = [];
  if (set === 'ietf') {
    headers.push(['RateLimit-Policy', policyField]);
    headers.push(['RateLimit', policies.map((pi, i) => `${sfString(pi.name)};r=${decisions[i].remaining};t=${resetSeconds(decisions[i])}`).join(', ')]);
  } else if (triple) {
    headers.push([triple[0], String(d.limit)], [triple[1], String(d.remaining)], [triple[2], String(resetSeconds(d))]);
  }
  if (!d.allowed) {
    headers.push(['Retry-After', String(retryAfterSeconds(d))]);
    headers.push(['Cache-Control', 'no-store']);
  }
  const members = {
    allowed: d.allowed, policy: p.name, limit: d.limit, remaining: d.remaining,
    reset_ms: ceilMillis(d.resetAfterUs), retry_after_ms: d.allowed ? 0 : ceilMillis(d.retryAfterUs),
    delay_ms: ceilMillis(d.delayUs),
  };
  if (!d.allowed && options.problemJson) {
    const store = d.reason === 'failed_closed';
    const problem = {
      type: store ? REDUCED_CAPACITY : QUOTA_EXCEEDED,
      title: store ? 'Request cannot be satisfied due to temporary server capacity constraints'
        : 'Request cannot be satisfied as assigned quota has been exceeded',
      'violated-policies': policies.filter((_, i) => !decisions[i].allowed).map((pi) => pi.name),
      ...members,
    };
    return { status: 429, headers, contentType: 'application/problem+json', body: JSON.stringify(problem) };
  }
  return { status: d.allowed ? 200 : 429, headers, contentType, body: JSON.stringify(members) };
}
