// RedisLimiter.java — the Redis back-end: decisions by the ratelimit function library (FCALL
// rl<version>_batch, docs/redis-functions.md) with the same keys (`<prefix>{<escaped key>}:
// <policy>`), arguments and Lua code as ratelimitd's Redis store and the Node, Python and Go
// clients, so all of them share one count. The clock is Redis' TIME (read once per batch).
// Redis is reached through RedisCommands: RespClient (this package's) from a URL, or the app's
// own client (a Jedis or Lettuce adapter, README).
// Batching (RedisBatch.java): a decision is sent at once while fewer than maxInFlight calls are
// outstanding; those that arrive meanwhile queue and leave together as one call (at most 1024
// decisions) when a call returns. Calls are sent by the limiter's own daemon threads (at most
// maxInFlight), the callers wait for their answers.
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
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;

public final class RedisLimiter implements Limiter, AutoCloseable {
  // The library's ops (docs/redis-functions.md).
  static final int ACQUIRE = 0, PEEK = 1, REPORT = 4;

  private final RedisCommands redis;
  private final AutoCloseable owned;  // the RespClient this limiter made, else null
  private final Map<String, Policy> policies;
  private final String prefix;
  private final FunctionLibrary library;

  private final RedisBatch batches;

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

    /** A policy by its shorthand, "10/minute" or "100/30s" (Policy.parseRate). */
    public Builder policy(String name, String rate) { return policy(Policy.parseRate(name, rate)); }

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
    library = b.library != null ? b.library : FunctionLibrary.find(b.libraryOption);
    if (b.client != null) {
      redis = b.client;
      owned = null;
    } else {
      RespClient c = new RespClient(b.url, b.timeout, b.tls);
      redis = c;
      owned = c;
    }
    batches = new RedisBatch(redis, library, b.onFailure, b.timeout.toNanos(), b.maxInFlight, b.onError);
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
  public long failures() { return batches.failures(); }

  /** A policy_conflict decision answered as a failure (FilterCore), counted and told to onError. */
  Decision conflictAsFailure(String policy, Decision d) { return batches.conflictAsFailure(policy, d); }

  /** The version of the function library this limiter calls. */
  public String libraryVersion() { return library.version(); }

  /** Loads the library now (else the first decision does); RateLimitException("library_missing")
   *  when Redis lacks it and this client cannot load it, any other exception when Redis is down. */
  public void connect() throws Exception { batches.connect(); }

  /** Stops the sender threads and closes the RespClient this limiter made (not the app's client). */
  @Override
  public void close() {
    batches.close();
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
    return batches.decide(p, stateKey(p, key), cost, op, nowUs);
  }
}
