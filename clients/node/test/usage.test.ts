// usage.test.ts — usage known after the response (docs/usage.md) from the Node client, on the
// Redis back-end and on a real ratelimitd sharing that Redis: report (debt, refund, bad input),
// reserve → reconcile / cancel, and the Express middleware that reconciles after the response
// with the usage the handler's response carries (an LLM-style token count in a header).
import { test, before, after } from 'node:test';
import * as assert from 'node:assert/strict';
import * as http from 'http';
import express from 'express';
import Fastify from 'fastify';
import { RateLimitError, RatelimitdLimiter, RedisLimiter, expressRateLimit, fastifyRateLimit } from '../src';
import { BackEnds, RUN_ID, eventually, startBackEnds } from './support';

const PREFIX = `rl:node-usage-${RUN_ID}:`;
// A 1 h sliding log: nothing recorded here ages out while the file runs.
const POLICIES = { tokens: { algorithm: 'sliding_window_log', limit: 10000, window: '1h' } } as const;
const YAML = (redisUrl: string) => `store: { type: redis, url: "${redisUrl}", key_prefix: "${PREFIX}", on_failure: closed, command_timeout: 30s }
policies:
  tokens: { algorithm: sliding_window_log, limit: 10000, window: 1h }
  db:     { algorithm: concurrency, limit: 2, lease_ttl: 10s }
`;

let fixture: BackEnds;
let viaRedis: RedisLimiter;
let viaDaemon: RatelimitdLimiter;
const servers: http.Server[] = [];
before(async () => {
  fixture = await startBackEnds(YAML, PREFIX, POLICIES);
  ({ viaRedis, viaDaemon } = fixture);
});
after(async () => {
  for (const s of servers) { s.closeAllConnections(); s.close(); }
  await fixture.stop();
});

const backEnds = () => [['Redis', viaRedis], ['ratelimitd', viaDaemon]] as const;
/** What is left of `key` now: a report of 0 records nothing and answers the state. */
const left = async (l: RedisLimiter | RatelimitdLimiter, key: string) => (await l.report('tokens', key, 0)).remaining;

test('report: past the limit is a debt (acquires refused), a refund gives back at most what is held', async () => {
  for (const [name, l] of backEnds()) {
    const k = `report-${name}`;
    assert.equal((await l.acquire('tokens', k, { cost: 9900 })).remaining, 100, name);
    const debt = await l.report('tokens', k, 500);
    assert.deepEqual([debt.allowed, debt.reason, debt.remaining, debt.retryAfterUs], [true, 'within_limit', 0, 0], name);
    const refused = await l.acquire('tokens', k);
    assert.ok(!refused.allowed && refused.retryAfterUs > 0, `${name}: ${JSON.stringify(refused)}`);
    assert.equal((await l.report('tokens', k, -900)).remaining, 500, name);
    assert.equal((await l.report('tokens', k, -20000)).remaining, 10000, `${name}: never above the limit`);
    // Bad input records nothing.
    for (const [cost, code] of [[1.5, 'invalid_cost'], [1_000_000_001, 'invalid_cost'], [-1_000_000_001, 'invalid_cost']] as const) {
      await assert.rejects(l.report('tokens', k, cost), (e: RateLimitError) => e.code === code, `${name} ${cost}`);
    }
    await assert.rejects(l.report('nope', k, 1), (e: RateLimitError) => e.code === 'unknown_policy', name);
    assert.equal(await left(l, k), 10000, name);
  }
  // ratelimitd refuses a report to a concurrency policy (its usage is its leases).
  await assert.rejects(viaDaemon.report('db', 'k', 1), (e: RateLimitError) => /concurrency/.test(e.message));
});

