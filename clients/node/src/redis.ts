// redis.ts — the Redis back-end: decisions by the ratelimit function library (FCALL), the same
// keys, arguments and code as ratelimitd's Redis store, so both can share one count.
//
// How: every decision goes through rl<version>_batch (docs/redis-functions.md). Calls are sent
// at once while fewer than `maxInFlight` are outstanding; the ones that arrive meanwhile queue and
// leave together as one batch when a reply comes back (at most 1024 per batch). Redis then runs
// one function call for many decisions and reads the policy's arguments once: at low load a
// decision waits for nothing, at high load Redis stays busy with few, large calls.
// A batch takes at most its share (1 / maxInFlight) of the decisions outstanding, so the calls
// in flight stay of even size: Redis decides one while this process answers another. Without
// that, a lone early decision leaves as a batch of 1 beside a batch of all the rest, and the
// big batch alternates between Redis and this process with one side idle at a time.
// The clock is Redis' own TIME, read once per batch; `nowUs` (conformance tests only) overrides.
// Failures: a connection that is down, no answer within `commandTimeoutMs` or an error reply
// decide by `onFailure` ('open' admits, 'closed' denies for 1 s), counted in `failures`. The
// bound is this client's own timer around the whole decision (library load included), so it
// holds for an ioredis client the caller passed too, whatever that client's options (issue 31
// defect 2: one without commandTimeout left acquire() pending while Redis hung); a flushed library
// ("Function not found") is loaded again and the batch retried once. Bad input throws
// RateLimitError before anything is sent; a library that Redis lacks and this client cannot
// load rejects with RateLimitError('library_missing') naming the versions Redis has.
// Reports (usage known after the fact, docs/usage.md) are op 4 of the same batch: recorded even
// past the limit, a negative cost gives units back; a failed report answers the failure policy's
// decision like any other (reason failed_open / failed_closed: nothing was recorded).
// Redis Cluster (a redis-cluster:// URL or an ioredis Cluster): a batch holds decisions of one
// hash slot only, the library is loaded on every master (cluster.ts).
// Thread-safety: Node is single-threaded; one limiter may serve every request of a process.

import Redis, { Cluster } from 'ioredis';
import { clusterFromUrl, ensureLibraryOnMasters, isClusterUrl, slotOf } from './cluster';
import { Decision, FailurePolicy, decodeAt, failureDecision } from './decision';
import { RateLimitError } from './errors';
import { Reservation, reserve } from './usage';
import { PolicyInfo } from './headers';
import { FunctionLibrary, ensureLibrary, findLibrary } from './library';
import { Policy, PolicySpec, RateShorthand, makePolicy, validateReport, validateRequest } from './policy';

export interface RedisLimiterOptions {
  /** A redis:// URL, a redis-cluster://host:port,host:port URL, or an ioredis client (Redis or
   *  Cluster) the caller owns. */
  redis: string | Redis | Cluster;
  /** Policies by name, as in ratelimitd's config (same name, prefix and Redis = shared counts). */
  policies: Record<string, PolicySpec | RateShorthand>;
  /** Prepended to every key; ratelimitd's default is "rl:". */
  keyPrefix?: string;
  /** What a decision answers when Redis cannot: 'open' (default) admits, 'closed' denies. */
  onFailure?: FailurePolicy;
  /** Bound on one decision, ms (default 250), with the URL form or a client of the caller's. */
  commandTimeoutMs?: number;
  /** The library: its text, a path, or {version} of one already loaded (see library.ts). */
  library?: string | { version: string };
  /** Calls outstanding before decisions queue into a batch (default 4). */
  maxInFlight?: number;
  /** Told about every failure the failure policy answered (for logs and metrics). */
  onError?: (err: Error) => void;
}

export interface DecideOptions {
  cost?: number;
  /** Only check; consume nothing. */
  peek?: boolean;
  /** Conformance tests only: decide at this time (µs) instead of Redis' clock. */
  nowUs?: number;
}

interface Item {
  policy: Policy;
  /** The state key; a sliding log's second key is `${state}#log`. */
  state: string;
  cost: number;
  /** The library's op: 0 acquire, 1 peek, 4 report. */
  op: Op;
  nowUs?: number;
  /** The state key's hash slot (Cluster only; -1 otherwise): one FCALL, one slot. */
  slot: number;
  resolve: (d: Decision) => void;
  reject: (e: Error) => void;
}

