// features.test.ts — what users of express-rate-limit expect of the middleware (issue 31), on a
// real Redis (RedisLimiter) and a real ratelimitd: the header sets and problem+json byte for
// byte as ratelimitd sends them, a custom refusal, req.rateLimit in the handler, per-route
// limits and the "10/minute" shorthand, the default key through trusted proxies only, and
// skipSuccessfulRequests / skipFailedRequests refunding after the response.
import { test, before, after } from 'node:test';
import * as assert from 'node:assert/strict';
import * as http from 'http';
import express from 'express';
import Fastify from 'fastify';
import { RateLimitError, RatelimitdLimiter, RedisLimiter, TrustedProxies, clientAddress, expressRateLimit, fastifyRateLimit, makePolicy, parseRate } from '../src';
import { RUN_ID, Started, startRatelimitd, testRedis } from './support';

let redis: Started;
let limiter: RedisLimiter;
const servers: http.Server[] = [];
before(async () => {
  redis = await testRedis();
  limiter = new RedisLimiter({ redis: redis.url, keyPrefix: `rl:feat-${RUN_ID}:`, commandTimeoutMs: 30_000,
    policies: { api: { algorithm: 'sliding_window_log', limit: 3, window: '1000s' }, search: '2/hour', lots: '100/day' } });
});
after(async () => {
  for (const s of servers) { s.closeAllConnections(); s.close(); }
  await limiter.close();
  await redis.stop();
});

interface Answer { status: number; headers: http.IncomingHttpHeaders; body: string }
function get(port: number, path: string, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, headers, timeout: 30_000 }, (res) => {
      let body = '';
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}
function listen(app: express.Express): Promise<number> {
  const server = http.createServer(app);
  servers.push(server);
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
}
const statuses = async (port: number, path: string, n: number, headers: Record<string, string> = {}) => {
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push((await get(port, path, headers)).status);
  return out;
};

test('the "10/minute" shorthand: strict, refused at construction with a clear error', () => {
  assert.deepEqual(parseRate('10/minute'), { algorithm: 'sliding_window_counter', limit: 10, window: '60s' });
  assert.deepEqual(parseRate('100/30s'), { algorithm: 'sliding_window_counter', limit: 100, window: '30s' });
  assert.equal(makePolicy('x', '5/day').windowUs, 86_400_000_000);
  for (const bad of ['10 per minute', '10/minutes', '10/ minute', '0/minute', '10/0s', 'ten/minute', '10/minute ', '10/1w', '/minute']) {
    assert.throws(() => new RedisLimiter({ redis: redis.url, policies: { x: bad } }),
      (e: unknown) => e instanceof RateLimitError && e.code === 'invalid_policy' && e.message.includes('e.g. "10/minute"'), bad);
  }
});

test('header sets and problem+json: byte for byte what ratelimitd sends with the same settings', async () => {
  const d = await startRatelimitd(`store: { type: memory }\nheaders: draft6\nproblem_json: true\npolicies:\n  api: { algorithm: sliding_window_log, limit: 3, window: 1000s }\n`);
  try {
    const viaDaemon = new RatelimitdLimiter({ url: d.url, timeoutMs: 30_000, windows: { api: '1000s' } });
    const app = express();
    app.use(expressRateLimit({ limiter: viaDaemon, policy: 'api', key: () => `hs-${RUN_ID}`, headers: 'draft6', problemJson: true }));
    app.get('/r', (_q, s) => { s.send('ok'); });
    const port = await listen(app);
    const realFetch = globalThis.fetch;
    let seen: Response | null = null;
    globalThis.fetch = async (...a: Parameters<typeof fetch>) => { const r = await realFetch(...a); seen = r.clone(); return r; };
    try {
      for (let i = 0; i < 5; i++) {
        const mine = await get(port, '/r');
        const theirs = seen as unknown as Response;
        for (const h of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset', 'retry-after', 'cache-control', 'ratelimit-policy', 'ratelimit']) {
          assert.equal(mine.headers[h] ?? null, theirs.headers.get(h), `${h} of request ${i}`);
        }
        assert.equal(mine.status, theirs.status);
        if (mine.status === 429) {
          assert.equal(mine.body, await theirs.text());
          assert.match(String(mine.headers['content-type']), /^application\/problem\+json/);
          assert.equal(JSON.parse(mine.body)['violated-policies'][0], 'api');
        }
      }
    } finally {
      globalThis.fetch = realFetch;
    }
  } finally {
    await d.stop();
  }
  for (const [set, present, absent] of [['x-ratelimit', 'x-ratelimit-remaining', 'ratelimit'], ['none', null, 'ratelimit-policy']] as const) {
    const app = express();
    app.use(expressRateLimit({ limiter, policy: 'api', key: () => `set-${set}-${RUN_ID}`, headers: set }));
    app.get('/r', (_q, s) => { s.send('ok'); });
    const port = await listen(app);
    const a = await get(port, '/r');
    if (present) assert.equal(a.headers[present], '2');
    assert.equal(a.headers[absent], undefined);
    for (let i = 0; i < 3; i++) await get(port, '/r');
    const denied = await get(port, '/r');
    assert.equal(denied.status, 429);
    assert.ok(Number(denied.headers['retry-after']) >= 1);
  }
  assert.throws(() => expressRateLimit({ limiter, policy: 'api', headers: 'draft7' as never }), /headers.*ietf, draft6, x-ratelimit, none/);
});

