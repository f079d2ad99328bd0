// middleware.test.ts — the Node client as users run it: an Express app and a Fastify app, each
// on the Redis back-end and on a real ratelimitd (the project's build) sharing the same Redis,
// limited at 10 per minute under 200 concurrent requests (the issue's acceptance); the answers' header text equal to
// ratelimitd's own; counts shared with ratelimitd; bad input; Redis or ratelimitd down.
import { test, before, after } from 'node:test';
import * as assert from 'node:assert/strict';
import * as http from 'http';
import express from 'express';
import Fastify from 'fastify';
import { Limiter, RateLimitError, RatelimitdLimiter, RedisLimiter, expressRateLimit, fastifyRateLimit, findLibrary } from '../src';
import { BackEnds, RUN_ID, Started, inFlight, startBackEnds, startRatelimitd, startRedis } from './support';

const PREFIX = `rl:node-${RUN_ID}:`;
// `bucket` refills one unit in 1000 s, longer than this file may run: the shared-count test's
// remaining counts cannot gain a unit between its calls however slowly they run (at 1 per second,
// a second between its first and last call would add one).
const POLICIES = { api: { algorithm: 'sliding_window_log', limit: 10, window: '60s' }, bucket: { algorithm: 'token_bucket', rate: 0.001, burst: 5 } } as const;
const YAML = (redisUrl: string, prefix = PREFIX) => `store: { type: redis, url: "${redisUrl}", key_prefix: "${prefix}", on_failure: closed, command_timeout: 30s }
policies:
  api:    { algorithm: sliding_window_log, limit: 10, window: 60s }
  bucket: { algorithm: token_bucket, rate: 0.001, burst: 5 }
`;

let redis: Started;
let daemon: Started;
let viaRedis: RedisLimiter;
let viaDaemon: RatelimitdLimiter;
const servers: http.Server[] = [];
const fastifies: { close: () => Promise<unknown> }[] = [];
let backEnds: BackEnds;
before(async () => {
  backEnds = await startBackEnds((url) => YAML(url), PREFIX, POLICIES);
  ({ redis, daemon, viaRedis, viaDaemon } = backEnds);
});
after(async () => {
  // Every handle closed, so the test process exits by itself (keep-alive sockets included).
  for (const s of servers) { s.closeAllConnections(); s.close(); }
  for (const f of fastifies) await f.close();
  await backEnds.stop();
});

