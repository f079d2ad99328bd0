// conflict.test.ts — issue 31 defect 8: two definitions of one policy name on one key. Before,
// each algorithm read its own fields of the shared state (the repro admitted 21 against a
// limit of 10); now the second definition's calls answer policy_conflict and count nothing, on
// the Redis back-end (reason 6 from the function library) and through ratelimitd (409).
import { test, before, after } from 'node:test';
import * as assert from 'node:assert/strict';
import { RatelimitdLimiter, RedisLimiter } from '../src';
import { RUN_ID, Started, startRatelimitd, testRedis } from './support';

let redis: Started;
before(async () => { redis = await testRedis(); });
after(async () => { await redis.stop(); });

const BUCKET = { api: { algorithm: 'token_bucket', rate: 0.1, burst: 10 }, db: { algorithm: 'sliding_window_counter', limit: 5, window: '60s' } } as const;

test('two definitions of one name never share a count', async () => {
  const prefix = `conflict-${RUN_ID}-node:`;
  const window = new RedisLimiter({ redis: redis.url, keyPrefix: prefix, onFailure: 'closed', commandTimeoutMs: 5000,
    policies: { api: { algorithm: 'fixed_window', limit: 10, window: '60s' } } });
  const bucket = new RedisLimiter({ redis: redis.url, keyPrefix: prefix, onFailure: 'closed', commandTimeoutMs: 5000, policies: BUCKET });
  let admitted = 0, conflicts = 0;
  for (let i = 0; i < 100; i++) {
    const d = await (i % 2 === 1 ? bucket : window).acquire('api', 'user-1');
    if (d.allowed) admitted++;
    if (d.reason === 'policy_conflict') {
      conflicts++;
      assert.ok(i % 2 === 1 && !d.allowed && d.remaining === 0, JSON.stringify(d));
      assert.ok(d.retryAfterUs > 0 && d.retryAfterUs <= 60_000_000, JSON.stringify(d));
    }
  }
  assert.deepEqual([admitted, conflicts], [10, 50]);
  await window.close();
  await bucket.close();
});

test('ratelimitd answers a conflict as a decision, on leases too', async () => {
  const prefix = `conflictd-${RUN_ID}-node:`;
  const daemon = await startRatelimitd(`store: { type: redis, url: "${redis.url}", key_prefix: "${prefix}" }\npolicies:\n` +
    '  api: { algorithm: fixed_window, limit: 10, window: 60s }\n  db: { algorithm: concurrency, limit: 5, lease_ttl: 60s }\n');
  try {
    const other = new RedisLimiter({ redis: redis.url, keyPrefix: prefix, onFailure: 'closed', commandTimeoutMs: 5000, policies: BUCKET });
    assert.ok((await other.acquire('api', 'k')).allowed);
    assert.ok((await other.acquire('db', 'k')).allowed);
    const l = new RatelimitdLimiter({ url: daemon.url, timeoutMs: 5000, onFailure: 'closed' });
    const d = await l.acquire('api', 'k');
    assert.deepEqual([d.allowed, d.reason], [false, 'policy_conflict'], JSON.stringify(d));
    assert.ok(d.retryAfterUs > 0 && d.retryAfterUs <= 11_000_000, JSON.stringify(d));
    const lease = await l.acquireLease('db', 'k');
    assert.deepEqual([lease.allowed, lease.reason], [false, 'policy_conflict'], JSON.stringify(lease));
    assert.equal((await other.peek('api', 'k')).remaining, 8);  // the bucket's own count: 10 - 1 - 1
    await other.close();
  } finally {
    await daemon.stop();
  }
});
