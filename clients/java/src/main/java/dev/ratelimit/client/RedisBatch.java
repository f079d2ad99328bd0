// RedisBatch.java — RedisLimiter's sender: decisions queued, sent as FCALL rl<version>_batch
// calls (at most MAX_BATCH decisions each) by daemon threads, and answered — by the library's
// reply, or by the failure policy when Redis fails or the caller's timeout passes first.
// Why its own file: RedisLimiter is the public face (builder, validation, keys); this is the
// machinery every decision goes through, as the Go client's redis_batch.go is.
// Batching: a decision is sent at once while fewer than maxInFlight calls are outstanding; those
// that arrive meanwhile queue and leave together as one call when a call returns — one Redis call
// for many decisions under load, no wait at low load.
// Invariants: each decision is answered exactly once (CompletableFuture.complete decides the
// race between a reply and its caller's timeout); failures() counts each failure answer once,
// before its caller wakes; the library is sent only when not known loaded (and once more on
// "Function not found"), never on every call of an outage (issue 31 defect 3).
// Thread-safety: every method may be called from any thread.
package dev.ratelimit.client;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;

final class RedisBatch {
  static final int MAX_BATCH = 1024;
  // The function library's reason numbers (include/ratelimit/decision.h); null: one a rate
  // decision never answers. 6, policy_conflict: the key holds live state of another definition of
  // the policy's name (another algorithm, window or counting mode); nothing was counted, and
  // retryAfterUs says when that state ends (docs/redis-functions.md).
  private static final String[] REASONS = {"within_limit", "over_limit", "exceeds_capacity", null, null, null,
      "policy_conflict"};

  private final RedisCommands redis;
  private final FunctionLibrary library;
  private final byte[] function;
  private final FailurePolicy onFailure;
  private final long timeoutNs;
  private final int maxInFlight;
  private final Consumer<Exception> onError;
  private final ExecutorService senders;
  private final AtomicLong failures = new AtomicLong();
  private volatile boolean loaded;

  private final Object lock = new Object();
  private final ArrayDeque<Item> queue = new ArrayDeque<>();
  private int inFlight;

  /** One decision to send (nowUs -1: Redis' clock), and its answer. */
  private record Item(Policy policy, String state, long cost, int op, long nowUs, CompletableFuture<Decision> answer) {}

  RedisBatch(RedisCommands redis, FunctionLibrary library, FailurePolicy onFailure, long timeoutNs, int maxInFlight,
             Consumer<Exception> onError) {
    this.redis = redis;
    this.library = library;
    this.function = FunctionLibrary.bytes("rl" + library.version() + "_batch");
    this.onFailure = onFailure;
    this.timeoutNs = timeoutNs;
    this.maxInFlight = maxInFlight;
    this.onError = onError;
    senders = Executors.newCachedThreadPool(r -> {
      Thread t = new Thread(r, "ratelimit-redis-sender");
      t.setDaemon(true);
      return t;
    });
  }

  long failures() { return failures.get(); }

  /** Loads the library now (see RedisLimiter.connect). */
  void connect() throws Exception {
    library.ensure(redis);
    loaded = true;
  }

  /** Stops the sender threads (a decision queued later is answered by its timeout). */
  void close() { senders.shutdown(); }

  /** Queues one decision (validated by the caller), waits for it at most the timeout and answers
   *  it — by the failure policy when Redis does not; throws RateLimitException("library_missing"). */
  Decision decide(Policy p, String state, long cost, int op, long nowUs) {
    Item it = new Item(p, state, cost, op, nowUs, new CompletableFuture<>());
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

  /** A policy_conflict decision answered by the failure policy (FilterCore: the app's
   *  configuration error), counted and told to onError as any failure. */
  Decision conflictAsFailure(String policy, Decision d) {
    failed(1, FilterCore.conflictError(policy, d));
    return Decision.failure(onFailure, d.limit());
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
      if (it.cost() != 1 || it.op() != RedisLimiter.ACQUIRE) p += ":" + it.cost() + ":" + it.op;
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
      if (v[0] < 0 || v[0] >= REASONS.length || REASONS[(int) v[0]] == null) {
        throw new RateLimitException("protocol", "unknown reason " + v[0] + " in the library's reply");
      }
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
