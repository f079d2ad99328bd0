'use strict';
// bench/clients/node_client.js — the Node client (clients/node, RedisLimiter: FCALL
// rl<version>_batch, batched while calls are in flight) under the workloads of
// bench/peers/node/redis.js, printing the same JSON line, so bench/redis_vs_rlf.sh (CLIENTS=node)
// sets it beside rate-limiter-flexible's RateLimiterRedis on the same Redis in the same run.
//   node node_client.js hot|keys   1 key or NKEYS round-robin, CONC decisions in flight (closed
//                                  loop), fixed_window allow limit 10^9 per 60 s
// Env: REDIS_PORT (required), CONC (50), WARMUP_S, MEASURE_S, NKEYS, SERVER_PIDS (as redis.js),
//      MAX_IN_FLIGHT (the client's maxInFlight; unset = its default),
//      CLIENT_DIST (the compiled client: build/clients/node/dist), RATELIMIT_REDIS_LIBRARY.
const path = require('path');
const { ALLOW_POINTS, settings, keySet, emitter, cpuSeconds, percentile, nowNs, sleep } =
  require('../peers/node/common');

const dist = process.env.CLIENT_DIST || path.join(__dirname, '..', '..', 'build', 'clients', 'node', 'dist');
const { RedisLimiter } = require(dist);
const emit = emitter('node-client');

async function main() {
  const mode = process.argv[2];
  if (!['hot', 'keys'].includes(mode)) throw new Error('usage: REDIS_PORT=P node node_client.js hot|keys');
  const conc = Number(process.env.CONC || 50);
  const serverPids = (process.env.SERVER_PIDS || '').split(/\s+/).filter(Boolean);
  const limiter = new RedisLimiter({
    redis: `redis://127.0.0.1:${process.env.REDIS_PORT}/0`, keyPrefix: `bench${process.pid}x${Date.now()}:`,
    commandTimeoutMs: 5000, maxInFlight: process.env.MAX_IN_FLIGHT ? Number(process.env.MAX_IN_FLIGHT) : undefined, policies: { p: { algorithm: 'fixed_window', limit: ALLOW_POINTS, window: '60s' } },
  });
  await limiter.connect();
  const keys = keySet(mode);
  let fillNext = 0;
  const fill = async () => { while (fillNext < keys.length) await limiter.acquire('p', keys[fillNext++]); };
  await Promise.all(Array.from({ length: Math.min(conc, keys.length) }, fill));

  let next = 0, measuring = false, stopping = false, ops = 0, denied = 0, nsamples = 0;
  const samples = new Float64Array(Math.ceil(settings.measureS * 2e6));
  const worker = async () => {
    while (!stopping) {
      const key = keys[next];
      next = next + 1 === keys.length ? 0 : next + 1;
      const t0 = nowNs();
      const d = await limiter.acquire('p', key);
      if (!d.allowed) denied++;
      if (measuring) {
        ops++;
        if (nsamples < samples.length) samples[nsamples++] = Number(nowNs() - t0) / 1e3;
      }
    }
  };
  const workers = Array.from({ length: conc }, worker);
  await sleep(settings.warmupS * 1000);
  const srv0 = serverPids.length ? cpuSeconds(serverPids) : 0;
  const cli0 = process.cpuUsage();
  const t0 = nowNs();
  measuring = true;
  await sleep(settings.measureS * 1000);
  measuring = false;
  const seconds = Number(nowNs() - t0) / 1e9;
  const measuredOps = ops;
  const cli = process.cpuUsage(cli0);
  const srv1 = serverPids.length ? cpuSeconds(serverPids) : 0;
  stopping = true;
  await Promise.all(workers);
  const sorted = samples.subarray(0, nsamples).sort();
  const extra = {
    ops: measuredOps, denied, errors: limiter.failures, seconds, keys: keys.length, concurrency: conc,
    p50_us: percentile(sorted, 0.5), p99_us: percentile(sorted, 0.99), client_cpu: (cli.user + cli.system) / 1e6 / seconds,
    library: limiter.library.version,
  };
  if (serverPids.length) extra.server_cpu = (srv1 - srv0) / seconds;
  emit(`remote.c${conc}.${mode === 'hot' ? 'hot' : '100k'}`, 'decisions_per_s', measuredOps / seconds, 'ops/s', extra);
  await limiter.close();
  return denied === 0 && limiter.failures === 0 ? 0 : 1;
}

main().then((code) => process.exit(code), (e) => { process.stderr.write(`node_client.js: ${e.message}\n`); process.exit(1); });
