// cluster.test.ts — RedisLimiter on a real Redis Cluster (three masters, test/support.ts
// startCluster; issue 31): the hash slot the client computes is Redis' own; 200 acquires with 50
// in flight on a limit of 10 admit exactly 10 on each of many keys spread over every master at
// once (so batches are cut per slot); and a key's slot migrated from one master to another under
// load (MIGRATING/IMPORTING, the keys moved mid-round, then the slot handed over: ASK, then
// MOVED) keeps an exact count — 350 of 600 per policy, no decision answered by the failure policy.
import { test, before, after } from 'node:test';
import * as assert from 'node:assert/strict';
import Redis, { Cluster } from 'ioredis';
import { RedisLimiter } from '../src';
import { slotOf } from '../src/cluster';
import { RUN_ID, StartedCluster, awaitWindowRoom, inFlight, startCluster } from './support';

let cluster: StartedCluster;
const limiters: RedisLimiter[] = [];
const nodes: Redis[] = [];
before(async () => {
  cluster = await startCluster();
  for (const port of cluster.ports) nodes.push(new Redis(port, '127.0.0.1', { maxRetriesPerRequest: 1 }));
});
after(async () => {
  for (const l of limiters) await l.close();
  for (const n of nodes) n.disconnect();
  await cluster.stop();
});

function limiter(prefix: string, policies: ConstructorParameters<typeof RedisLimiter>[0]['policies']): RedisLimiter {
  // 30 s: a hang guard on a loaded machine, not a claim on speed.
  const l = new RedisLimiter({ redis: cluster.url, keyPrefix: prefix, policies, onFailure: 'closed', commandTimeoutMs: 30_000 });
  limiters.push(l);
  return l;
}

// The master (index into cluster.ports) that owns `slot` now.
async function ownerOf(slot: number): Promise<number> {
  const ranges = (await nodes[0].call('CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
  for (const [lo, hi, [, port]] of ranges) if (slot >= lo && slot <= hi) return cluster.ports.indexOf(Number(port));
  throw new Error(`no owner for slot ${slot}`);
}

test('the hash slot is the one Redis computes', async () => {
  const keys = ['rl:{user-1}:api', 'rl:{}:x', 'no-tag', '{a}{b}', 'rl:{ключ ✓}:p#log', 'rl:{%7Bx%7D}:p', 'x{}{y}', 'x{y'];
  for (let i = 0; i < 50; i++) keys.push(`rl:{k${i * 7919}}:api`);
  for (const k of keys) assert.equal(slotOf(k), Number(await nodes[0].call('CLUSTER', 'KEYSLOT', k)), k);
});

test('exactly 10 of 200 on each of 30 keys over every master at once', async () => {
  await awaitWindowRoom(3_600_000_000, 60_000);
  const l = limiter(`rl-race-${RUN_ID}:`, { api: { algorithm: 'fixed_window', limit: 10, window: '1h' } });
  const keys = Array.from({ length: 30 }, (_, i) => `user-${i}`);
  const owners = new Set(await Promise.all(keys.map((k) => ownerOf(slotOf(`rl-race-${RUN_ID}:{${k}}:api`)))));
  assert.equal(owners.size, 3, 'the keys should land on every master');
  const calls = keys.flatMap((k) => Array.from({ length: 200 }, () => k));
  const decisions = await inFlight(calls, 50 * keys.length, (k) => l.acquire('api', k));
  for (const k of keys) {
    const mine = decisions.filter((_, i) => calls[i] === k);
    assert.equal(mine.filter((d) => d.allowed).length, 10, k);
  }
  assert.equal(l.failures, 0);
});

test("an app's own ioredis Cluster, used the moment it is made", async () => {
  const own = new Cluster(cluster.ports.map((port) => ({ host: '127.0.0.1', port })));
  try {
    const l = new RedisLimiter({ redis: own, keyPrefix: `rl-own-${RUN_ID}:`, onFailure: 'closed', commandTimeoutMs: 30_000,
      policies: { api: { algorithm: 'token_bucket', rate: 1e-6, burst: 3 } } });
    const ds = await Promise.all(Array.from({ length: 5 }, () => l.acquire('api', 'k')));
    assert.equal(ds.filter((d) => d.allowed).length, 3);
    assert.equal(l.failures, 0);
  } finally {
    own.disconnect();
  }
});

test('a slot migrated under load keeps an exact count (ASK, then MOVED)', async () => {
  const prefix = `rl-move-${RUN_ID}:`;
  const policies = {
    fw: { algorithm: 'fixed_window' as const, limit: 350, window: '1h' },
    swl: { algorithm: 'sliding_window_log' as const, limit: 350, window: '60s' },
    tb: { algorithm: 'token_bucket' as const, rate: 1e-6, burst: 350 },
  };
  const l = limiter(prefix, policies);
  // A key on master 0, to move to master 1.
  let key = '';
  for (let i = 0; key === ''; i++) if ((await ownerOf(slotOf(`${prefix}{moving-${i}}:fw`))) === 0) key = `moving-${i}`;
  const slot = slotOf(`${prefix}{${key}}:fw`);
  const [src, dst, third] = nodes;
  const fromId = String(await src.call('CLUSTER', 'MYID'));
  const toId = String(await dst.call('CLUSTER', 'MYID'));
  const allowed: Record<string, number> = { fw: 0, swl: 0, tb: 0 };
  const round = async () => {
    const calls = Object.keys(policies).flatMap((p) => Array.from({ length: 100 }, () => p));
    const ds = await inFlight(calls, 50, (p) => l.acquire(p, key));
    ds.forEach((d, i) => { if (d.allowed) allowed[calls[i]]++; });
  };
  await awaitWindowRoom(3_600_000_000, 60_000);
  await round(); // 1: before
  await dst.call('CLUSTER', 'SETSLOT', slot, 'IMPORTING', fromId);
  await src.call('CLUSTER', 'SETSLOT', slot, 'MIGRATING', toId);
  await round(); // 2: migrating, the keys still on the source
  const keys = (await src.call('CLUSTER', 'GETKEYSINSLOT', slot, 1000)) as string[];
  assert.ok(keys.length > 0);
  await Promise.all([round(), src.call('MIGRATE', '127.0.0.1', cluster.ports[1], '', 0, 5000, 'KEYS', ...keys)]); // 3
  await round(); // 4: the keys on the target, the slot not yet: ASK
  await Promise.all([round(), (async () => { // 5: the slot handed over while decisions run
    for (const n of [dst, src, third]) await n.call('CLUSTER', 'SETSLOT', slot, 'NODE', toId);
  })()]);
  await round(); // 6: after: MOVED, then the target
  assert.equal(await ownerOf(slot), 1);
  assert.deepEqual(allowed, { fw: 350, swl: 350, tb: 350 });
  assert.equal(l.failures, 0);
});