const MAX_BATCH = 1024;

/** The library's ops (docs/redis-functions.md): acquire, peek, report. */
type Op = 0 | 1 | 4;
const ACQUIRE: Op = 0, PEEK: Op = 1, REPORT: Op = 4;

/** Conformance tests only: when a report is recorded. */
export interface ReportOptions {
  nowUs?: number;
}

// '%' -> %25, '{' -> %7B, '}' -> %7D: no user key can leave its hash tag (script_codec.cc).
export function escapeKey(key: string): string {
  return key.replace(/[%{}]/g, (c) => (c === '%' ? '%25' : c === '{' ? '%7B' : '%7D'));
}

export class RedisLimiter {
  readonly library: FunctionLibrary;
  readonly policies: ReadonlyMap<string, Policy>;
  /** Decisions answered by the failure policy. */
  failures = 0;
  private readonly redis: Redis | Cluster;
  private readonly cluster: Cluster | null;
  private readonly owned: boolean;
  private readonly prefix: string;
  /** What a decision answers when Redis cannot ('open' admits, 'closed' denies). */
  readonly onFailure: FailurePolicy;
  private readonly maxInFlight: number;
  private readonly timeoutMs: number;
  private readonly onError?: (err: Error) => void;
  private readonly fn: string;
  private queue: Item[] = [];
  private inFlight = 0;
  /** Decisions in the calls in flight. */
  private inFlightItems = 0;
  private loaded: Promise<void> | null = null;

  constructor(options: RedisLimiterOptions) {
    const policies = new Map<string, Policy>();
    for (const [name, spec] of Object.entries(options.policies ?? {})) policies.set(name, makePolicy(name, spec));
    if (policies.size === 0) throw new RateLimitError('invalid_policy', 'at least one policy is required');
    this.policies = policies;
    this.prefix = options.keyPrefix ?? 'rl:';
    if (/[{}]/.test(this.prefix) || Buffer.byteLength(this.prefix) > 128) {
      throw new RateLimitError('invalid_policy', 'keyPrefix must be at most 128 bytes, without { or }');
    }
    this.onFailure = options.onFailure ?? 'open';
    if (this.onFailure !== 'open' && this.onFailure !== 'closed') throw new RateLimitError('invalid_policy', "onFailure must be 'open' or 'closed'");
    this.maxInFlight = Math.max(1, options.maxInFlight ?? 4);
    this.timeoutMs = options.commandTimeoutMs ?? 250;
    if (!Number.isFinite(this.timeoutMs) || this.timeoutMs <= 0) throw new RateLimitError('invalid_policy', `commandTimeoutMs must be a positive number, got ${this.timeoutMs}`);
    this.onError = options.onError;
    this.library = findLibrary(options.library);
    this.fn = `rl${this.library.version}_batch`;
    if (typeof options.redis === 'string' && isClusterUrl(options.redis)) {
      this.redis = clusterFromUrl(options.redis, this.timeoutMs);
      this.redis.on('error', () => {}); // reported per decision through onError
      this.owned = true;
    } else if (typeof options.redis === 'string') {
      this.redis = new Redis(options.redis, {
        commandTimeout: this.timeoutMs,
        maxRetriesPerRequest: 0,
        enableOfflineQueue: false,
        lazyConnect: true,
      });
      this.redis.on('error', () => {}); // reported per decision through onError
      this.owned = true;
    } else {
      this.redis = options.redis;
      this.owned = false;
    }
    this.cluster = this.redis instanceof Cluster ? this.redis : null;
  }

  /** Consumes `cost` (default 1) of `key`'s allowance under `policy` unless it would exceed it. */
  acquire(policy: string, key: string, options: DecideOptions = {}): Promise<Decision> {
    return this.decide(policy, key, options.cost ?? 1, options.peek === true ? PEEK : ACQUIRE, options.nowUs);
  }

  /** What acquire would answer, consuming nothing. */
  peek(policy: string, key: string, options: DecideOptions = {}): Promise<Decision> {
    return this.decide(policy, key, options.cost ?? 1, PEEK, options.nowUs);
  }

