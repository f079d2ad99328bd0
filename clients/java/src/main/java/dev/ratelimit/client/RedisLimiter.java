// RedisLimiter.java — the Redis back-end: decisions by the ratelimit function library (FCALL
// rl<version>_batch, docs/redis-functions.md) with the same keys (`<prefix>{<escaped key>}:
// <policy>`), arguments and Lua code as ratelimitd's Redis store and the Node, Python and Go
// clients, so all of them share one count. The clock is Redis' TIME (read once per batch).
// Redis is reached through RedisCommands: RespClient (this package's) from a URL, or the app's
// own client (a Jedis or Lettuce adapter, README).
// Batching: a decision is sent at once while fewer than maxInFlight calls are outstanding; those
// that arrive meanwhile queue and leave together as one call (at most 1024 decisions) when a call
// returns — one Redis call for many decisions under load, no wait at low load. Calls are sent by
// the limiter's own daemon threads (at most maxInFlight), the callers wait for their answers.
// Failures: a connection error, a timeout or an error reply decide by the failure policy (OPEN
// admits: failed_open; CLOSED denies for 1 s: failed_closed), counted in failures() and told to
// onError. `timeout` bounds each decision, queue included, whatever the client does: a caller
// still waiting then gets the failure policy's answer (a late reply is dropped, not counted).
// A flushed library ("Function not found") is loaded again and the call retried once; the
// library stays known loaded through an outage (re-sending 49 KB per call into an outage cost a
// second timeout each: issue 31 defect 3). Bad input throws RateLimitException (invalid_key,
// invalid_cost, unknown_policy; invalid_policy at build) before anything is sent; a library Redis
// lacks and this client cannot load throws RateLimitException("library_missing") — a deployment
// error, which no failure policy hides.
// report() is op 4 of the same batch (usage known after the fact, docs/usage.md); reserve()
// (Limiter) acquires an estimate to reconcile. A failed report answers the failure policy's
// decision (nothing was recorded).
// Not here: Redis Cluster (the Node, Python and Go clients have it; give a cluster-aware client
// only when every key of a call shares a slot — each call here may mix keys) and the all-or-
// nothing multi-policy call (rl<v>_acquire_all).
// Thread-safety: every method may be called from any thread.
package dev.ratelimit.client;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

public final class RedisLimiter implements Limiter, AutoCloseable {
  static final int MAX_BATCH = 1024;
  // The library's ops (docs/redis-functions.md).
  static final int ACQUIRE = 0, PEEK = 1, REPORT = 4;
  private static final String[] REASONS = {"within_limit", "over_limit", "exceeds_capacity"};

  private final RedisCommands redis;
  private final AutoCloseable owned;  // the RespClient this limiter made, else null
  private final Map<String, Policy> policies;
  private final String prefix;
  private final FailurePolicy onFailure;
  private final long timeoutNs;
  private final int maxInFlight;
  private final Consumer<Exception> onError;
  private final FunctionLibrary library;
  private final byte[] function;
  private final ExecutorService senders;
  private final AtomicLong failures = new AtomicLong();
  private volatile boolean loaded;

  private final Object lock = new Object();
  private final ArrayDeque<Item> queue = new ArrayDeque<>();
  private int inFlight;

  /** One decision to send (nowUs -1: Redis' clock), and its answer. */
  private record Item(Policy policy, String state, long cost, int op, long nowUs, CompletableFuture<Decision> answer) {}

  /** Configures a RedisLimiter: at least one policy; everything else has ratelimitd's defaults. */
  public static final class Builder {
    private final String url;
    private final RedisCommands client;
    private final Map<String, Policy> policies = new LinkedHashMap<>();
    private String keyPrefix = "rl:";
    private FailurePolicy onFailure = FailurePolicy.OPEN;
    private Duration timeout = Duration.ofMillis(250);
    private FunctionLibrary library;
    private String libraryOption;
    private int maxInFlight = 2;
    private Consumer<Exception> onError;
    private javax.net.ssl.SSLContext tls;

    private Builder(String url, RedisCommands client) {
      this.url = url;
      this.client = client;
    }

    /** A policy by its name (ratelimitd's name and definition, to share its counts). */
    public Builder policy(Policy p) {
      if (policies.putIfAbsent(p.name(), p) != null) {
        throw new RateLimitException("invalid_policy", "policy '" + p.name() + "' is defined twice");
      }
      return this;
    }

    /** The keys' prefix (default "rl:", ratelimitd's store.key_prefix default). */
    public Builder keyPrefix(String prefix) { this.keyPrefix = prefix; return this; }

