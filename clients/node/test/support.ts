// support.ts — what the tests start: a throwaway redis-server and a real ratelimitd (the
// project's build), on free loopback ports, each stopped by pid; every wait bounded; each dies
// with this process however it dies (dyingWithUs).
// Environment: RATELIMIT_TEST_REDIS_URL (a Redis to share; else one is started),
// RATELIMIT_BIN_DIR (ratelimitd), RATELIMIT_REDIS_LIBRARY (the library file or its directory),
// RATELIMIT_VECTORS_DIR (tests/vectors).
import { ChildProcess, SpawnOptions, spawn } from 'child_process';
import * as fs from 'fs';
import * as net from 'net';
import * as os from 'os';
import * as path from 'path';
import Redis from 'ioredis';
import { PolicySpec, RatelimitdLimiter, RedisLimiter } from '../src';

const SOURCE = path.resolve(__dirname, '..', '..', '..', '..');
export const VECTORS_DIR = process.env.RATELIMIT_VECTORS_DIR ?? path.join(SOURCE, 'tests', 'vectors');
export const CONFORMANCE_DIR = process.env.RATELIMIT_CONFORMANCE_DIR ?? path.join(SOURCE, 'clients', 'conformance');
export const BIN_DIR = process.env.RATELIMIT_BIN_DIR ?? path.join(SOURCE, 'build', 'bin');
export const RUN_ID = `${process.pid}-${Date.now()}`;

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export async function waitPort(port: number, proc: ChildProcess, what: string, ms = 10000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (proc.exitCode !== null) throw new Error(`${what} exited with ${proc.exitCode}`);
    const ok = await new Promise<boolean>((resolve) => {
      const c = net.connect(port, '127.0.0.1', () => { c.destroy(); resolve(true); });
      c.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${what} did not listen on ${port} within ${ms} ms`);
}

/** `cmd args` as a child that the kernel SIGKILLs when this process dies, however it dies (a
 *  runner killed by a timeout runs no `after` hook, and an orphaned redis-server or ratelimitd
 *  holds its port and files): util-linux's setpriv sets PR_SET_PDEATHSIG and execs the server,
 *  so the pid we stop is the server's own. The signal follows the *thread* that forked; Node
 *  forks from its main thread, which lives as long as the process. */
function dyingWithUs(cmd: string, args: string[], options: SpawnOptions): ChildProcess {
  return spawn('setpriv', ['--pdeathsig', 'KILL', '--', cmd, ...args], options);
}

export interface Started { url: string; port: number; stop: () => Promise<void>; proc: ChildProcess }

async function stop(proc: ChildProcess): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  proc.kill('SIGTERM');
  const t = setTimeout(() => proc.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(t);
}

/** A redis-server of our own (for tests that stop it). */
export async function startRedis(): Promise<Started> {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rl-node-redis-'));
  const proc = dyingWithUs('redis-server', ['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' });
  await waitPort(port, proc, 'redis-server');
  return { url: `redis://127.0.0.1:${port}/0`, port, proc, stop: async () => { await stop(proc); fs.rmSync(dir, { recursive: true, force: true }); } };
}

/** A free port whose cluster bus port (+10000) is free too. */
async function freeClusterPort(): Promise<number> {
  for (;;) {
    const port = await freePort();
    if (port > 55535) continue;
    const busFree = await new Promise<boolean>((resolve) => {
      const s = net.createServer();
      s.once('error', () => resolve(false));
      s.listen(port + 10000, '127.0.0.1', () => s.close(() => resolve(true)));
    });
    if (busFree) return port;
  }
}

export interface StartedCluster { url: string; ports: number[]; stop: () => Promise<void> }

/** A Redis Cluster of our own: three masters, no replicas (redis-cli --cluster create), each
 *  a redis-server in its own directory, ready when every node says cluster_state:ok. The twin
 *  of tests/support/redis_cluster.h, smaller. */
export async function startCluster(): Promise<StartedCluster> {
  const procs: ChildProcess[] = [];
  const dirs: string[] = [];
  const ports: number[] = [];
  const stopAll = async () => {
    for (const p of procs) await stop(p);
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  };
  try {
    for (let i = 0; i < 3; i++) {
      const port = await freeClusterPort();
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rl-node-cluster-'));
      dirs.push(dir);
      const proc = dyingWithUs('redis-server', ['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no',
        '--dir', dir, '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '5000'], { stdio: 'ignore' });
      procs.push(proc);
      await waitPort(port, proc, 'redis-server (cluster)');
      ports.push(port);
    }
    const create = dyingWithUs('redis-cli', ['--cluster', 'create', ...ports.map((p) => `127.0.0.1:${p}`), '--cluster-replicas', '0', '--cluster-yes'], { stdio: 'ignore' });
    const code = await new Promise<number | null>((r) => create.once('exit', r));
    if (code !== 0) throw new Error(`redis-cli --cluster create exited with ${code}`);
    for (const port of ports) {
      const c = new Redis(port, '127.0.0.1', { lazyConnect: true, maxRetriesPerRequest: 1 });
      await c.connect();
      try {
        await eventually(`cluster_state:ok on ${port}`, async () => String(await c.call('CLUSTER', 'INFO')).includes('cluster_state:ok'), 20_000);
      } finally {
        c.disconnect();
      }
    }
  } catch (e) {
    await stopAll();
    throw e;
  }
  return { url: `redis-cluster://127.0.0.1:${ports[0]},127.0.0.1:${ports[1]}`, ports, stop: stopAll };
}

/** The shared test Redis, or one of our own. */
export async function testRedis(): Promise<Started> {
  const url = process.env.RATELIMIT_TEST_REDIS_URL;
  if (url) return { url, port: Number(new URL(url).port), proc: null as unknown as ChildProcess, stop: async () => {} };
  return startRedis();
}

/** ratelimitd with `yaml` (its `listen:` line is added), stopped by pid. */
export async function startRatelimitd(yaml: string): Promise<Started> {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rl-node-d-'));
  const config = path.join(dir, 'ratelimit.yaml');
  fs.writeFileSync(config, `listen: 127.0.0.1:${port}\n${yaml}`);
  const bin = path.join(BIN_DIR, 'ratelimitd');
  const proc = dyingWithUs(bin, ['--config', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  proc.stderr!.on('data', (b) => { log += b; });
  try {
    await waitPort(port, proc, 'ratelimitd');
  } catch (e) {
    throw new Error(`${(e as Error).message}\n${log}`);
  }
  return { url: `http://127.0.0.1:${port}`, port, proc, stop: async () => { await stop(proc); fs.rmSync(dir, { recursive: true, force: true }); } };
}

/** Runs `fn` over `items` with at most `width` in flight. */
export async function inFlight<T, R>(items: T[], width: number, fn: (t: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
  return out;
}

/** Returns when a `windowUs` window has at least `roomMs` left, sleeping past the boundary
 *  when it lacks it (to 50 ms after it: a known instant, not a guess). fixed_window and
 *  sliding_window_counter count in windows aligned to the Unix epoch on Redis' clock (this
 *  machine's: the tests use loopback Redis), so a test asserting exact counts on the server's
 *  clock flips when a boundary falls mid-count: the count resets or is reweighted. A test calls
 *  it just before it counts, with `roomMs` its own generous bound on how long the counting takes.
 *  The Node twin of tests/support/window_room.h and loopback.await_window_room. */
export async function awaitWindowRoom(windowUs: number, roomMs: number): Promise<void> {
  if (roomMs * 1000 >= windowUs) throw new Error('awaitWindowRoom: room must be below the window');
  const leftMs = (windowUs - ((Date.now() * 1000) % windowUs)) / 1000;
  if (leftMs < roomMs) await new Promise((r) => setTimeout(r, leftMs + 50));
}

/** Resolves when `check` resolves true, polling every 20 ms; rejects after `ms` (a hang guard,
 *  not a claim on speed) with `what`. For what happens after a response was sent (a report on
 *  'finish'), which the client may see before it is done. The twin of testing::eventually. */
export async function eventually(what: string, check: () => Promise<boolean>, ms = 30_000): Promise<void> {
  const end = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    if (Date.now() > end) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A Redis (testRedis), a real ratelimitd on it configured by `yaml(redis.url)`, and a limiter of
 *  each back-end on them (`prefix` and `policies` for the Redis one); `stop` ends all four. The
 *  timeouts (30 s) are hang guards, not claims: a loaded CI machine must not turn into
 *  failure-policy answers. Under 4 CPU hogs the 200-request race through ratelimitd took 4.6 s
 *  end to end (client, app and limiter share the test's process, so a request waits about that
 *  long), against the 5 s these were. */
export interface BackEnds { redis: Started; daemon: Started; viaRedis: RedisLimiter; viaDaemon: RatelimitdLimiter; stop: () => Promise<void> }
export async function startBackEnds(yaml: (redisUrl: string) => string, prefix: string, policies: Record<string, PolicySpec>): Promise<BackEnds> {
  const redis = await testRedis();
  const daemon = await startRatelimitd(yaml(redis.url));
  const viaRedis = new RedisLimiter({ redis: redis.url, keyPrefix: prefix, policies, commandTimeoutMs: 30_000, onFailure: 'closed' });
  const viaDaemon = new RatelimitdLimiter({ url: daemon.url, timeoutMs: 30_000, onFailure: 'closed' });
  return { redis, daemon, viaRedis, viaDaemon, stop: async () => { await viaRedis.close(); await daemon.stop(); await redis.stop(); } };
}