test('reserve → reconcile reports actual − estimate; cancel gives the estimate back; each settles once', async () => {
  for (const [name, l] of backEnds()) {
    const k = `reserve-${name}`;
    const r = await l.reserve('tokens', k, 500);
    assert.equal(r.decision.remaining, 9500, name);
    assert.equal((await r.reconcile(700))!.remaining, 9300, `${name}: 200 more than the estimate`);
    await assert.rejects(r.reconcile(700), (e: RateLimitError) => e.code === 'invalid_request', name);
    const less = await l.reserve('tokens', k, 500);
    assert.equal((await less.reconcile(100))!.remaining, 9200, `${name}: 400 refunded`);
    const exact = await l.reserve('tokens', k, 500);
    assert.equal(await exact.reconcile(500), null, `${name}: nothing to report`);
    const gone = await l.reserve('tokens', k, 500);
    assert.equal((await gone.cancel())!.remaining, 8700, `${name}: abandoned, the estimate back`);
    assert.equal((await gone.cancel())!.remaining, 8700, `${name}: a second cancel sends nothing`);
    assert.equal(await left(l, k), 8700, name);
    // Driven into debt by its actual usage: the next reservation is refused and records nothing,
    // so cancelling it sends nothing and reconciling it would report the whole actual.
    const big = await l.reserve('tokens', k, 8000);
    assert.equal((await big.reconcile(9000))!.remaining, 0, name);
    const denied = await l.reserve('tokens', k, 500);
    assert.ok(!denied.decision.allowed, name);
    assert.equal(await denied.cancel(), null, name);
    assert.equal(await left(l, k), 0, name);
    await assert.rejects(r.reconcile(-1), (e: RateLimitError) => e.code === 'invalid_request', name);
    await assert.rejects((await l.reserve('tokens', `${k}-neg`, 1)).reconcile(-1), (e: RateLimitError) => e.code === 'invalid_cost', name);
  }
});

function listen(server: http.Server): Promise<number> {
  servers.push(server);
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
}

function get(port: number, path: string, client: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, headers: { 'x-client': client }, timeout: 30_000 }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

test('Express: usage from the response reconciles the estimate after it is sent, on both back-ends', async () => {
  for (const [name, l] of backEnds()) {
    const reportErrors: Error[] = [];
    const app = express();
    app.use(expressRateLimit({
      limiter: l, policy: 'tokens', key: (req) => String(req.headers['x-client']), cost: 500,
      usage: (_req, res) => (res.getHeader('x-usage-tokens') === undefined ? undefined : Number(res.getHeader('x-usage-tokens'))),
      onReportError: (e) => reportErrors.push(e),
    }));
    // The "model": answers with its usage in a header, as an LLM API's usage field.
    app.get('/chat', (req, res) => {
      if (req.query.tokens !== undefined) res.setHeader('x-usage-tokens', String(req.query.tokens));
      res.json({ answer: '...' });
    });
    const port = await listen(http.createServer(app));
    const k = `mw-${name}`;
    assert.equal(await get(port, '/chat?tokens=700', k), 200);
    await eventually(`${name}: 700 used`, async () => (await left(l, k)) === 9300);
    assert.equal(await get(port, '/chat?tokens=100', k), 200);
    await eventually(`${name}: 400 of the estimate refunded`, async () => (await left(l, k)) === 9200);
    assert.equal(await get(port, '/chat?tokens=-5', k), 200);
    await eventually(`${name}: a bad usage is told to onReportError`, async () => reportErrors.length === 1);
    assert.equal((reportErrors[0] as RateLimitError).code, 'invalid_cost');
    assert.equal(await get(port, '/chat?tokens=20000', k), 200);
    await eventually(`${name}: in debt`, async () => (await left(l, k)) === 0);
    assert.equal(await get(port, '/chat?tokens=1', k), 429, `${name}: refused while in debt`);
  }
});

test('Fastify: the same after the raw response finishes', async () => {
  for (const [name, l] of backEnds()) {
    const app = Fastify();
    app.addHook('onRequest', fastifyRateLimit({
      limiter: l, policy: 'tokens', key: (req) => String(req.headers['x-client']), cost: 500,
      usage: (_req, reply) => (reply.getHeader('x-usage-tokens') === undefined ? undefined : Number(reply.getHeader('x-usage-tokens'))),
    }));
    app.get('/chat', async (req, reply) => {
      const tokens = (req.query as { tokens?: string }).tokens;
      if (tokens !== undefined) reply.header('x-usage-tokens', tokens);
      return { answer: '...' };
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const port = (app.server.address() as { port: number }).port;
      const k = `fy-${name}`;
      assert.equal(await get(port, '/chat?tokens=700', k), 200);
      await eventually(`${name}: 700 used`, async () => (await left(l, k)) === 9300);
      assert.equal(await get(port, '/chat?tokens=100', k), 200);
      await eventually(`${name}: 400 refunded`, async () => (await left(l, k)) === 9200);
    } finally {
      await app.close();
    }
  }
});

test('usage without a function, or with a limiter that cannot report, is refused at construction', () => {
  const noReport = { acquire: viaRedis.acquire.bind(viaRedis), describe: viaRedis.describe.bind(viaRedis) };
  assert.throws(() => expressRateLimit({ limiter: noReport, policy: 'tokens', key: () => 'k', usage: () => 1 }), RateLimitError);
  assert.throws(() => expressRateLimit({ limiter: viaRedis, policy: 'tokens', key: () => 'k', usage: 5 as never }), RateLimitError);
});