test('a custom refusal: statusCode + message, or a handler; the decision in req.rateLimit', async () => {
  const app = express();
  app.get('/msg', expressRateLimit({ limiter, policy: 'api', key: () => `msg-${RUN_ID}`, statusCode: 503, message: { error: 'slow down' } }),
    (req, res) => { res.json(req.rateLimit); });
  app.get('/text', expressRateLimit({ limiter, policy: 'api', key: () => `text-${RUN_ID}`, message: (_req, info) => `wait ${info.retryAfterMs} ms` }),
    (_q, s) => { s.send('ok'); });
  app.get('/h', expressRateLimit({ limiter, policy: 'api', key: () => `h-${RUN_ID}`, handler: (req, res, info) => { res.status(418).send(`${info.policy} ${info.remaining} ${req.rateLimit?.allowed}`); } }),
    (_q, s) => { s.send('ok'); });
  const port = await listen(app);
  const first = JSON.parse((await get(port, '/msg')).body);
  assert.equal(first.policy, 'api');
  assert.equal(first.key, `msg-${RUN_ID}`);
  assert.equal(first.allowed, true);
  assert.equal(first.remaining, 2);
  assert.equal(first.limit, 3);
  await get(port, '/msg'); await get(port, '/msg');
  const refused = await get(port, '/msg');
  assert.equal(refused.status, 503);
  assert.deepEqual(JSON.parse(refused.body), { error: 'slow down' });
  assert.ok(Number(refused.headers['retry-after']) >= 1, 'Retry-After kept');
  for (let i = 0; i < 3; i++) await get(port, '/text');
  const text = await get(port, '/text');
  assert.equal(text.status, 429);
  assert.match(text.body, /^wait [0-9]+ ms$/);
  assert.match(String(text.headers['content-type']), /^text\/plain/);
  for (let i = 0; i < 3; i++) await get(port, '/h');
  const h = await get(port, '/h');
  assert.equal(h.status, 418);
  assert.equal(h.body, 'api 0 false');
  assert.equal(h.headers['ratelimit-policy'], '"api";q=3;w=1000');
  assert.throws(() => expressRateLimit({ limiter, policy: 'api', statusCode: 200 }), /statusCode/);
});

test('Fastify: per-route limit with the shorthand, req.rateLimit, a custom refusal', async () => {
  const app = Fastify();
  app.get('/search', { onRequest: fastifyRateLimit({ limiter, policy: 'search', key: () => `fy-${RUN_ID}`, statusCode: 503, message: 'busy' }) },
    async (req) => ({ remaining: req.rateLimit?.remaining }));
  app.get('/free', async () => 'free');
  await app.listen({ port: 0, host: '127.0.0.1' });
  try {
    const port = (app.server.address() as { port: number }).port;
    assert.equal((await get(port, '/search')).body, '{"remaining":1}');
    assert.equal((await get(port, '/search')).body, '{"remaining":0}');
    const r = await get(port, '/search');
    assert.equal(r.status, 503);
    assert.equal(r.body, 'busy');
    assert.deepEqual(await statuses(port, '/free', 3), [200, 200, 200]);
  } finally {
    await app.close();
  }
});

