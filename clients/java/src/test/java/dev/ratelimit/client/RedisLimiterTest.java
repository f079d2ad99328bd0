// RedisLimiterTest.java — the Java Redis back-end against a real redis-server this test starts
// (and a real ratelimitd sharing it): clients/conformance/README.md's runner contract (every case
// of tests/vectors/<algorithm>.json step by step with test time, every field equal; all cases at
// once on one limiter so items of different cases share calls; race.json with real threads:
// exactly the expected admissions), then what the other clients promise: one count with
// ratelimitd, bad input refused before anything is sent, a flushed library reloaded, a library
// Redis lacks named, the failure policy within the timeout while Redis hangs (SIGSTOP, the
// client's own RespClient and an app's client alike) or is gone, reserve/reconcile, the
// filter on this back-end in Jetty 9 (200 concurrent requests at 10 per minute: exactly 10), and
// rediss:// with a password and a database on a TLS-only redis-server (openssl's private CA).
// Its parts: the conformance runner in RedisConformance.java, outages and TLS in RedisFailures.java,
// the rest (behaviour, one count with ratelimitd, the filter) here; main runs them all.
// A plain main, like RateLimitFilterTest (whose process and check helpers it uses); exit 1 on
// any failed check. Environment: RATELIMIT_BIN_DIR, RATELIMIT_REDIS_LIBRARY,
// RATELIMIT_VECTORS_DIR, RATELIMIT_CONFORMANCE_DIR (ctest sets them all).
package dev.ratelimit.client;

import static dev.ratelimit.client.RateLimitFilterTest.check;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

public final class RedisLimiterTest {
  static final String RUN = RateLimitFilterTest.RUN;

  @SuppressWarnings("unchecked")
  static Map<String, Object> obj(Object o) { return (Map<String, Object>) o; }

  @SuppressWarnings("unchecked")
  static List<Object> list(Object o) { return (List<Object>) o; }

  static long num(Map<String, Object> m, String k, long dflt) {
    Object v = m.get(k);
    return v == null ? dflt : ((Double) v).longValue();
  }

  static Path env(String name) {
    String v = System.getenv(name);
    if (v == null || v.isEmpty()) throw new IllegalStateException(name + " is not set (ctest sets it)");
    return Path.of(v);
  }

  static RedisLimiter.Builder builder(String url, String prefix) {
    return RedisLimiter.builder(url).keyPrefix(prefix).onFailure(FailurePolicy.CLOSED).timeout(Duration.ofSeconds(30));
  }