interface Answer { status: number; headers: http.IncomingHttpHeaders; body: string }
function get(port: number, path: string, client: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, headers: { 'x-client': client }, timeout: 30_000 }, (res) => {
      let body = '';
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

function listen(server: http.Server): Promise<number> {
  servers.push(server);
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
}

async function expressApp(limiter: Limiter): Promise<number> {
  const app = express();
  app.use(expressRateLimit({ limiter, policy: 'api', key: (req) => String(req.headers['x-client']), skip: (req) => req.path === '/healthz' }));
  app.get('/items', (_req, res) => { res.json({ items: [] }); });
  app.get('/healthz', (_req, res) => { res.send('ok'); });
  return listen(http.createServer(app));
}

async function fastifyApp(limiter: Limiter): Promise<number> {
  const app = Fastify();
  app.addHook('onRequest', fastifyRateLimit({ limiter, policy: 'api', key: (req) => String(req.headers['x-client']) }));
  app.get('/items', async () => ({ items: [] }));
  fastifies.push(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  return (app.server.address() as { port: number }).port;
}

// 200 concurrent requests (all in flight at once), one client: exactly 10 pass; every denial is
// ratelimitd's 429.
async function race(port: number, client: string): Promise<void> {
  const answers = await inFlight(Array.from({ length: 200 }, (_, i) => i), 200, () => get(port, '/items', client));
  const ok = answers.filter((a) => a.status === 200);
  const denied = answers.filter((a) => a.status === 429);
  assert.equal(ok.length, 10);
  assert.equal(denied.length, 190);
  for (const a of ok) {
    assert.equal(a.headers['ratelimit-policy'], '"api";q=10;w=60');
    assert.match(String(a.headers.ratelimit), /^"api";r=[0-9];t=60$/);
    assert.equal(a.body, '{"items":[]}');
  }
  for (const a of denied) {
    const retry = Number(a.headers['retry-after']);
    assert.ok(retry >= 1 && retry <= 60, `Retry-After ${a.headers['retry-after']}`);
    assert.equal(a.headers['ratelimit-policy'], '"api";q=10;w=60');
    assert.equal(a.headers.ratelimit, `"api";r=0;t=${retry}`);
    assert.equal(a.headers['cache-control'], 'no-store');
    assert.match(String(a.headers['content-type']), /^application\/json/);
    const body = JSON.parse(a.body);
    assert.equal(body.allowed, false);
    assert.equal(body.policy, 'api');
    assert.equal(body.limit, 10);
    assert.equal(body.remaining, 0);
    assert.ok(body.retry_after_ms > 0 && Math.ceil(body.retry_after_ms / 1000) === retry);
  }
}

test('Express on Redis: 200 concurrent requests, 10 per minute → exactly 10, the rest 429 as ratelimitd', async () => {
  const port = await expressApp(viaRedis);
  await race(port, `ex-redis-${RUN_ID}`);
  const skipped = await get(port, '/healthz', `ex-redis-${RUN_ID}`);
  assert.equal(skipped.status, 200);
  assert.equal(skipped.headers.ratelimit, undefined);
});

test('Express on ratelimitd: the same', async () => {
  await race(await expressApp(viaDaemon), `ex-d-${RUN_ID}`);
});

test('Fastify on Redis: the same', async () => {
  await race(await fastifyApp(viaRedis), `fy-redis-${RUN_ID}`);
});

test('Fastify on ratelimitd: the same', async () => {
  await race(await fastifyApp(viaDaemon), `fy-d-${RUN_ID}`);
});

test("header text: what the middleware sends is byte for byte what ratelimitd sent for the decision", async () => {
  const port = await expressApp(viaDaemon);
  const realFetch = globalThis.fetch;
  let seen: Response | null = null;
  globalThis.fetch = async (...a: Parameters<typeof fetch>) => { const r = await realFetch(...a); seen = r.clone(); return r; };
  try {
    for (let i = 0; i < 12; i++) {
      const mine = await get(port, '/items', `hdr-${RUN_ID}`);
      const theirs = seen as unknown as Response;
      for (const h of ['ratelimit-policy', 'ratelimit', 'retry-after', 'cache-control']) {
        assert.equal(mine.headers[h] ?? null, theirs.headers.get(h), `${h} of request ${i}`);
      }
      if (mine.status === 429) assert.equal(mine.body, await theirs.text());
      assert.equal(mine.status, theirs.status);
    }
  } finally {
    globalThis.fetch = realFetch;
  }
});

test('counts are shared with ratelimitd: same Redis, prefix and policy name', async () => {
  const key = `shared-${RUN_ID}`;
  for (let i = 0; i < 3; i++) assert.equal((await viaRedis.acquire('bucket', key)).remaining, 4 - i);
  const d = await viaDaemon.acquire('bucket', key);
  assert.equal(d.remaining, 1);
  assert.equal((await viaRedis.acquire('bucket', key, { cost: 2 })).allowed, false);
  assert.equal((await viaRedis.acquire('bucket', key)).remaining, 0);
  assert.equal((await viaDaemon.acquire('bucket', key)).allowed, false);
});

test('bad input gets a RateLimitError naming the problem, and consumes nothing', async () => {
  const key = `bad-${RUN_ID}`;
  const rejects = (p: Promise<unknown>, code: string) => assert.rejects(p, (e: unknown) => e instanceof RateLimitError && e.code === code);
  await rejects(viaRedis.acquire('nope', key), 'unknown_policy');
  await rejects(viaDaemon.acquire('nope', key), 'unknown_policy');
  await rejects(viaRedis.acquire('api', key, { cost: 0 }), 'invalid_cost');
  await rejects(viaRedis.acquire('api', key, { cost: -1 }), 'invalid_cost');
  await rejects(viaRedis.acquire('api', key, { cost: 1.5 }), 'invalid_cost');
  await rejects(viaDaemon.acquire('api', key, { cost: 0 }), 'invalid_cost');
  await rejects(viaRedis.acquire('api', 'k'.repeat(513)), 'invalid_key');
  await rejects(viaRedis.acquire('api', ''), 'invalid_key');
  await rejects(viaDaemon.acquire('api', 'k'.repeat(513)), 'invalid_key');
  assert.throws(() => new RedisLimiter({ redis: redis.url, policies: { x: { algorithm: 'fixed_window', limit: 0, window: '1s' } } }), /limit must be an integer between 1/);
  assert.throws(() => new RedisLimiter({ redis: redis.url, policies: { x: { algorithm: 'token_bucket', rate: NaN, burst: 1 } } }), /rate must be a finite number/);
  assert.throws(() => new RedisLimiter({ redis: redis.url, policies: { x: { algorithm: 'fixed_window', limit: 1, window: '1 minute' } } }), /bad duration/);
  assert.throws(() => new RedisLimiter({ redis: redis.url, policies: { 'bad name': { algorithm: 'fixed_window', limit: 1, window: '1s' } } }), /policy name/);
  // A cost over the capacity can never pass: 400 as ratelimitd, not 429.
  const d = await viaRedis.acquire('api', key, { cost: 11 });
  assert.equal(d.reason, 'exceeds_capacity');
  assert.equal((await viaRedis.acquire('api', key)).remaining, 9);
});

// Issue 31 defect 6: a key ratelimitd refuses (here 600 bytes, over both back-ends' limits)
// answered 500 through the middleware; now ratelimitd's own 400 invalid_key, on both back-ends.
test('a key over the limit: the middleware answers 400 invalid_key as ratelimitd, on both back-ends', async () => {
  for (const limiter of [viaRedis, viaDaemon]) {
    const port = await expressApp(limiter);
    const a = await get(port, '/items', 'k'.repeat(600));
    assert.equal(a.status, 400, a.body);
    assert.equal(JSON.parse(a.body).error, 'invalid_key');
  }
});

// Issue 31 defect 7: a misspelt policy was a 500 on every request, and no key function a
// TypeError on every request; both are refused when the middleware is made.
test('middleware options that would fail every request are refused at construction', () => {
  const key = () => 'k';
  const refused = (code: string) => (e: unknown) => e instanceof RateLimitError && e.code === code;
  for (const make of [expressRateLimit, fastifyRateLimit] as ((o: unknown) => unknown)[]) {
    assert.throws(() => make({ limiter: viaRedis, policy: 'apii', key }), refused('unknown_policy'));
    assert.throws(() => make({ limiter: viaRedis, policy: 'api', key: 'k' }), refused('invalid_policy'));
    make({ limiter: viaRedis, policy: 'api' }); // no key: the client address (features.test.ts)
    assert.throws(() => make({ limiter: viaRedis, key }), refused('invalid_policy'));
    make({ limiter: viaRedis, policy: 'api', key });
    make({ limiter: viaDaemon, policy: 'whatever-ratelimitd-has', key }); // its policies are its own
  }
});

test('a library version Redis lacks and the client cannot load: a clear error, not a silent failure policy', async () => {
  const l = new RedisLimiter({ redis: redis.url, policies: POLICIES, library: { version: '000000000000' } });
  try {
    await assert.rejects(l.acquire('api', `v-${RUN_ID}`), (e: unknown) => e instanceof RateLimitError && e.code === 'library_missing' &&
      /does not have the ratelimit function library version 000000000000/.test(e.message) && /it has ratelimit_[0-9a-f]{12}/.test(e.message));
  } finally { await l.close(); }
});

// Before Redis goes, `l` has had a real answer (connected, the library loaded). Its first call
// also loads the library, which a busy machine may not finish within a 200 ms command timeout:
// the failure policy answering then is the limiter doing its job, not what the test is about,
// so it asks again, on fresh keys, up to 50 times (10 s at most).
async function answersWithinLimit(l: RedisLimiter): Promise<void> {
  for (let i = 0; i < 50; i++) if ((await l.acquire('api', `warm-${i}`)).reason === 'within_limit') return;
  assert.fail('no within_limit answer in 50 calls while Redis was up');
}

test('Redis down: the failure policy answers within the command timeout', async () => {
  const own = await startRedis();
  const closed = new RedisLimiter({ redis: own.url, policies: POLICIES, onFailure: 'closed', commandTimeoutMs: 200 });
  const open = new RedisLimiter({ redis: own.url, policies: POLICIES, onFailure: 'open', commandTimeoutMs: 200 });
  try {
    await answersWithinLimit(closed);
    await answersWithinLimit(open);
    const failedBefore = [closed.failures, open.failures];
    await own.stop();
    // "Within the command timeout" as an order of events, not a wall-clock figure: both answers
    // come before a 2 s timer (10x the 200 ms command timeout) armed beside them fires. An event
    // loop stalled by a busy machine runs its expired timers in the order they were due, the
    // calls' 200 ms timeouts first, so a stall cannot fail this; a client that waits for Redis
    // to come back, or retries for seconds, still does.
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((r) => { timer = setTimeout(() => r('late'), 2000); });
    const both = Promise.all([closed.acquire('api', 'k'), open.acquire('api', 'k')]);
    const first = await Promise.race([both, late]);
    clearTimeout(timer);
    assert.notEqual(first, 'late', 'no failure-policy answer within 2 s (command timeout 200 ms)');
    const [dc, dopen] = await both;
    assert.equal(dc.reason, 'failed_closed');
    assert.equal(dc.allowed, false);
    assert.equal(dc.retryAfterUs, 1_000_000);
    assert.equal(dopen.reason, 'failed_open');
    assert.equal(dopen.allowed, true);
    assert.ok(closed.failures > failedBefore[0] && open.failures > failedBefore[1]);
    // An Express app on the closed limiter answers 429 with Retry-After: 1.
    const port = await expressApp(closed);
    const a = await get(port, '/items', 'x');
    assert.equal(a.status, 429);
    assert.equal(a.headers['retry-after'], '1');
  } finally {
    await closed.close();
    await open.close();
  }
});

// Issue 31 defect 2: a limiter on an ioredis client of the app's own (no commandTimeout, offline
// queue on) still answered nothing 3 s after Redis hung (SIGSTOP): the bound was the URL form's
// commandTimeout only. Now the limiter's own timer bounds every decision.
test("Redis hung (SIGSTOP) under the app's own ioredis client: the failure policy answers within the timeout", async () => {
  const own = await startRedis();
  const Redis = (await import('ioredis')).default;
  const conn = new Redis(own.url);
  const l = new RedisLimiter({ redis: conn, policies: POLICIES, onFailure: 'closed', commandTimeoutMs: 200 });
  try {
    await answersWithinLimit(l);
    own.proc.kill('SIGSTOP');
    // As above: an order of events (before a 2 s timer), not a wall-clock figure.
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<'late'>((r) => { timer = setTimeout(() => r('late'), 2000); });
    const d = await Promise.race([l.acquire('api', 'k'), late]);
    clearTimeout(timer);
    assert.notEqual(d, 'late', 'no failure-policy answer within 2 s (timeout 200 ms)');
    assert.equal((d as { reason: string }).reason, 'failed_closed');
  } finally {
    own.proc.kill('SIGCONT');
    conn.disconnect();
    await l.close();
    await own.stop();
  }
});

test("the shipped library file is byte for byte what ratelimitd loads into Redis", async () => {
  const own = await startRedis();
  const d = await startRatelimitd(YAML(own.url));
  const Redis = (await import('ioredis')).default;
  const conn = new Redis(own.url);
  try {
    const lib = findLibrary();  // the build's share/ratelimit/redis file (RATELIMIT_REDIS_LIBRARY)
    await new RatelimitdLimiter({ url: d.url, timeoutMs: 5000 }).acquire('api', 'k'); // ratelimitd has connected
    const listed = (await conn.call('FUNCTION', 'LIST', 'WITHCODE')) as unknown[][];
    assert.equal(listed.length, 1, 'only ratelimitd loaded a library into this Redis');
    const fields = listed[0] as string[];
    assert.equal(fields[fields.indexOf('library_name') + 1], `ratelimit_${lib.version}`);
    assert.equal(fields[fields.indexOf('library_code') + 1], lib.text);
  } finally {
    conn.disconnect();
    await d.stop();
    await own.stop();
  }
});

// Issue 31 defect 1: an app whose ratelimitd has never answered (no policy header seen, no
// `windows` option) answered 500 "no quota or window known"; the failure policy answers instead.
test('ratelimitd never reached since start: Express answers by the failure policy, not 500', async () => {
  for (const [onFailure, status] of [['open', 200], ['closed', 429]] as const) {
    const never = new RatelimitdLimiter({ url: 'http://127.0.0.1:9', onFailure, timeoutMs: 500 });
    const port = await expressApp(never);
    const a = await get(port, '/items', 'x');
    assert.equal(a.status, status, `onFailure ${onFailure}: ${a.body}`);
    assert.equal(a.headers['ratelimit-policy'], undefined, 'no quota or window to tell');
    if (status === 429) assert.equal(a.headers['retry-after'], '1');
    else assert.equal(a.body, '{"items":[]}');
  }
});

test('ratelimitd down: the failure policy answers', async () => {
  const gone = new RatelimitdLimiter({ url: 'http://127.0.0.1:9', onFailure: 'closed', timeoutMs: 500 });
  const d = await gone.acquire('api', 'k');
  assert.equal(d.reason, 'failed_closed');
  assert.equal(gone.failures, 1);
  const open = new RatelimitdLimiter({ url: 'http://127.0.0.1:9', onFailure: 'open', timeoutMs: 500 });
  assert.equal((await open.acquire('api', 'k')).allowed, true);
});