test('default key: the client address; X-Forwarded-For believed only from trusted proxies', async () => {
  const t = new TrustedProxies(['127.0.0.0/8', '10.0.0.0/8', '::1']);
  // The walk of ratelimitd's client_ip.cc: from the right, stop at the first untrusted hop.
  assert.equal(clientAddress('127.0.0.1', '203.0.113.9, 10.1.2.3', t), '203.0.113.9');
  assert.equal(clientAddress('::ffff:127.0.0.1', '198.51.100.1, 203.0.113.9, 10.1.2.3', t), '203.0.113.9');
  assert.equal(clientAddress('192.0.2.1', '203.0.113.9', t), '192.0.2.1');
  assert.equal(clientAddress('127.0.0.1', 'garbage, 10.1.2.3', t), '10.1.2.3');
  assert.equal(clientAddress('127.0.0.1', '[2001:db8::1]:443', t), '2001:db8::1');
  assert.equal(clientAddress('127.0.0.1', '203.0.113.9', new TrustedProxies()), '127.0.0.1');
  assert.throws(() => expressRateLimit({ limiter, policy: 'api', trustedProxies: ['10.0.0.0/33'] }), /'10.0.0.0\/33' is not an IP address or CIDR block/);
  assert.throws(() => expressRateLimit({ limiter, policy: 'api', trustedProxies: ['proxy.local'] }), /not an IP address/);

  const trusting = express();
  trusting.use(expressRateLimit({ limiter, policy: 'api', trustedProxies: ['127.0.0.1'] }));
  trusting.get('/', (req, res) => { res.send(req.rateLimit?.key); });
  const port = await listen(trusting);
  const xff = (ip: string) => ({ 'x-forwarded-for': ip });
  assert.equal((await get(port, '/', xff(`198.51.100.${process.pid % 250}`))).body, `198.51.100.${process.pid % 250}`);
  const other = `203.0.113.${process.pid % 250}`;
  assert.deepEqual(await statuses(port, '/', 4, xff(other)), [200, 200, 200, 429], 'one client behind the proxy: its own count');

  const untrusting = express();
  untrusting.use(expressRateLimit({ limiter, policy: 'lots' }));
  untrusting.get('/', (req, res) => { res.send(req.rateLimit?.key); });
  const p2 = await listen(untrusting);
  assert.equal((await get(p2, '/', xff('203.0.113.77'))).body, '127.0.0.1', 'a header from an untrusted peer is ignored');
});

test('skipSuccessfulRequests / skipFailedRequests: the unit is refunded after the response', async () => {
  const app = express();
  app.use(expressRateLimit({ limiter, policy: 'api', key: (req) => `login-${RUN_ID}-${req.path}`, skipSuccessfulRequests: true }));
  app.get('/ok', (_q, s) => { s.send('welcome'); });
  app.get('/bad', (_q, s) => { s.status(401).send('wrong password'); });
  const app2 = express();
  app2.use(expressRateLimit({ limiter, policy: 'api', key: (req) => `skipf-${RUN_ID}-${req.path}`, skipFailedRequests: true }));
  app2.get('/ok', (_q, s) => { s.send('ok'); });
  app2.get('/bad', (_q, s) => { s.status(500).send('oops'); });
  const port = await listen(app);
  const port2 = await listen(app2);
  // The refund is sent once the response has finished; the client's next request may arrive
  // first, so each count is read back from Redis by a later decision, not assumed in between.
  await statuses(port, '/ok', 5);
  await statuses(port, '/bad', 3);
  await statuses(port2, '/ok', 3);
  await statuses(port2, '/bad', 5);
  for (const [key, want] of [[`login-${RUN_ID}-/ok`, 2], [`login-${RUN_ID}-/bad`, -1], [`skipf-${RUN_ID}-/ok`, -1], [`skipf-${RUN_ID}-/bad`, 2]] as const) {
    // A refund in flight lands within the bound of eventually(); want -1: nothing is refunded (a denial now).
    const deadline = Date.now() + 30_000;
    let r: number;
    for (;;) {
      const d = await limiter.acquire('api', key, { cost: 1 });
      r = d.allowed ? d.remaining : -1;
      if (d.allowed) await limiter.report('api', key, -1); // the probe gives its unit back
      if (r === want || Date.now() > deadline) break;
      await new Promise((res) => setTimeout(res, 50));
    }
    assert.equal(r, want, key);
  }
  assert.throws(() => expressRateLimit({ limiter: { acquire: limiter.acquire.bind(limiter), describe: limiter.describe.bind(limiter) }, policy: 'api', skipFailedRequests: true }), /report\(\)/);
});
