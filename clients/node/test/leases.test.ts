// leases.test.ts — concurrency leases through a real ratelimitd (on a real Redis): the lease API
// (acquire, renew, release with an outcome, bad input refused before sending, ratelimitd's codes
// surfaced) and the Express and Fastify concurrency middleware under `db: limit 2` — with the
// handler blocked exactly 2 requests get through and the 3rd gets ratelimitd's 429; once they
// finish (200, 500, a thrown error, a client that went away) the leases are back, observed as
// `remaining` of the next acquire; ratelimitd down → the failure policy.
import { test, before, after } from 'node:test';
import * as assert from 'node:assert/strict';
import * as http from 'http';
import express from 'express';
import Fastify from 'fastify';
import { RateLimitError, RatelimitdLimiter, expressConcurrencyLimit, fastifyConcurrencyLimit } from '../src';
import { RUN_ID, Started, eventually, freePort, startRatelimitd, startRedis, testRedis } from './support';

const YAML = (redisUrl: string) => `store: { type: redis, url: "${redisUrl}", key_prefix: "rl:node-leases-${RUN_ID}:", on_failure: closed, command_timeout: 30s }
policies:
  db:  { algorithm: concurrency, limit: 2, lease_ttl: 60s }
  api: { algorithm: fixed_window, limit: 5, window: 60s }
`;

let redis: Started;
let daemon: Started;
let limiter: RatelimitdLimiter;
const servers: http.Server[] = [];
const fastifies: { close: () => Promise<unknown> }[] = [];
before(async () => {
  redis = await testRedis();
  daemon = await startRatelimitd(YAML(redis.url));
  limiter = new RatelimitdLimiter({ url: daemon.url, timeoutMs: 30_000, onFailure: 'closed' });
});
after(async () => {
  for (const s of servers) { s.closeAllConnections(); s.close(); }
  for (const f of fastifies) await f.close();
  await daemon.stop();
  await redis.stop();
});

interface Answer { status: number; headers: http.IncomingHttpHeaders; body: string }
function get(port: number, path: string, client: string, onRequest?: (r: http.ClientRequest) => void): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, headers: { 'x-client': client }, timeout: 30_000, agent: false }, (res) => {
      let body = '';
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    onRequest?.(req);
  });
}

/** Units free for `key`: the `remaining` of a lease taken and given straight back. */
async function free(key: string): Promise<number> {
  const l = await limiter.acquireLease('db', key);
  if (!l.allowed) return 0;
  assert.equal(await limiter.releaseLease(l), true);
  return l.remaining + 1;
}