  static <T> List<T> inFlight(int requests, int concurrency, Callable<T> task) throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(concurrency);
    CountDownLatch go = new CountDownLatch(1);
    List<Future<T>> fs = new ArrayList<>();
    for (int i = 0; i < requests; i++) {
      fs.add(pool.submit(() -> {
        if (!go.await(30, TimeUnit.SECONDS)) throw new IllegalStateException("never released");
        return task.call();
      }));
    }
    go.countDown();
    List<T> out = new ArrayList<>();
    for (Future<T> f : fs) out.add(f.get(60, TimeUnit.SECONDS));
    pool.shutdown();
    return out;
  }

  /** A RedisCommands over another that counts FCALLs and the decisions they carried. */
  static final class Counting implements RedisCommands {
    final RedisCommands inner;
    final AtomicInteger calls = new AtomicInteger(), loads = new AtomicInteger();

    Counting(RedisCommands inner) { this.inner = inner; }

    @Override
    public Object execute(byte[]... args) throws Exception {
      String name = new String(args[0], java.nio.charset.StandardCharsets.UTF_8);
      if (name.equals("FCALL")) calls.incrementAndGet();
      if (name.equals("FUNCTION") && new String(args[1], java.nio.charset.StandardCharsets.UTF_8).equals("LOAD")) loads.incrementAndGet();
      return inner.execute(args);
    }
  }

  static void signal(Process p, String sig) throws Exception {
    new ProcessBuilder("kill", "-" + sig, Long.toString(p.pid())).inheritIO().start().waitFor(10, TimeUnit.SECONDS);
  }

  public static void main(String[] args) throws Exception {
    Path dir = Files.createTempDirectory("rl-java-redis-");
    Process redis = null, daemon = null, hung = null, tls = null;
    try {
      int rp = RateLimitFilterTest.freePort();
      redis = RateLimitFilterTest.startRedis(dir, rp);
      String url = "redis://127.0.0.1:" + rp + "/0";
      RedisConformance.conformance(url);
      behaviour(url, dir);
      int dp = RateLimitFilterTest.freePort();
      daemon = RateLimitFilterTest.startDaemon(dir, dp, url, "closed");
      withRatelimitd(url, "http://127.0.0.1:" + dp);
      tls = RedisFailures.tls(dir);
      int hp = RateLimitFilterTest.freePort();
      hung = RateLimitFilterTest.startRedis(dir, hp);
      RedisFailures.outages(hung, "redis://127.0.0.1:" + hp + "/0");
    } finally {
      if (hung != null && hung.isAlive()) signal(hung, "CONT");
      RateLimitFilterTest.stop(hung);
      RateLimitFilterTest.stop(tls);
      RateLimitFilterTest.stop(daemon);
      RateLimitFilterTest.stop(redis);
    }
    int failed = RateLimitFilterTest.failed;
    System.out.println(failed == 0 ? "RedisLimiterTest: all " + RateLimitFilterTest.checks + " checks passed"
        : "RedisLimiterTest: " + failed + " of " + RateLimitFilterTest.checks + " checks failed");
    System.exit(failed == 0 ? 0 : 1);
  }

  static void expectCode(String code, Runnable r, String what) {
    try {
      r.run();
      check(false, what + ": accepted");
    } catch (RateLimitException e) {
      check(e.code().equals(code), what + ": code " + e.code() + " (" + e.getMessage() + "), want " + code);
    }
  }

  /** What the other clients promise beyond the vectors. */
  static void behaviour(String url, Path dir) throws Exception {
    // The jar's copies: the policy bounds (equal to the Go client's, which policy_bounds_test holds
    // to policy.h) and the function library of the build (pom.xml's ratelimit.library.dir).
    Path goBounds = env("RATELIMIT_CONFORMANCE_DIR").resolve("../go/src/ratelimit/policy_bounds.json");
    try (var in = Policy.class.getResourceAsStream("policy_bounds.json")) {
      check(new String(in.readAllBytes(), java.nio.charset.StandardCharsets.UTF_8).equals(Files.readString(goBounds)),
          "the jar's policy_bounds.json equals " + goBounds + " (copy it over after RATELIMIT_WRITE_POLICY_BOUNDS=1)");
    }
    FunctionLibrary bundled = FunctionLibrary.bundled();
    check(bundled != null && bundled.version().equals(FunctionLibrary.find(null).version()),
        "the jar bundles the build's library: " + (bundled == null ? "none" : bundled.version()));

    String prefix = "java:" + RUN + ":behaviour:";
    RespClient admin = new RespClient(url, Duration.ofSeconds(30));
    try (RedisLimiter lim = builder(url, prefix).policy(Policy.window("api", "sliding_window_log", 10, Duration.ofMinutes(1)))
        .policy(Policy.window("tokens", "sliding_window_counter", 10_000, Duration.ofHours(1)))
        .policy(Policy.bucket("bucket", "token_bucket", 2.5, 5)).build()) {
      // Bad input: RateLimitException with ratelimitd's codes, before anything is sent.
      expectCode("unknown_policy", () -> lim.acquire("nope", "k", 1), "unknown policy");
      expectCode("invalid_cost", () -> lim.acquire("api", "k", 0), "cost 0");
      expectCode("invalid_cost", () -> lim.acquire("api", "k", 1_000_000_001L), "cost over 1e9");
      expectCode("invalid_cost", () -> lim.report("api", "k", -1_000_000_001L), "report under -1e9");
      expectCode("invalid_key", () -> lim.acquire("api", "", 1), "empty key");
      expectCode("invalid_key", () -> lim.acquire("api", "é".repeat(257), 1), "a 514-byte key");
      check(lim.acquire("api", "é".repeat(256), 1).allowed(), "a 512-byte key is fine");
      check(((List<?>) admin.execute("KEYS", prefix + "{k}*")).isEmpty(), "bad input wrote nothing");
      expectCode("invalid_policy", () -> Policy.window("bad name", "fixed_window", 1, Duration.ofSeconds(1)), "policy name");
      expectCode("invalid_policy", () -> Policy.window("p", "fixed_window", 0, Duration.ofSeconds(1)), "limit 0");
      expectCode("invalid_policy", () -> Policy.window("p", "fixed_window", 1, Duration.ofNanos(999_000)), "window under 1 ms");
      expectCode("invalid_policy", () -> Policy.window("p", "sliding_window_log", 100_001, Duration.ofSeconds(1)), "log limit");
      expectCode("invalid_policy", () -> Policy.window("p", "token_bucket", 1, Duration.ofSeconds(1)), "bucket as window");
      expectCode("invalid_policy", () -> Policy.bucket("p", "token_bucket", 0, 1), "rate 0");
      expectCode("invalid_policy", () -> Policy.bucket("p", "leaky_buckt", 1, 1), "unknown algorithm");
      expectCode("invalid_policy", () -> RedisLimiter.builder(url).build(), "no policy");
      // A filter on a policy the limiter lacks is refused when built, not answered 500 per request.
      expectCode("unknown_policy", () -> new RateLimitFilter(lim, "apii", r -> "k", null, null), "a filter's misspelt policy");
      expectCode("unknown_policy", () -> new JakartaRateLimitFilter(lim, "apii", r -> "k", null, null), "the Jakarta filter's");
      expectCode("invalid_policy", () -> builder(url, "a{b").policy(Policy.bucket("p", "token_bucket", 1, 1)).build(), "prefix with {");

      // Keys as the other clients write them: prefix{escaped key}:policy.
      check(lim.acquire("api", "a{b}%", 1).allowed(), "a key with { } %");
      check(Long.valueOf(1).equals(admin.execute("EXISTS", prefix + "{a%7Bb%7D%25}:api")), "escaped state key");
      check(lim.describe("bucket").orElseThrow().windowUs() == 2_000_000 && lim.describe("bucket").orElseThrow().quota() == 5,
          "a bucket's q and w: " + lim.describe("bucket"));

      // A flushed library is loaded again and the call retried once: no failure.
      admin.execute("FUNCTION", "FLUSH");
      Decision after = lim.acquire("api", "flushed", 1);
      check(after.allowed() && after.remaining() == 9 && lim.failures() == 0, "after FUNCTION FLUSH: " + after);

      // A library Redis lacks and this client cannot load: library_missing naming it, no failure policy.
      admin.execute("FUNCTION", "FLUSH");
      try (RedisLimiter byVersion = builder(url, prefix).library(FunctionLibrary.version(lim.libraryVersion()))
          .policy(Policy.window("api", "sliding_window_log", 10, Duration.ofMinutes(1))).build()) {
        try {
          byVersion.acquire("api", "k", 1);
          check(false, "acquire without the library was answered");
        } catch (RateLimitException e) {
          check(e.code().equals("library_missing") && e.getMessage().contains(lim.libraryVersion()) && byVersion.failures() == 0,
              "library missing: " + e.code() + " " + e.getMessage());
        }
        lim.connect();
        check(byVersion.acquire("api", "by-version", 1).allowed(), "by version, once loaded");
      }

      // Usage after the fact: report (debt, refund) and reserve -> reconcile / cancel.
      check(lim.acquire("api", "r", 5).remaining() == 5, "acquire 5");
      Decision debt = lim.report("api", "r", 10);
      check(debt.allowed() && debt.remaining() == 0, "report +10: " + debt);
      check(!lim.acquire("api", "r", 1).allowed(), "in debt: refused");
      check(lim.report("api", "r", -12).remaining() == 7, "refund 12 of 15");
      Reservation r1 = lim.reserve("tokens", "v", 500);
      check(r1.decision().remaining() == 9500 && r1.reconcile(700).orElseThrow().remaining() == 9300, "reserve 500, reconcile 700");
      try (Reservation r2 = lim.reserve("tokens", "v", 500)) {
        check(r2.decision().remaining() == 8800, "reserved: " + r2.decision());
      }
      check(lim.peek("tokens", "v", 1).remaining() == 9299, "the abandoned reservation gave its 500 back");
      lim.reset("api", "r");
      check(lim.acquire("api", "r", 1).remaining() == 9, "reset forgets the key");
      check(lim.failures() == 0, "behaviour: failures " + lim.failures());
    } finally {
      admin.close();
    }
  }

  /** Jetty 9 serving /items behind a RateLimitFilter of `l` and `policy` keyed by X-Client, started. */
  static org.eclipse.jetty.server.Server filtered(Limiter l, String policy) throws Exception {
    org.eclipse.jetty.server.Server jetty = new org.eclipse.jetty.server.Server();
    var connector = new org.eclipse.jetty.server.ServerConnector(jetty);
    connector.setHost("127.0.0.1");
    connector.setPort(0);
    jetty.addConnector(connector);
    var ctx = new org.eclipse.jetty.servlet.ServletContextHandler();
    ctx.addServlet(new org.eclipse.jetty.servlet.ServletHolder(new RateLimitFilterTest.Items()), "/items");
    ctx.addFilter(new org.eclipse.jetty.servlet.FilterHolder(new RateLimitFilter(l, policy, r -> r.getHeader("X-Client"), null, null)),
        "/*", null);
    jetty.setHandler(ctx);
    jetty.start();
    return jetty;
  }

  static int port(org.eclipse.jetty.server.Server jetty) {
    return ((org.eclipse.jetty.server.ServerConnector) jetty.getConnectors()[0]).getLocalPort();
  }

  /** One GET of /items through filtered(l, policy) as `client`. */
  static RateLimitFilterTest.Got throughFilter(Limiter l, String policy, String client) throws Exception {
    org.eclipse.jetty.server.Server jetty = filtered(l, policy);
    try {
      var http = java.net.http.HttpClient.newBuilder().version(java.net.http.HttpClient.Version.HTTP_1_1).build();
      return RateLimitFilterTest.get(http, port(jetty), "/items", client);
    } finally {
      jetty.stop();
    }
  }

  /** One count with ratelimitd on the same Redis, prefix and policy; the filter on this back-end. */
  static void withRatelimitd(String url, String daemonUrl) throws Exception {
    RatelimitdClient daemon = new RatelimitdClient(daemonUrl, FailurePolicy.CLOSED, Duration.ofSeconds(30), null);
    try (RedisLimiter lim = builder(url, "rl:java-" + RUN + ":").policy(Policy.window("api", "sliding_window_log", 10, Duration.ofSeconds(60)))
        .policy(Policy.window("web", "sliding_window_log", 10, Duration.ofSeconds(60))).build()) {
      String k = "shared-" + RUN;
      for (int i = 0; i < 5; i++) {
        check(lim.acquire("api", k, 1).allowed(), "Java on Redis, acquire " + i);
        check(daemon.acquire("api", k, 1).allowed(), "ratelimitd, acquire " + i);
      }
      Decision mine = lim.acquire("api", k, 1), theirs = daemon.acquire("api", k, 1);
      check(!mine.allowed() && mine.reason().equals("over_limit") && !theirs.allowed(),
          "the 11th, both sides: " + mine + " / " + theirs);

      // Issue 31 defect 8: one name, two definitions on one key. Before, each algorithm read its
      // own fields of the shared state (the repro admitted 21 of 10); now the second definition
      // answers policy_conflict and counts nothing, here and through ratelimitd (409).
      try (RedisLimiter bucket = builder(url, "rl:java-" + RUN + ":").policy(Policy.bucket("api", "token_bucket", 0.1, 10)).build()) {
        String c = "conflict-" + RUN;
        int admitted = 0, conflicts = 0;
        for (int i = 0; i < 100; i++) {
          Decision d = (i % 2 == 1 ? bucket : lim).acquire("api", c, 1);
          if (d.allowed()) admitted++;
          if (d.reason().equals("policy_conflict")) {
            conflicts++;
            check(i % 2 == 1 && !d.allowed() && d.remaining() == 0 && d.retryAfterUs() > 0 && d.retryAfterUs() <= 60_000_000,
                "a conflict answers what it must: " + d);
          }
        }
        check(admitted == 10 && conflicts == 50, "two definitions of one name: admitted " + admitted + " (10), conflicts " + conflicts + " (50)");
        String b = "conflictd-" + RUN;
        check(bucket.acquire("api", b, 1).allowed(), "the bucket takes its key");
        Decision viaDaemon = daemon.acquire("api", b, 1);
        check(!viaDaemon.allowed() && viaDaemon.reason().equals("policy_conflict") && viaDaemon.retryAfterUs() > 0,
            "ratelimitd's 409 is a policy_conflict decision: " + viaDaemon);
        check(bucket.peek("api", b, 1).remaining() == 8, "the bucket's own count did not move");

        // The filter answers a conflict as the limiter failing (the app's configuration error,
        // not its user's): OPEN lets the request through, CLOSED gives the store failure's 429
        // with Retry-After 1; counted in failures(), told to a RedisLimiter's onError naming the
        // policy. Before, it was a 429 with the conflict's wait, and nobody was told.
        for (FailurePolicy fp : new FailurePolicy[] {FailurePolicy.OPEN, FailurePolicy.CLOSED}) {
          List<Exception> heard = Collections.synchronizedList(new ArrayList<>());
          try (RedisLimiter window = builder(url, "rl:java-" + RUN + ":").onFailure(fp).onError(heard::add)
              .policy(Policy.window("api", "sliding_window_log", 10, Duration.ofSeconds(60))).build()) {
            RatelimitdClient viaD = new RatelimitdClient(daemonUrl, fp, Duration.ofSeconds(30), null);
            for (Limiter l : new Limiter[] {window, viaD}) {
              RateLimitFilterTest.Got g = throughFilter(l, "api", b);
              boolean answered = fp == FailurePolicy.OPEN ? g.status() == 200 && g.body().equals("{\"items\":[]}")
                  : g.status() == 429 && "1".equals(g.h("Retry-After"));
              check(answered && l.failures() == 1, "filter on a conflict, " + fp + ", " + l.getClass().getSimpleName() + ": "
                  + g.status() + " " + g.headers().map() + " " + g.body() + ", failures " + l.failures());
            }
            check(heard.size() == 1 && heard.get(0) instanceof RateLimitException e && e.code().equals("policy_conflict")
                && e.getMessage().contains("policy 'api'"), "onError heard the conflict: " + heard);
          }
        }
      }

      // RateLimitFilter on this back-end in Jetty 9: 200 concurrent requests, exactly 10 admitted.
      org.eclipse.jetty.server.Server jetty = filtered(lim, "web");
      try {
        var http = java.net.http.HttpClient.newBuilder().version(java.net.http.HttpClient.Version.HTTP_1_1).build();
        int port = port(jetty);
        List<RateLimitFilterTest.Got> got = inFlight(200, 200, () -> RateLimitFilterTest.get(http, port, "/items", "web-" + RUN));
        long ok = got.stream().filter(g -> g.status() == 200).count(), denied = got.stream().filter(g -> g.status() == 429).count();
        check(ok == 10 && denied == 190, "filter on RedisLimiter: " + ok + " admitted, " + denied + " denied; want 10 and 190");
        check(got.stream().allMatch(g -> "\"web\";q=10;w=60".equals(g.h("RateLimit-Policy"))
            && (g.status() == 200 || (g.h("Retry-After") != null && ("\"web\";r=0;t=" + g.h("Retry-After")).equals(g.h("RateLimit"))))),
            "filter on RedisLimiter: headers");
        check(lim.failures() == 0, "withRatelimitd: failures " + lim.failures());
      } finally {
        jetty.stop();
      }
    }
  }

}