  /** Records usage known after the fact (docs/usage.md): `cost` units even past the limit (the
   *  key is then in debt: acquires are refused until the algorithm repays it), or, negative, a
   *  refund of units taken; 0 records nothing. Always allowed, with what is left now. */
  report(policy: string, key: string, cost: number, options: ReportOptions = {}): Promise<Decision> {
    return this.decide(policy, key, cost, REPORT, options.nowUs);
  }

  /** Acquires `estimate` units now, to reconcile with the actual usage after the work
   *  (Reservation.reconcile reports actual − estimate; cancel() gives the estimate back). */
  reserve(policy: string, key: string, estimate: number): Promise<Reservation> {
    return reserve(this, policy, key, estimate);
  }

  /** Forgets `key`'s state under `policy` (its next request starts fresh). */
  async reset(policy: string, key: string): Promise<void> {
    const p = this.policy(policy);
    validateRequest(p, key, 1);
    const state = this.stateKey(p, key);
    await this.ready();
    await this.redis.del(state, `${state}#log`);
  }

  /** The policy named `name`; throws RateLimitError('unknown_policy') for any other name. */
  policy(name: string): Policy {
    const p = this.policies.get(name);
    if (p === undefined) {
      throw new RateLimitError('unknown_policy', `unknown policy '${name}' (configured: ${[...this.policies.keys()].join(', ')})`);
    }
    return p;
  }

  /** The quota and window RateLimit-Policy shows for `policy`. */
  describe(policy: string): PolicyInfo | undefined {
    const p = this.policies.get(policy);
    return p && { name: p.name, quota: p.limit, windowUs: p.windowUs };
  }

  /** Closes the connection if the limiter opened it. */
  async close(): Promise<void> {
    if (this.owned) this.redis.disconnect();
  }

  private stateKey(p: Policy, key: string): string {
    return `${this.prefix}{${NEEDS_ESCAPE.test(key) ? escapeKey(key) : key}}:${p.name}`;
  }

  // Bad input rejects the promise (never a synchronous throw), like every other failure.
  private decide(policyName: string, key: string, cost: number, op: Op, nowUs: number | undefined): Promise<Decision> {
    let policy: Policy;
    try {
      policy = this.policy(policyName);
      if (op === REPORT) validateReport(policy, key, cost);
      else validateRequest(policy, key, cost);
      if (nowUs !== undefined && (!Number.isSafeInteger(nowUs) || nowUs < 0)) {
        throw new RateLimitError('invalid_cost', `nowUs must be a non-negative integer, got ${nowUs}`);
      }
    } catch (e) {
      return Promise.reject(e);
    }
    const state = this.stateKey(policy, key);
    return new Promise<Decision>((resolve, reject) => {
      this.queue.push({ policy, state, cost, op, nowUs, slot: this.cluster ? slotOf(state) : -1, resolve, reject });
      if (this.inFlight < this.maxInFlight) this.flush();
    });
  }

  /** Connects and makes sure Redis has the library (loading it if this client has its text).
   *  Optional: the first decision does it too. Rejects with RateLimitError('library_missing')
   *  when the library is missing and cannot be loaded, or with the connection's error. */
  connect(): Promise<void> {
    return this.ready();
  }

  private ready(): Promise<void> {
    if (this.loaded === null) {
      this.loaded = (async () => {
        if (this.cluster) return ensureLibraryOnMasters(this.cluster, this.library, this.owned);
        const redis = this.redis as Redis;
        if (this.owned && redis.status === 'wait') await redis.connect();
        await ensureLibrary((cmd, ...args) => redis.call(cmd, ...args), this.library);
      })();
      this.loaded.catch(() => { this.loaded = null; }); // try again on the next call
    }
    return this.loaded;
  }

  private flush(): void {
    while (this.queue.length > 0 && this.inFlight < this.maxInFlight) {
      const share = Math.ceil((this.queue.length + this.inFlightItems) / this.maxInFlight);
      const items = this.take(Math.min(MAX_BATCH, share));
      this.inFlight++;
      this.inFlightItems += items.length;
      this.send(items).finally(() => {
        this.inFlight--;
        this.inFlightItems -= items.length;
        this.flush();
      });
    }
  }

