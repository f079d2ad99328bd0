'use strict';
// Peer benchmark: rate-limiter-flexible's RateLimiterRedis over one ioredis connection,
// against a Redis the caller started (REDIS_PORT, REDIS_HOST). Workloads of bench/peers/README.md:
//   node redis.js hot    remote.c<N>.hot    1 key, N decisions in flight (closed loop), allow limit
//   node redis.js keys   remote.c<N>.100k   NKEYS keys round-robin, otherwise the same
//   node redis.js exact  exact.10of200      limit 10 per 60 s, 200 concurrent consume() on one key
// Env: REDIS_PORT (required), REDIS_HOST (127.0.0.1), CONC = N (50), WARMUP_S (1), MEASURE_S (3),
//      NKEYS (100000), SERVER_PIDS ("pid ..." whose CPU use is reported as server_cpu),
//      PEER_AUTOPIPELINE (1: ioredis enableAutoPipelining; the peer is then named
//      node-rlf-redis-autopipe).
// Invariant: ops counts the consume() calls that resolved inside the measured window, and every
// latency sample is one of those, so decisions_per_s, p50_us and p99_us describe the same calls.
const Redis = require('ioredis');
const { RateLimiterRedis } = require('rate-limiter-flexible');
const {
  ALLOW_POINTS, ALLOW_WINDOW_S, settings, keySet, emitter, cpuSeconds, percentile, nowNs, sleep,
} = require('./common');

const PEER = process.env.PEER_AUTOPIPELINE === '1' ? 'node-rlf-redis-autopipe' : 'node-rlf-redis';
const emit = emitter(PEER);

function config() {
  if (!process.env.REDIS_PORT) throw new Error('REDIS_PORT is required (a Redis you started)');
  const port = Number(process.env.REDIS_PORT);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new Error(`REDIS_PORT must be a TCP port, got '${process.env.REDIS_PORT}'`);
  }
  const conc = Number(process.env.CONC || 50);
  if (!Number.isInteger(conc) || conc < 1 || conc > 10000) {
    throw new Error(`CONC must be an integer in 1..10000, got '${process.env.CONC}'`);
  }
  const serverPids = (process.env.SERVER_PIDS || '').split(/\s+/).filter(Boolean);
  return { host: process.env.REDIS_HOST || '127.0.0.1', port, conc, serverPids };
}

// Every run gets its own key prefix, so runs never see each other's counters.
const runPrefix = `peer${process.pid}x${Date.now()}`;

async function throughput(client, cfg, mode) {
  const keys = keySet(mode);
  const workload = `remote.c${cfg.conc}.${mode === 'hot' ? 'hot' : '100k'}`;
  const limiter = new RateLimiterRedis({
    storeClient: client, points: ALLOW_POINTS, duration: ALLOW_WINDOW_S, keyPrefix: runPrefix,
  });

  // Warm-up, part 1: one pass over the key set with the workload's concurrency (creates every key).
  let fillNext = 0;
  const fill = async () => {
    while (fillNext < keys.length) await limiter.consume(keys[fillNext++]);
  };
  await Promise.all(Array.from({ length: Math.min(cfg.conc, keys.length) }, fill));

  // Closed loop: cfg.conc workers, each starts its next decision when the previous one resolved.
  let next = 0;
  let measuring = false;
  let stopping = false;
  let ops = 0;
  let denied = 0;
  let errors = 0;
  const samples = new Float64Array(Math.ceil(settings.measureS * 2e6));
  let nsamples = 0;
  const worker = async () => {
    while (!stopping) {
      const key = keys[next];
      next = next + 1 === keys.length ? 0 : next + 1;
      const t0 = nowNs();
      try {
        await limiter.consume(key);
      } catch (e) {
        if (e instanceof Error) errors++; else denied++;   // a denial rejects with a RateLimiterRes
      }
      if (measuring) {   // completions inside the measured window; latency of those same ones
        ops++;
        if (nsamples < samples.length) samples[nsamples++] = Number(nowNs() - t0) / 1e3;
      }
    }
  };
  const workers = Array.from({ length: cfg.conc }, worker);
  await sleep(settings.warmupS * 1000);   // warm-up, part 2

  const srv0 = cfg.serverPids.length ? cpuSeconds(cfg.serverPids) : 0;
  const cli0 = process.cpuUsage();
  const t0 = nowNs();
  measuring = true;
  await sleep(settings.measureS * 1000);
  measuring = false;
  const seconds = Number(nowNs() - t0) / 1e9;
  const measuredOps = ops;
  const cli = process.cpuUsage(cli0);
  const srv1 = cfg.serverPids.length ? cpuSeconds(cfg.serverPids) : 0;
  stopping = true;
  await Promise.all(workers);

  const sorted = samples.subarray(0, nsamples).sort();
  const extra = {
    ops: measuredOps, denied, errors, seconds, keys: keys.length, concurrency: cfg.conc,
    p50_us: percentile(sorted, 0.5), p99_us: percentile(sorted, 0.99),
    client_cpu: (cli.user + cli.system) / 1e6 / seconds,
  };
  if (cfg.serverPids.length) extra.server_cpu = (srv1 - srv0) / seconds;
  emit(workload, 'decisions_per_s', measuredOps / seconds, 'ops/s', extra);
  return denied === 0 && errors === 0;
}

async function exact(client) {
  const limiter = new RateLimiterRedis({
    storeClient: client, points: 10, duration: 60, keyPrefix: `${runPrefix}exact`,
  });
  const results = await Promise.allSettled(Array.from({ length: 200 }, () => limiter.consume('fresh')));
  const allowed = results.filter((r) => r.status === 'fulfilled').length;
  const errors = results.filter((r) => r.status === 'rejected' && r.reason instanceof Error).length;
  emit('exact.10of200', 'allowed', allowed, 'count', { expected: 10, requests: 200, errors });
  return allowed === 10 && errors === 0;
}

async function main() {
  const mode = process.argv[2];
  if (!['hot', 'keys', 'exact'].includes(mode) || process.argv.length !== 3) {
    process.stderr.write('usage: REDIS_PORT=P node redis.js hot|keys|exact\n');
    return 2;
  }
  const cfg = config();
  // One connection, ioredis defaults (no auto-pipelining unless PEER_AUTOPIPELINE=1: ioredis'
  // enableAutoPipelining, which sends the commands of one event-loop tick in one write);
  // fail fast if Redis is not there.
  const client = new Redis({
    host: cfg.host, port: cfg.port, lazyConnect: true, maxRetriesPerRequest: 1,
    retryStrategy: () => null, enableAutoPipelining: process.env.PEER_AUTOPIPELINE === '1',
  });
  await client.connect();
  await client.ping();
  try {
    const ok = mode === 'exact' ? await exact(client) : await throughput(client, cfg, mode);
    return ok ? 0 : 1;
  } finally {
    client.disconnect();
  }
}

main().then((code) => process.exit(code), (e) => {
  process.stderr.write(`redis.js: ${e.message}\n`);
  process.exit(1);
});