    public Builder onFailure(FailurePolicy p) { this.onFailure = p; return this; }

    /** The bound on each decision, queue included (default 250 ms); RespClient's socket timeout. */
    public Builder timeout(Duration t) { this.timeout = t; return this; }

    /** The library's text or a path (FunctionLibrary.find); default: environment, jar, install. */
    public Builder library(String textOrPath) { this.libraryOption = textOrPath; this.library = null; return this; }

    /** A library already loaded (FunctionLibrary.version(v)) or found elsewhere. */
    public Builder library(FunctionLibrary lib) { this.library = lib; this.libraryOption = null; return this; }

    /** Calls outstanding at once (default 2): more decisions wait and leave as one batch. */
    public Builder maxInFlight(int n) { this.maxInFlight = n; return this; }

    /** Told every failure the failure policy answered (logging, metrics). */
    public Builder onError(Consumer<Exception> f) { this.onError = f; return this; }

    /** For a rediss:// URL: the TLS context (e.g. trusting a private CA); default the JVM's. */
    public Builder tls(javax.net.ssl.SSLContext context) { this.tls = context; return this; }

    public RedisLimiter build() { return new RedisLimiter(this); }
  }

  /** A limiter on a Redis of its own (RespClient): redis://[[user]:password@]host[:port][/db],
   *  or rediss://… over TLS. */
  public static Builder builder(String redisUrl) { return new Builder(redisUrl, null); }

  /** A limiter on the app's own client (the caller keeps and closes it). */
  public static Builder builder(RedisCommands client) {
    if (client == null) throw new RateLimitException("invalid_request", "a Redis client is required");
    return new Builder(null, client);
  }

