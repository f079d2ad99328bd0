// resp.test.ts — ioredis as a client of ratelimitd's Redis protocol (resp_listen, issue 32):
// ratelimitd's own acquire called with redis.call('RL.ACQUIRE') shares one count with HTTP
// callers, and redis-cell's CL.THROTTLE answers its five integers. No code of this package is
// involved: any Redis client is a ratelimitd client; this pins that down for Node's, with
// ioredis's defaults (its ready check sends INFO).
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import Redis from 'ioredis';
import { awaitWindowRoom, freePort, startRatelimitd } from './support';

async function httpAcquire(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}/v1/acquire`, { method: 'POST', body: JSON.stringify({ key: 'shared', policy: 'api' }) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** RESP2's flat array of name, value pairs as an object. */
function fields(reply: unknown): Record<string, unknown> {
  const flat = reply as unknown[];
  const out: Record<string, unknown> = {};
  for (let i = 0; i < flat.length; i += 2) out[String(flat[i])] = flat[i + 1];
  return out;
}

test('ioredis calls ratelimitd acquire over RESP, one count with HTTP callers', async () => {
  const resp = await freePort();
  await awaitWindowRoom(3600e6, 60_000);
  const d = await startRatelimitd(`resp_listen: 127.0.0.1:${resp}\npolicies:\n  api: {algorithm: fixed_window, limit: 4, window: 1h}\n`);
  const r = new Redis({ host: '127.0.0.1', port: resp, maxRetriesPerRequest: 1, commandTimeout: 10_000 });
  try {
    const remaining: unknown[] = [];
    for (let i = 0; i < 4; i++) {
      if (i % 2 === 0) {
        const f = fields(await r.call('RL.ACQUIRE', 'shared', 'api'));
        assert.equal(f.allowed, 1, JSON.stringify(f));
        remaining.push(f.remaining);
      } else {
        const { status, body } = await httpAcquire(d.url);
        assert.equal(status, 200, JSON.stringify(body));
        remaining.push(body.remaining);
      }
    }
    assert.deepEqual(remaining, [3, 2, 1, 0]);
    assert.equal(fields(await r.call('RL.ACQUIRE', 'shared', 'api')).allowed, 0);
    assert.equal((await httpAcquire(d.url)).status, 429);
    assert.deepEqual(await r.call('CL.THROTTLE', 'user123', '15', '30', '60', '1'), [0, 16, 15, -1, 2]);
    await assert.rejects(r.call('RL.ACQUIRE', 'k', 'nope'), /unknown_policy: unknown policy 'nope'/);
  } finally {
    r.disconnect();
    await d.stop();
  }
});
