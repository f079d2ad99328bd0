// headers.ts — the one place this package turns decisions into an HTTP answer, exactly as
// ratelimitd renders them (src/http/render.cc, its default `headers: ietf`):
//   200 when allowed, 429 when denied, 400 when the cost exceeds the capacity (no wait helps);
//   RateLimit-Policy: `"name";q=<quota>;w=<window s, rounded up>` per policy;
//   RateLimit:        `"name";r=<remaining>;t=<s>` per policy — t until the limit is fully
//                     available again when allowed, until this request would pass when denied;
//   on 429 Retry-After = max(1, ceil(retry_after s)) of the most restrictive decision, and
//   Cache-Control: no-store; the body {"allowed","policy","limit","remaining","reset_ms",
//   "retry_after_ms","delay_ms"} of the most restrictive decision (ms rounded up).
// Invariant: Retry-After equals the t of the denying item with the longest wait.

import { Decision } from './decision';

/** What the headers need of a policy besides its decision. */
export interface PolicyInfo {
  name: string;
  /** q: capacity (limit or burst). */
  quota: number;
  /** w: the window, or the time to drain a full bucket, µs. */
  windowUs: number;
}

export interface RenderedAnswer {
  status: number;
  /** In the order to send them. */
  headers: [string, string][];
  body: string;
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
export function renderDecisions(decisions: Decision[], policies: PolicyInfo[]): RenderedAnswer {
  const k = mostRestrictive(decisions);
  const d = decisions[k];
  const p = policies[k];
  const policyField = policies.map((pi) => `${sfString(pi.name)};q=${pi.quota};w=${ceilSeconds(pi.windowUs)}`).join(', ');
  if (d.reason === 'exceeds_capacity') {
    const message = `the request's cost exceeds the capacity (${d.limit}) of policy '${p.name}': it can never be admitted`;
    return {
      status: 400,
      headers: [['RateLimit-Policy', policyField], ['Cache-Control', 'no-store']],
      body: JSON.stringify({ error: 'cost_exceeds_capacity', message, policy: p.name, limit: d.limit }),
    };
  }
  const headers: [string, string][] = [
    ['RateLimit-Policy', policyField],
    ['RateLimit', policies.map((pi, i) => `${sfString(pi.name)};r=${decisions[i].remaining};t=${resetSeconds(decisions[i])}`).join(', ')],
  ];
  if (!d.allowed) {
    headers.push(['Retry-After', String(retryAfterSeconds(d))]);
    headers.push(['Cache-Control', 'no-store']);
  }
  const body = JSON.stringify({
    allowed: d.allowed, policy: p.name, limit: d.limit, remaining: d.remaining,
    reset_ms: ceilMillis(d.resetAfterUs), retry_after_ms: d.allowed ? 0 : ceilMillis(d.retryAfterUs),
    delay_ms: ceilMillis(d.delayUs),
  });
  return { status: d.allowed ? 200 : 429, headers, body };
}
