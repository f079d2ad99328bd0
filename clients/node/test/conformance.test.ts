// conformance.test.ts — clients/conformance/README.md's runner contract for the Node client:
// every case of tests/vectors/*.json through RedisLimiter against real Redis (test time, every
// field of every decision equal), once step by step and once with all cases at the same time
// (so many decisions share one batch call), and race.json (server clock, real concurrency).
import { test, before, after } from 'node:test';
import * as assert from 'node:assert/strict';
import * as fs from 'fs';
import * as path from 'path';
import { RedisLimiter, PolicySpec } from '../src';
import { ALGORITHMS as CLIENT_ALGORITHMS } from '../src/policy';
import { CONFORMANCE_DIR, RUN_ID, Started, VECTORS_DIR, awaitWindowRoom, inFlight, testRedis } from './support';

interface Expect { allowed: boolean; reason: string; remaining: number; reset_after_us: number; retry_after_us: number; delay_us: number }
interface Step { t_us: number; cost?: number; op?: 'acquire' | 'peek' | 'report' | 'reset'; key?: string; expect?: Expect; policy?: Record<string, unknown> }
interface Case { name: string; policy: Record<string, unknown>; count_denied?: boolean; every_hit?: boolean; steps: Step[] }
interface VectorFile { algorithm: string; cases: Case[] }

// A vector file's policy as this client's PolicySpec.
export function specOf(algorithm: string, c: { policy: Record<string, unknown>; count_denied?: boolean; every_hit?: boolean }): PolicySpec {
  const p = c.policy;
  if (algorithm === 'token_bucket' || algorithm === 'leaky_bucket') {
    return { algorithm, rate: p.rate as number, burst: p.burst as number, mode: (p.mode as 'police' | 'shape') ?? 'police', countDenied: c.count_denied === true };
  }
  return { algorithm: algorithm as 'fixed_window', limit: p.limit as number, window: p.window_us as number, countDenied: c.count_denied === true, everyHit: c.every_hit === true };
}

// The library's algorithms (clients/conformance/algorithms.json, held to kAlgorithmTable by
// tests/redis/algorithm_table_test.cc): this client ports the rate ones, whose vectors run here.
// Concurrency limits (leases) are ratelimitd's API (RatelimitdLimiter), not this client's.
interface TableRow { name: string; index: number; kind: string }
const TABLE = (JSON.parse(fs.readFileSync(path.join(CONFORMANCE_DIR, 'algorithms.json'), 'utf8')) as { algorithms: TableRow[] }).algorithms;
const NOT_PORTED = ['concurrency'];
const ALGORITHMS = TABLE.filter((a) => a.kind === 'rate').map((a) => a.name);
const files: VectorFile[] = ALGORITHMS.map((a) => JSON.parse(fs.readFileSync(path.join(VECTORS_DIR, `${a}.json`), 'utf8')) as VectorFile);

test("the client's algorithm list is the library's", () => {
  // Same order: an algorithm's index is its argument to the Redis functions.
  assert.deepEqual([...CLIENT_ALGORITHMS], ALGORITHMS);
  assert.deepEqual(TABLE.map((a) => a.index), TABLE.map((_, i) => i));
  assert.deepEqual(TABLE.map((a) => a.name).filter((n) => !CLIENT_ALGORITHMS.includes(n as never)), NOT_PORTED,
    'an algorithm of the library that this client neither ports nor says it does not');
});

let redis: Started;
const limiters: RedisLimiter[] = [];
before(async () => { redis = await testRedis(); });
after(async () => { for (const l of limiters) await l.close(); await redis.stop(); });

function limiterFor(prefix: string, algorithm: string, c: Case): RedisLimiter {
  const l = new RedisLimiter({ redis: redis.url, keyPrefix: prefix, policies: { p: specOf(algorithm, c) }, onFailure: 'closed', commandTimeoutMs: 5000 });
  limiters.push(l);
  return l;
}