/** A gate the handlers wait on, and how many are waiting. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => { open = r; });
  return { opened, open, entered: 0 };
}

test('lease API: acquire, renew, release with an outcome; bad input refused before sending', async () => {
  const key = `api-${RUN_ID}`;
  const a = await limiter.acquireLease('db', key);
  assert.equal(a.allowed, true);
  assert.equal(a.reason, 'within_limit');
  assert.equal(typeof a.id, 'string');
  assert.equal(a.limit, 2);
  assert.equal(a.remaining, 1);
  assert.equal(a.expiresMs, 60_000);
  assert.equal(a.rateLimitPolicy, '"db";q=2;qu="concurrent-requests"');
  const b = await limiter.acquireLease('db', key);
  const c = await limiter.acquireLease('db', key);
  assert.equal(c.allowed, false);
  assert.equal(c.reason, 'over_limit');
  assert.equal(c.id, null);
  assert.ok(c.retryAfterUs > 0);
  assert.equal(await limiter.renewLease(a), true);
  assert.equal(await limiter.releaseLease(a, { outcome: 'ok', latencyMs: 12.5 }), true);
  assert.equal(await limiter.releaseLease(a), false, 'a second release frees nothing');
  assert.equal(await limiter.renewLease(a), false, 'a released lease cannot be renewed');
  assert.equal(await limiter.releaseLease(b, { outcome: 'dropped' }), true);
  assert.equal(await free(key), 2);

  const failures = limiter.failures;
  const refused = async (p: Promise<unknown>, code: string) => assert.rejects(p, (e) => e instanceof RateLimitError && e.code === code);
  await refused(limiter.acquireLease('db', ''), 'invalid_key');
  await refused(limiter.acquireLease('', key), 'invalid_policy');
  await refused(limiter.acquireLease('db', key, { cost: 0 }), 'invalid_cost');
  await refused(limiter.acquireLease('db', key, { cost: 1.5 }), 'invalid_cost');
  await refused(limiter.acquireLease('db', key, { maxWaitMs: -1 }), 'invalid_max_wait');
  await refused(limiter.releaseLease(a, { outcome: 'bad' as 'ok' }), 'invalid_outcome');
  for (const latencyMs of [-1, NaN, Infinity, 3_600_000]) await refused(limiter.releaseLease(a, { latencyMs }), 'invalid_latency');
  // ratelimitd's own codes, as it names them.
  await refused(limiter.acquireLease('nope', key), 'unknown_policy');
  await refused(limiter.acquireLease('api', key), 'not_a_concurrency_policy');
  await refused(limiter.renewLease({ ...a, id: 'not-a-lease' }), 'invalid_lease_id');
  const big = await limiter.acquireLease('db', key, { cost: 3 });
  assert.equal(big.allowed, false);
  assert.equal(big.reason, 'exceeds_capacity');
  assert.equal(limiter.failures, failures, 'no failure-policy answers');
  assert.equal(await free(key), 2);
});

async function blockedRace(port: number, key: string, g: ReturnType<typeof gate>): Promise<void> {
  const first = [get(port, '/slow', key), get(port, '/slow', key)];
  await eventually('both handlers running', async () => g.entered === 2);
  const third = await get(port, '/slow', key);
  assert.equal(third.status, 429);
  assert.equal(third.headers['retry-after'] !== undefined && Number(third.headers['retry-after']) >= 1, true);
  assert.equal(third.headers['ratelimit-policy'], '"db";q=2;qu="concurrent-requests"');
  assert.equal(third.headers['cache-control'], 'no-store');
  const body = JSON.parse(third.body);
  assert.equal(body.allowed, false);
  assert.equal(body.policy, 'db');
  assert.equal(body.limit, 2);
  assert.equal(g.entered, 2, 'the refused request never reached the handler');
  g.open();
  for (const a of await Promise.all(first)) assert.equal(a.status, 200);
  await eventually('both leases released', async () => (await free(key)) === 2);
  assert.equal((await get(port, '/slow', key)).status, 200, 'a new request passes');
}

async function releasedAfter(port: number, path: string, key: string, status: number): Promise<void> {
  assert.equal((await get(port, path, key)).status, status);
  await eventually(`the lease of ${path} released`, async () => (await free(key)) === 2);
}

test('Express: 2 through, the 3rd 429; leases released after 200, 500, a throw, a disconnect', async () => {
  const g = gate();
  const app = express();
  app.set('env', 'test');                               // no stack trace of /throw on stderr
  app.use(expressConcurrencyLimit({ limiter, policy: 'db', key: (req) => String(req.headers['x-client']) }));
  app.get('/slow', async (_req, res) => { g.entered++; await g.opened; res.send('done'); });
  app.get('/fail', (_req, res) => { res.status(500).send('broken'); });
  app.get('/throw', () => { throw new Error('handler bug'); });
  app.get('/hang', () => { g.entered++; });
  const server = http.createServer(app);
  servers.push(server);
  const port = await new Promise<number>((r) => server.listen(0, '127.0.0.1', () => r((server.address() as { port: number }).port)));
  const key = `express-${RUN_ID}`;
  await blockedRace(port, key, g);
  await releasedAfter(port, '/fail', key, 500);
  await releasedAfter(port, '/throw', key, 500);
  // A client that goes away while its handler never answers: the lease comes back at once.
  g.entered = 0;
  let clientReq!: http.ClientRequest;
  const gone = get(port, '/hang', key, (r) => { clientReq = r; }).catch(() => 'gone');
  await eventually('the handler running', async () => g.entered === 1);
  assert.equal(await free(key), 1);
  clientReq.destroy();
  assert.equal(await gone, 'gone');
  await eventually('the lease released on disconnect', async () => (await free(key)) === 2);
});

test('Fastify: 2 through, the 3rd 429; leases released after 200, 500 and a throw', async () => {
  const g = gate();
  const app = Fastify();
  app.addHook('onRequest', fastifyConcurrencyLimit({ limiter, policy: 'db', key: (req) => String(req.headers['x-client']) }));
  app.get('/slow', async () => { g.entered++; await g.opened; return 'done'; });
  app.get('/fail', async (_req, reply) => reply.code(503).send('busy'));
  app.get('/throw', async () => { throw new Error('handler bug'); });
  fastifies.push(app);
  await app.listen({ port: 0, host: '127.0.0.1' });
  const port = (app.server.address() as { port: number }).port;
  const key = `fastify-${RUN_ID}`;
  await blockedRace(port, key, g);
  await releasedAfter(port, '/fail', key, 503);
  await releasedAfter(port, '/throw', key, 500);
});

test('ratelimitd down: open runs the handler without a lease, closed answers 429 Retry-After 1', async () => {
  const dead = `http://127.0.0.1:${await freePort()}`;
  for (const onFailure of ['open', 'closed'] as const) {
    const down = new RatelimitdLimiter({ url: dead, timeoutMs: 2_000, onFailure });
    const app = express();
    app.use(expressConcurrencyLimit({ limiter: down, policy: 'db', key: () => 'k' }));
    app.get('/x', (_req, res) => { res.send('ran'); });
    const server = http.createServer(app);
    servers.push(server);
    const port = await new Promise<number>((r) => server.listen(0, '127.0.0.1', () => r((server.address() as { port: number }).port)));
    const a = await get(port, '/x', 'k');
    if (onFailure === 'open') {
      assert.equal(a.status, 200);
      assert.equal(a.body, 'ran');
    } else {
      assert.equal(a.status, 429);
      assert.equal(a.headers['retry-after'], '1');
    }
    await eventually('the release (nothing to send) done', async () => down.failures === 1);
    const l = await down.acquireLease('db', 'k');
    assert.equal(l.reason, onFailure === 'open' ? 'failed_open' : 'failed_closed');
    assert.equal(await down.releaseLease(l, { outcome: 'ok' }), false);
    assert.equal(await down.renewLease(l), onFailure === 'open');
  }
});

// ratelimitd's own Redis down behind an `on_failure: open` store grants with "lease_id": null:
// the failure policy's grant (nothing to release), not a protocol error (a 500 in the middleware).
test('ratelimitd failing open on its own store: a grant without a lease id, the handler runs', async () => {
  const own = await startRedis();
  const d = await startRatelimitd(`store: { type: redis, url: "${own.url}", on_failure: open, command_timeout: 300ms }\npolicies:\n  db: { algorithm: concurrency, limit: 2, lease_ttl: 30s }\n`);
  try {
    const limiter = new RatelimitdLimiter({ url: d.url, timeoutMs: 30_000, onFailure: 'closed' });
    assert.equal(typeof (await limiter.acquireLease('db', 'k')).id, 'string');
    await own.stop();
    const l = await limiter.acquireLease('db', 'k');
    assert.deepEqual([l.allowed, l.reason, l.id], [true, 'failed_open', null]);
    assert.equal(await limiter.releaseLease(l, { outcome: 'ok' }), false);
    assert.equal(limiter.failures, 0);
    const app = express();
    app.use(expressConcurrencyLimit({ limiter, policy: 'db', key: () => 'k' }));
    app.get('/x', (_req, res) => { res.send('ran'); });
    const server = http.createServer(app);
    servers.push(server);
    const port = await new Promise<number>((r) => server.listen(0, '127.0.0.1', () => r((server.address() as { port: number }).port)));
    const a = await get(port, '/x', 'k');
    assert.deepEqual([a.status, a.body], [200, 'ran']);
  } finally {
    await d.stop();
    await own.stop();
  }
});

// The outcomes reach ratelimitd: on an AIMD policy (memory store) a drop or a timeout lowers the
// limit the next lease reports (16 → 14: ×0.9, floored), an ok answer does not.
test('outcomes: 5xx and timeout release as drops an adaptive limit learns from; ok does not', async () => {
  const ad = await startRatelimitd(`policies:
  ad: { algorithm: concurrency, limit: adaptive, estimator: aimd, max_limit: 64, initial_limit: 16, sample_window: 0, lease_ttl: 60s }
`);
  try {
    const viaAd = new RatelimitdLimiter({ url: ad.url, timeoutMs: 30_000, onFailure: 'closed' });
    const limit = async () => { const l = await viaAd.acquireLease('ad', 'k'); await viaAd.releaseLease(l, { outcome: 'ok', latencyMs: 1 }); return l.limit; };
    let late!: () => void;
    const app = express();
    app.use(expressConcurrencyLimit({ limiter: viaAd, policy: 'ad', key: () => 'k', timeoutMs: 50 }));
    app.get('/ok', (_req, res) => { res.send('ok'); });
    app.get('/fail', (_req, res) => { res.status(500).send('broken'); });
    app.get('/late', (_req, res) => { late = () => res.send('late'); });
    const server = http.createServer(app);
    servers.push(server);
    const port = await new Promise<number>((r) => server.listen(0, '127.0.0.1', () => r((server.address() as { port: number }).port)));
    // The middleware's lease of /ok is back once a fresh lease leaves limit − 1 free.
    const released = () => eventually('released', async () => {
      const l = await viaAd.acquireLease('ad', 'k');
      await viaAd.releaseLease(l, { outcome: 'ok', latencyMs: 1 });
      return l.remaining === l.limit - 1;
    });
    assert.equal(await limit(), 16);
    assert.equal((await get(port, '/ok', 'k')).status, 200);
    await released();
    assert.equal(await limit(), 16, 'ok keeps the limit');
    assert.equal((await get(port, '/fail', 'k')).status, 500);
    await eventually('the drop learned', async () => (await limit()) === 14);
    const slow = get(port, '/late', 'k');
    await eventually('the handler running', async () => late !== undefined);
    await new Promise((r) => setTimeout(r, 60));            // past timeoutMs (50 ms) by construction
    late();
    assert.equal((await slow).status, 200);
    await eventually('the timeout learned', async () => (await limit()) === 12);
  } finally {
    await ad.stop();
  }
});