  private RedisLimiter(Builder b) {
    if (b.policies.isEmpty()) throw new RateLimitException("invalid_policy", "at least one policy is required");
    if (b.keyPrefix == null || b.keyPrefix.contains("{") || b.keyPrefix.contains("}")
        || b.keyPrefix.getBytes(StandardCharsets.UTF_8).length > 128) {
      throw new RateLimitException("invalid_policy", "keyPrefix must be at most 128 bytes, without { or }");
    }
    if (b.onFailure == null) throw new RateLimitException("invalid_policy", "onFailure must be OPEN or CLOSED");
    if (b.timeout == null || b.timeout.toMillis() < 1) throw new RateLimitException("invalid_policy", "timeout must be at least 1 ms");
    if (b.maxInFlight < 1) throw new RateLimitException("invalid_policy", "maxInFlight must be at least 1, got " + b.maxInFlight);
    policies = Map.copyOf(b.policies);
    prefix = b.keyPrefix;
    onFailure = b.onFailure;
    timeoutNs = b.timeout.toNanos();
    maxInFlight = b.maxInFlight;
    onError = b.onError;
    library = b.library != null ? b.library : FunctionLibrary.find(b.libraryOption);
    function = FunctionLibrary.bytes("rl" + library.version() + "_batch");
    if (b.client != null) {
      redis = b.client;
      owned = null;
    } else {
      RespClient c = new RespClient(b.url, b.timeout, b.tls);
      redis = c;
      owned = c;
    }
    senders = Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r, "ratelimit-redis-sender");
      t.setDaemon(true);
      return t;
    });
  }

  @Override
  public Decision acquire(String policy, String key, long cost) { return decide(policy, key, cost, ACQUIRE, -1); }

  @Override
  public Decision peek(String policy, String key, long cost) { return decide(policy, key, cost, PEEK, -1); }

  @Override
  public Decision report(String policy, String key, long cost) { return decide(policy, key, cost, REPORT, -1); }

  /** A decision at `nowUs` instead of Redis' clock: test mode, for the conformance vectors only
   *  (the library then floors TTLs at 10 minutes). */
  Decision decideAt(String policy, String key, long cost, int op, long nowUs) {
    if (nowUs < 0) throw new RateLimitException("invalid_cost", "nowUs must not be negative, got " + nowUs);
    return decide(policy, key, cost, op, nowUs);
  }

  /** Forgets `key`'s state under `policy` (DEL of its keys); RateLimitException("unavailable")
   *  when Redis does not answer. */
  public void reset(String policy, String key) {
    Policy p = policy(policy);
    p.validateRequest(key, 1);
    String state = stateKey(p, key);
    try {
      redis.execute(FunctionLibrary.bytes("DEL"), FunctionLibrary.bytes(state), FunctionLibrary.bytes(state + "#log"));
    } catch (Exception e) {
      throw new RateLimitException("unavailable", "Redis: " + e);
    }
  }

  @Override
  public Optional<PolicyInfo> describe(String policy) {
    Policy p = policies.get(policy);
    return p == null ? Optional.empty() : Optional.of(new PolicyInfo(p.name(), p.limit(), p.windowUs()));
  }

  @Override
  public long failures() { return failures.get(); }

  /** The version of the function library this limiter calls. */
  public String libraryVersion() { return library.version(); }

  /** Loads the library now (else the first decision does); RateLimitException("library_missing")
   *  when Redis lacks it and this client cannot load it, any other exception when Redis is down. */
  public void connect() throws Exception {
    library.ensure(redis);
    loaded = true;
  }

  /** Stops the sender threads and closes the RespClient this limiter made (not the app's client). */
  @Override
  public void close() {
    senders.shutdown();
    if (owned != null) {
      try {
        owned.close();
      } catch (Exception ignored) {
        // closing: nothing to do
      }
    }
  }

  /** '%' → %25, '{' → %7B, '}' → %7D: no user key can leave its hash tag. */
  public static String escapeKey(String key) {
    if (key.indexOf('%') < 0 && key.indexOf('{') < 0 && key.indexOf('}') < 0) return key;
    return key.replace("%", "%25").replace("{", "%7B").replace("}", "%7D");
  }

  private String stateKey(Policy p, String key) { return prefix + "{" + escapeKey(key) + "}:" + p.name(); }

  private Policy policy(String name) {
    Policy p = name == null ? null : policies.get(name);
    if (p == null) {
      throw new RateLimitException("unknown_policy", "unknown policy '" + name + "' (configured: " + String.join(", ", policies.keySet()) + ")");
    }
    return p;
  }

  private Decision decide(String policy, String key, long cost, int op, long nowUs) {
    Policy p = policy(policy);
    if (op == REPORT) p.validateReport(key, cost);
    else p.validateRequest(key, cost);
    Item it = new Item(p, stateKey(p, key), cost, op, nowUs, new CompletableFuture<>());
    boolean start;
    synchronized (lock) {
      queue.add(it);
      start = inFlight < maxInFlight;
      if (start) inFlight++;
    }
    if (start) {
      try {
        senders.execute(this::drain);
      } catch (java.util.concurrent.RejectedExecutionException e) {  // closed
        synchronized (lock) {
          inFlight--;
        }
      }
    }
    try {
      return it.answer().get(timeoutNs, TimeUnit.NANOSECONDS);
    } catch (TimeoutException e) {
      if (it.answer().complete(Decision.failure(onFailure, p.limit()))) {
        failed(1, new TimeoutException("no answer from Redis within " + Duration.ofNanos(timeoutNs).toMillis() + " ms"));
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      if (it.answer().complete(Decision.failure(onFailure, p.limit()))) failed(1, e);
    } catch (ExecutionException e) {
      throw (RateLimitException) e.getCause();  // library_missing: the only exceptional answer
    }
    try {
      return it.answer().join();
    } catch (java.util.concurrent.CompletionException e) {
      throw (RateLimitException) e.getCause();
    }
  }

  private void failed(int n, Exception e) {
    failures.addAndGet(n);
    if (onError != null) onError.accept(e);
  }

  /** Sends what is queued, batch after batch, until the queue is empty. */
  private void drain() {
    while (true) {
      List<Item> batch = new ArrayList<>();
      synchronized (lock) {
        if (queue.isEmpty()) {
          inFlight--;
          return;
        }
        while (!queue.isEmpty() && batch.size() < MAX_BATCH) batch.add(queue.poll());
      }
      send(batch);
    }
  }

  private void send(List<Item> batch) {
    List<Decision> ds;
    try {
      ds = decode(call(batch), batch);
    } catch (RateLimitException e) {
      if (e.code().equals("library_missing")) {
        for (Item it : batch) it.answer().completeExceptionally(e);
        return;
      }
      failBatch(batch, e);
      return;
    } catch (Exception e) {
      failBatch(batch, e);
      return;
    } catch (Error e) {
      failBatch(batch, new RuntimeException(e));
      throw e;
    }
    for (int i = 0; i < batch.size(); i++) batch.get(i).answer().complete(ds.get(i));
  }

  /** The failure policy answers those still waiting (not those whose callers gave up and were
   *  answered, and counted, by their own timeout). Counted and told before the callers wake, so
   *  failures() already includes a failure answer its caller holds. */
  private void failBatch(List<Item> batch, Exception e) {
    long waiting = batch.stream().filter(it -> !it.answer().isDone()).count();
    if (waiting == 0) return;
    failures.addAndGet(waiting);
    if (onError != null) onError.accept(e);
    long lost = 0;
    for (Item it : batch) if (!it.answer().complete(Decision.failure(onFailure, it.policy().limit()))) lost++;
    failures.addAndGet(-(lost - (batch.size() - waiting)));  // timed out meanwhile: counted by its caller
  }

  /** One FCALL rl<version>_batch (run_batch in src/redis/lua/multi.lua): numkeys, the keys (a
   *  sliding log's state and log), the number of distinct policies, the clock ('-' once, or 't'
   *  and a time per item), six arguments per policy, then per item its policy's index, with
   *  ':<cost>:<op>' unless an acquire of 1 (a report's cost may be negative: a refund). The
   *  library is loaded first when not known loaded, and again once on "Function not found". */
  private Object call(List<Item> batch) throws Exception {
    Map<Policy, Integer> index = new LinkedHashMap<>();
    boolean timed = false;
    List<byte[]> keys = new ArrayList<>();
    for (Item it : batch) {
      index.putIfAbsent(it.policy(), index.size() + 1);
      timed |= it.nowUs() >= 0;
      keys.add(FunctionLibrary.bytes(it.state()));
      if (it.policy().algorithm().equals("sliding_window_log")) keys.add(FunctionLibrary.bytes(it.state() + "#log"));
    }
    List<byte[]> cmd = new ArrayList<>(keys.size() + 6 * index.size() + 2 * batch.size() + 5);
    cmd.add(FunctionLibrary.bytes("FCALL"));
    cmd.add(function);
    cmd.add(FunctionLibrary.bytes(Integer.toString(keys.size())));
    cmd.addAll(keys);
    cmd.add(FunctionLibrary.bytes(Integer.toString(index.size())));
    cmd.add(FunctionLibrary.bytes(timed ? "t" : "-"));
    for (Policy p : index.keySet()) for (String a : p.args) cmd.add(FunctionLibrary.bytes(a));
    for (Item it : batch) {
      String p = Integer.toString(index.get(it.policy()));
      if (it.cost() != 1 || it.op() != ACQUIRE) p += ":" + it.cost() + ":" + it.op;
      cmd.add(FunctionLibrary.bytes(p));
      if (timed) cmd.add(FunctionLibrary.bytes(it.nowUs() >= 0 ? Long.toString(it.nowUs()) : "-"));
    }
    byte[][] args = cmd.toArray(new byte[0][]);
    if (!loaded) connect();
    try {
      return redis.execute(args);
    } catch (RedisError e) {
      if (!String.valueOf(e.getMessage()).toLowerCase(java.util.Locale.ROOT).contains("function not found")) throw e;
      connect();
      return redis.execute(args);
    }
  }

  /** The decisions of a library reply: four integers per item (reason, remaining,
   *  reset_after_us, delay_us when allowed else retry_after_us); the whole reply is checked before
   *  any of it answers. Anything else: RateLimitException("protocol"). */
  private static List<Decision> decode(Object reply, List<Item> batch) {
    if (!(reply instanceof List<?> r) || r.size() != 4 * batch.size()) {
      throw new RateLimitException("protocol", "unexpected reply from the function library: " + describeReply(reply));
    }
    List<Decision> out = new ArrayList<>(batch.size());
    for (int i = 0; i < batch.size(); i++) {
      long[] v = new long[4];
      for (int j = 0; j < 4; j++) {
        // Long from RespClient; an adapter's client may answer another integral Number.
        if (!(r.get(4 * i + j) instanceof Number n) || n instanceof Double || n instanceof Float) {
          throw new RateLimitException("protocol", "unexpected decision in the library's reply: " + r.subList(4 * i, 4 * i + 4));
        }
        v[j] = n.longValue();
      }
      if (v[0] < 0 || v[0] > 2) throw new RateLimitException("protocol", "unknown reason " + v[0] + " in the library's reply");
      long reason = v[0], remaining = v[1], reset = v[2], last = v[3];
      boolean allowed = reason == 0;
      out.add(new Decision(allowed, REASONS[(int) reason], batch.get(i).policy().limit(), remaining, reset,
          allowed ? 0 : last, allowed ? last : 0));
    }
    return out;
  }

  private static String describeReply(Object reply) {
    String s = reply instanceof byte[] b ? new String(b, StandardCharsets.UTF_8) : String.valueOf(reply);
    return s.length() > 200 ? s.substring(0, 200) + "…" : s;
  }
}