async function runCase(prefix: string, algorithm: string, c: Case): Promise<string[]> {
  const l = limiterFor(prefix, algorithm, c);
  const failures: string[] = [];
  for (const [i, s] of c.steps.entries()) {
    const key = s.key ?? 'k';
    if (s.op === 'reset') { await l.reset('p', key); continue; }
    const opts = { cost: s.cost ?? 1, nowUs: s.t_us };
    // A step's own policy is the case's redefined (a reload): a limiter of it on the same keys.
    const sc: Case = s.policy ? { ...c, policy: s.policy } : c;
    const on = sc === c ? l : limiterFor(prefix, algorithm, sc);
    const d = s.op === 'peek' ? await on.peek('p', key, opts)
      : s.op === 'report' ? await on.report('p', key, opts.cost, { nowUs: s.t_us })
        : await on.acquire('p', key, opts);
    const got = { allowed: d.allowed, reason: d.reason, remaining: d.remaining, reset_after_us: d.resetAfterUs, retry_after_us: d.retryAfterUs, delay_us: d.delayUs };
    const capacity = (sc.policy.limit ?? sc.policy.burst) as number;
    if (JSON.stringify(got) !== JSON.stringify(s.expect) || d.limit !== capacity) {
      failures.push(`${algorithm}/${c.name} step ${i}: expected ${JSON.stringify(s.expect)} limit ${capacity}, got ${JSON.stringify(got)} limit ${d.limit}`);
    }
    if (on.failures !== 0) failures.push(`${algorithm}/${c.name} step ${i}: the store failed`);
  }
  return failures;
}

test('every vector, step by step, equals the C++ stores', async () => {
  let cases = 0;
  const failures: string[] = [];
  for (const f of files) {
    for (const c of f.cases) {
      failures.push(...(await runCase(`conf:${RUN_ID}:seq:${f.algorithm}:${c.name}:`, f.algorithm, c)));
      cases++;
    }
  }
  assert.ok(cases >= 40, `only ${cases} cases found in ${VECTORS_DIR}`);
  assert.deepEqual(failures, []);
});

test('every vector, all cases at once (batched calls), equals the C++ stores', async () => {
  const all = files.flatMap((f) => f.cases.map((c) => ({ f, c })));
  const failures = (await Promise.all(all.map(({ f, c }) => runCase(`conf:${RUN_ID}:par:${f.algorithm}:${c.name}:`, f.algorithm, c)))).flat();
  assert.deepEqual(failures, []);
});

interface Race { requests: number; concurrency: number; cases: { algorithm: string; policy: Record<string, unknown>; expect_admitted: number }[] }
const race = JSON.parse(fs.readFileSync(path.join(CONFORMANCE_DIR, 'race.json'), 'utf8')) as Race;

for (const rc of race.cases) {
  test(`race: ${race.requests} requests, ${race.concurrency} in flight, ${rc.algorithm} → exactly ${rc.expect_admitted}`, async () => {
    const l = limiterFor(`conf:${RUN_ID}:race:`, rc.algorithm, { name: 'race', policy: rc.policy, steps: [] });
    // The windows are a year long, so a boundary mid-race is rare, not impossible (the next is
    // 2026-12-18 00:00 UTC); 60 s of room: a race takes well under a second, and a stalled call
    // fails it by its 5 s command timeout long before.
    if (rc.policy.window_us !== undefined) await awaitWindowRoom(rc.policy.window_us as number, 60_000);
    const ds = await inFlight(Array.from({ length: race.requests }, (_, i) => i), race.concurrency, () => l.acquire('p', `race-${rc.algorithm}`));
    assert.equal(l.failures, 0);
    assert.equal(ds.filter((d) => d.allowed).length, rc.expect_admitted);
    assert.ok(ds.filter((d) => !d.allowed).every((d) => d.reason === 'over_limit'));
  });
}
