// cluster.ts — what RedisLimiter needs to run on Redis Cluster (issue 31): the hash slot of a
// key (CRC16/XMODEM of its hash tag mod 16384, as Redis computes it), a Cluster client from a
// redis-cluster:// URL (the URL form ratelimitd takes), and the function library loaded on
// every master.
// Why: one FCALL may only touch keys of one slot, and every state key is `prefix{key}:policy`
// (a sliding log's second key `...#log` has the same tag), so a batch is cut per slot and each
// part goes to the master that owns it; ioredis' Cluster follows MOVED and ASK on its own, so a
// slot migrating under load keeps its count (the keys move whole). A function lives on each
// master (FUNCTION LOAD is not routed by key), and a master that lacks it (added later, or
// flushed) answers "Function not found": the caller loads it on every master and retries.
// Invariants: slotOf matches CLUSTER KEYSLOT for every key (test/cluster.test.ts checks it on a
// real cluster); no state here.
import Redis, { Cluster } from 'ioredis';
import { RateLimitError } from './errors';
import { FunctionLibrary, ensureLibrary } from './library';

const TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i << 8;
    for (let k = 0; k < 8; k++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
    t[i] = c;
  }
  return t;
})();

function crc16(bytes: Buffer): number {
  let crc = 0;
  for (const b of bytes) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ b) & 0xff];
  return crc;
}

/** The hash slot of `key`: of the text between its first '{' and the next '}' when that is not
 *  empty, else of the whole key. */
export function slotOf(key: string): number {
  const bytes = Buffer.from(key);
  const open = bytes.indexOf(0x7b);
  if (open >= 0) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) return crc16(bytes.subarray(open + 1, close)) % 16384;
  }
  return crc16(bytes) % 16384;
}

/** True for the URL forms that name a cluster. */
export function isClusterUrl(url: string): boolean {
  return url.startsWith('redis-cluster://') || url.startsWith('rediss-cluster://');
}

/** A Cluster from `redis-cluster://[user:password@]host:port[,host:port...]` (rediss-cluster://
 *  for TLS), with the limiter's bounds: no offline queue, no retries of a command beyond the
 *  redirections the cluster itself asks for. */
export function clusterFromUrl(url: string, timeoutMs: number): Cluster {
  const tls = url.startsWith('rediss-cluster://');
  const rest = url.slice(url.indexOf('://') + 3).replace(/\/\d*$/, '');
  const at = rest.lastIndexOf('@');
  const auth = at >= 0 ? rest.slice(0, at) : '';
  const seeds = (at >= 0 ? rest.slice(at + 1) : rest).split(',').map((hp) => {
    const m = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(hp);
    if (!m) throw new RateLimitError('invalid_policy', `redis-cluster:// URL has a bad node '${hp}' (expected host:port,host:port)`);
    return { host: m[1].replace(/^\[|\]$/g, ''), port: Number(m[2] ?? 6379) };
  });
  const colon = auth.indexOf(':');
  const username = colon >= 0 ? decodeURIComponent(auth.slice(0, colon)) : undefined;
  const password = auth ? decodeURIComponent(colon >= 0 ? auth.slice(colon + 1) : auth) : undefined;
  return new Cluster(seeds, {
    lazyConnect: true,
    enableOfflineQueue: false,
    redisOptions: { commandTimeout: timeoutMs, maxRetriesPerRequest: 0, username, password, tls: tls ? {} : undefined },
  });
}

/** Connects `cluster` if it has not been, then makes sure every master has `lib`. */
export async function ensureLibraryOnMasters(cluster: Cluster, lib: FunctionLibrary, owned: boolean): Promise<void> {
  if (owned && cluster.status === 'wait') await cluster.connect();
  let masters: Redis[] = cluster.nodes('master');
  if (masters.length === 0) {
    // An app's own Cluster, used before it is ready: a keyless command waits for the slot map
    // (its offline queue), after which the masters are known.
    await cluster.ping();
    masters = cluster.nodes('master');
  }
  if (masters.length === 0) throw new RateLimitError('unavailable', 'Redis Cluster: no master known yet');
  await Promise.all(masters.map((m) => ensureLibrary((cmd, ...args) => m.call(cmd, ...args), lib)));
}