  // The next `n` queued decisions; on a cluster, only those of the first one's slot (in order:
  // two decisions on one key keep theirs, as they share the slot).
  private take(n: number): Item[] {
    if (!this.cluster) return this.queue.splice(0, n);
    const slot = this.queue[0].slot;
    const taken: Item[] = [];
    const rest: Item[] = [];
    for (const it of this.queue) (taken.length < n && it.slot === slot ? taken : rest).push(it);
    this.queue = rest;
    return taken;
  }

  // The library (when not yet known loaded) and the FCALL, retried once on a flushed library.
  private async call(argv: string[]): Promise<unknown> {
    await this.ready();
    try {
      return await this.redis.call('FCALL', argv);
    } catch (e) {
      if (!/Function not found/i.test((e as Error).message)) throw e;
      this.loaded = null; // flushed (restart, FUNCTION FLUSH, failover): load and retry once
      await this.ready();
      return await this.redis.call('FCALL', argv);
    }
  }

  // call() or, after timeoutMs, an 'unavailable' error. The command itself is not withdrawn (a
  // client of the caller's may queue it until Redis answers); its late reply is dropped.
  private bounded(argv: string[]): Promise<unknown> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new RateLimitError('unavailable', `no answer from Redis within ${this.timeoutMs} ms`)), this.timeoutMs);
    });
    const work = this.call(argv);
    work.catch(() => {}); // a failure after the deadline is already answered
    return Promise.race([work, late]).finally(() => clearTimeout(timer));
  }

  private async send(items: Item[]): Promise<void> {
    let reply: unknown;
    try {
      reply = await this.bounded(encodeBatch(this.fn, items));
      if (!Array.isArray(reply) || reply.length !== 4 * items.length) {
        throw new RateLimitError('protocol', `unexpected reply from the function library: ${JSON.stringify(reply)}`);
      }
      const decisions = new Array<Decision>(items.length);
      for (let i = 0; i < items.length; i++) decisions[i] = decodeAt(reply, i, items[i].policy.limit);
      for (let i = 0; i < items.length; i++) items[i].resolve(decisions[i]);
    } catch (e) {
      if (e instanceof RateLimitError && e.code === 'library_missing') {
        // A deployment error, not an outage: no failure policy hides it.
        for (const it of items) it.reject(e);
        return;
      }
      this.failures += items.length;
      if (this.onError) this.onError(e as Error);
      for (const it of items) it.resolve(failureDecision(this.onFailure, it.policy.limit));
    }
  }
}

const NEEDS_ESCAPE = /[%{}]/;

// FCALL's arguments for rl<version>_batch (run_batch in src/redis/lua/multi.lua), as one array
// (no per-call spreads): the function, the number of keys, the keys, the number of distinct
// policies, the clock ('-' once, or 't' and a time per item), six arguments per policy, then per
// item its policy's index, with ':<cost>:<op>' unless an acquire of 1 (a report's cost may be
// negative: a refund).
function encodeBatch(fn: string, items: Item[]): string[] {
  let first: Policy | null = null;
  let index: Map<Policy, string> | null = null; // only when the batch mixes policies
  let nkeys = 0;
  let timed = false;
  for (const it of items) {
    nkeys += it.policy.algorithm === 'sliding_window_log' ? 2 : 1;
    if (it.nowUs !== undefined) timed = true;
    if (first === null) first = it.policy;
    else if (it.policy !== first && index === null) index = new Map([[first, '1']]);
    if (index !== null && !index.has(it.policy)) index.set(it.policy, String(index.size + 1));
  }
  const policies = index === null ? [first as Policy] : [...index.keys()];
  const argv: string[] = [fn, String(nkeys)];
  for (const it of items) {
    argv.push(it.state);
    if (it.policy.algorithm === 'sliding_window_log') argv.push(`${it.state}#log`);
  }
  argv.push(String(policies.length), timed ? 't' : '-');
  for (const p of policies) for (const a of p.args) argv.push(a);
  for (const it of items) {
    const p = index === null ? '1' : (index.get(it.policy) as string);
    argv.push(it.cost === 1 && it.op === ACQUIRE ? p : `${p}:${it.cost}:${it.op}`);
    if (timed) argv.push(it.nowUs === undefined ? '-' : String(it.nowUs));
  }
  return argv;
}
