'use strict';
// Peer benchmark: rate-limiter-flexible's RateLimiterMemory, in process, one thread.
// Workloads of bench/peers/README.md:
//   node memory.js hot               inproc.hot    1 key, one awaited consume() at a time
//   node memory.js keys              inproc.100k   NKEYS keys round-robin, otherwise the same
//   node --expose-gc memory.js mem   inproc.mem1m  heap and RSS bytes per key over MEM_KEYS keys
// Env: WARMUP_S (1), MEASURE_S (3), NKEYS (100000), MEM_KEYS (1000000).
// Invariant: the clock is read once per batch of 1024 decisions, so reading it costs nothing
// measurable beside the decisions themselves.
const { RateLimiterMemory } = require('rate-limiter-flexible');
const {
  ALLOW_POINTS, ALLOW_WINDOW_S, settings, keySet, emitter, nowNs,
} = require('./common');

const PEER = 'node-rlf-memory';
const emit = emitter(PEER);
const BATCH = 1024;

// One consume() awaited at a time (the per-request path of a server) for at least `seconds`.
async function loop(limiter, keys, seconds, start) {
  let i = start;
  let ops = 0;
  let denied = 0;
  const t0 = nowNs();
  const limit = BigInt(Math.round(seconds * 1e9));
  for (;;) {
    for (let b = 0; b < BATCH; b++) {
      try {
        await limiter.consume(keys[i]);
      } catch (e) {
        if (e instanceof Error) throw e;
        denied++;
      }
      i = i + 1 === keys.length ? 0 : i + 1;
    }
    ops += BATCH;
    const elapsed = nowNs() - t0;
    if (elapsed >= limit) return { ops, denied, seconds: Number(elapsed) / 1e9, next: i };
  }
}

async function throughput(mode) {
  const keys = keySet(mode);
  const limiter = new RateLimiterMemory({ points: ALLOW_POINTS, duration: ALLOW_WINDOW_S });
  for (const k of keys) await limiter.consume(k);              // warm-up: create every key
  const warm = await loop(limiter, keys, settings.warmupS, 0);
  const r = await loop(limiter, keys, settings.measureS, warm.next);
  emit(mode === 'hot' ? 'inproc.hot' : 'inproc.100k', 'decisions_per_s', r.ops / r.seconds, 'ops/s',
    { ops: r.ops, denied: r.denied, seconds: r.seconds, keys: keys.length });
  return r.denied === 0;
}

async function memory() {
  if (typeof global.gc !== 'function') throw new Error('run with node --expose-gc');
  const n = Number(process.env.MEM_KEYS || 1000000);
  const limiter = new RateLimiterMemory({ points: ALLOW_POINTS, duration: ALLOW_WINDOW_S });
  await limiter.consume('warm');
  await limiter.delete('warm');
  const fullGc = () => { global.gc(); global.gc(); };
  fullGc();
  const before = process.memoryUsage();
  // Keys are built on the fly and not kept here: only what the limiter retains is counted.
  for (let i = 0; i < n; i++) await limiter.consume('k' + i);
  fullGc();
  const after = process.memoryUsage();
  emit('inproc.mem1m', 'heap_bytes_per_key', (after.heapUsed - before.heapUsed) / n, 'B/key',
    { keys: n, heap_before: before.heapUsed, heap_after: after.heapUsed });
  emit('inproc.mem1m', 'rss_bytes_per_key', (after.rss - before.rss) / n, 'B/key',
    { keys: n, rss_before: before.rss, rss_after: after.rss });
  // Read the limiter after the measurement so it cannot be collected before it.
  return (await limiter.get('k0')) !== null;
}

async function main() {
  const mode = process.argv[2];
  if (mode === 'hot' || mode === 'keys') return (await throughput(mode)) ? 0 : 1;
  if (mode === 'mem') return (await memory()) ? 0 : 1;
  process.stderr.write('usage: node memory.js hot|keys  |  node --expose-gc memory.js mem\n');
  return 2;
}

main().then((code) => process.exit(code), (e) => {
  process.stderr.write(`memory.js: ${e.message}\n`);
  process.exit(1);
});
