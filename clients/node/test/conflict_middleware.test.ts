// conflict_middleware.test.ts — the middleware facing two definitions of one policy name on one
// key (issue 31 defect 8; the decisions themselves: conflict.test.ts), on real Redis and a real
// ratelimitd sharing it: a policy_conflict is the app's configuration error, so the rate and the
// concurrency middleware answer it as the limiter failing — 'open' passes the request, 'closed'
// answers what a store failure answers — with an error naming the policy, counted in the
// limiter's failures, never a 429 of its own.
import { test, before, after } from 'node:test';
import * as assert from 'node:assert/strict';
import * as http from 'http';
import express from 'express';
import { FailurePolicy, RatelimitdLimiter, RedisLimiter, expressConcurrencyLimit, expressRateLimit } from '../src';
import { RUN_ID, Started, freePort, startRatelimitd, testRedis } from './support';

const PREFIX = `rl:node-conflict-mw-${RUN_ID}:`;
const FIXED = { api: { algorithm: 'fixed_window', limit: 10, window: '60s' } } as const;
const BUCKET = { api: { algorithm: 'token_bucket', rate: 10 / 60, burst: 10 } } as const;
const YAML = (redisUrl: string) => `store: { type: redis, url: "${redisUrl}", key_prefix: "${PREFIX}", on_failure: closed, command_timeout: 30s }
policies:
  api: { algorithm: sliding_window_log, limit: 10, window: 60s }
  db:  { algorithm: concurrency, limit: 2, lease_ttl: 60s }
`;

let redis: Started;
let daemon: Started;
const limiters: RedisLimiter[] = [];
const servers: http.Server[] = [];
before(async () => {
  redis = await testRedis();
  daemon = await startRatelimitd(YAML(redis.url));
});
after(async () => {
  for (const s of servers) { s.closeAllConnections(); s.close(); }
  for (const l of limiters) await l.close();
  await daemon.stop();
  await redis.stop();
});

function viaRedis(policies: ConstructorParameters<typeof RedisLimiter>[0]['policies'], onFailure: FailurePolicy = 'closed', url = redis.url, timeoutMs = 30_000): RedisLimiter {
  const l = new RedisLimiter({ redis: url, keyPrefix: PREFIX, policies, onFailure, commandTimeoutMs: timeoutMs });
  limiters.push(l);
  return l;
}

/** `fn` with console.error collected (the middleware's log of a conflict). */
async function capturingErrors<T>(fn: () => Promise<T>): Promise<{ value: T; logged: string[] }> {
  const logged: string[] = [];
  const saved = console.error;
  console.error = (...args: unknown[]) => { logged.push(args.map(String).join(' ')); };
  try {
    return { value: await fn(), logged };
  } finally {
    console.error = saved;
  }
}

interface Answer { status: number; headers: http.IncomingHttpHeaders; body: string }
function get(port: number): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', timeout: 30_000 }, (res) => {
      let body = '';
      res.on('data', (c) => { body += c; });
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

async function app(use: express.RequestHandler): Promise<number> {
  const a = express();
  a.use(use);
  a.get('/', (_req, res) => { res.send('handled'); });
  const server = http.createServer(a);
  servers.push(server);
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
}

test('middleware: a policy_conflict is answered by the failure policy (open passes, closed as a store failure), logged naming the policy, never a 429 of its own', async () => {
  const key = `mw-${RUN_ID}`;
  assert.equal((await viaRedis(FIXED).acquire('api', key)).allowed, true); // the other definition's live state
  const opened = viaRedis(BUCKET, 'open');
  const open = await app(expressRateLimit({ limiter: opened, policy: 'api', key: () => key }));
  const passed = await capturingErrors(() => get(open));
  assert.equal(passed.value.status, 200);
  assert.equal(passed.value.body, 'handled');
  assert.ok(passed.logged.some((l) => l.includes("'api'") && l.includes('policy_conflict')), passed.logged.join('\n'));
  assert.equal(opened.failures, 1); // counted as the limiter failing, as Go and Java count it

  const closedLimiter = viaRedis(BUCKET, 'closed');
  const closed = await app(expressRateLimit({ limiter: closedLimiter, policy: 'api', key: () => key }));
  const dead = await app(expressRateLimit({ limiter: viaRedis(BUCKET, 'closed', `redis://127.0.0.1:${await freePort()}/0`, 300), policy: 'api', key: () => key }));
  const refused = await capturingErrors(() => get(closed));
  const storeDown = await get(dead);
  assert.equal(refused.value.status, storeDown.status);
  assert.equal(refused.value.body, storeDown.body);
  assert.equal(refused.value.headers['retry-after'], storeDown.headers['retry-after']);
  assert.equal(refused.value.headers['retry-after'], '1'); // the failure policy's 1 s, not the conflict's TTL
  assert.ok(refused.logged.some((l) => l.includes("'api'")), refused.logged.join('\n'));
  assert.equal(closedLimiter.failures, 1);
});

test('lease middleware: a conflicting concurrency key is answered by the failure policy, not a 429', async () => {
  const key = `lease-mw-${RUN_ID}`;
  assert.equal((await viaRedis({ db: { algorithm: 'fixed_window', limit: 10, window: '60s' } }).acquire('db', key)).allowed, true);
  for (const onFailure of ['open', 'closed'] as const) {
    const limiter = new RatelimitdLimiter({ url: daemon.url, timeoutMs: 30_000, onFailure });
    const port = await app(expressConcurrencyLimit({ limiter, policy: 'db', key: () => key }));
    const a = await capturingErrors(() => get(port));
    assert.ok(a.logged.some((l) => l.includes("'db'")), a.logged.join('\n'));
    assert.equal(limiter.failures, 1, onFailure);
    if (onFailure === 'open') {
      assert.equal(a.value.status, 200);
      assert.equal(a.value.body, 'handled');
    } else {
      assert.equal(JSON.parse(a.value.body).allowed, false);
      assert.equal(a.value.headers['retry-after'], '1');
    }
  }
});

