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

  /** The case's policy, named `name`, through the public constructors (their validation and
   *  argument encoding are what is tested). */
  static Policy policyOf(String name, String algorithm, Map<String, Object> policy, Map<String, Object> c) {
    List<Policy.Option> o = new ArrayList<>();
    if (Boolean.TRUE.equals(c.get("count_denied"))) o.add(Policy.Option.COUNT_DENIED);
    if (Boolean.TRUE.equals(c.get("every_hit"))) o.add(Policy.Option.EVERY_HIT);
    if ("shape".equals(policy.get("mode"))) o.add(Policy.Option.SHAPE);
    Policy.Option[] opts = o.toArray(new Policy.Option[0]);
    if (policy.containsKey("rate")) {
      return Policy.bucket(name, algorithm, (Double) policy.get("rate"), num(policy, "burst", 0), opts);
    }
    return Policy.window(name, algorithm, num(policy, "limit", 0), Duration.of(num(policy, "window_us", 0), ChronoUnit.MICROS), opts);
  }

  static RedisLimiter.Builder builder(String url, String prefix) {
    return RedisLimiter.builder(url).keyPrefix(prefix).onFailure(FailurePolicy.CLOSED).timeout(Duration.ofSeconds(30));
  }

  /** One step: its decision through `lim` (op acquire, peek or report, test time), compared
   *  field for field; a reset step resets. */
  static void step(RedisLimiter lim, String policy, String where, Map<String, Object> st, long capacity, List<String> failures) {
    String key = st.containsKey("key") ? (String) st.get("key") : "k";
    String op = st.containsKey("op") ? (String) st.get("op") : "acquire";
    if (op.equals("reset")) {
      lim.reset(policy, key);
      return;
    }
    int code = switch (op) {
      case "peek" -> RedisLimiter.PEEK;
      case "report" -> RedisLimiter.REPORT;
      default -> RedisLimiter.ACQUIRE;
    };
    Decision d = lim.decideAt(policy, key, num(st, "cost", 1), code, num(st, "t_us", -1));
    Map<String, Object> e = obj(st.get("expect"));
    boolean same = d.allowed() == Boolean.TRUE.equals(e.get("allowed")) && d.reason().equals(e.get("reason"))
        && d.remaining() == num(e, "remaining", -1) && d.resetAfterUs() == num(e, "reset_after_us", -1)
        && d.retryAfterUs() == num(e, "retry_after_us", -1) && d.delayUs() == num(e, "delay_us", -1) && d.limit() == capacity;
    if (!same) failures.add(where + ": expected " + e + " limit " + capacity + ", got " + d);
  }

  static long capacity(Map<String, Object> policy) {
    return num(policy, policy.containsKey("burst") ? "burst" : "limit", -1);
  }

  /** Every case of every vector file through `runCase`; the number of cases run. */
  interface CaseRunner { void run(String algorithm, int index, Map<String, Object> c) throws Exception; }

  static int eachCase(List<Map<String, Object>> files, CaseRunner r) throws Exception {
    int n = 0;
    for (Map<String, Object> f : files) {
      List<Object> cases = list(f.get("cases"));
      for (int i = 0; i < cases.size(); i++, n++) r.run((String) f.get("algorithm"), i, obj(cases.get(i)));
    }
    return n;
  }

  /** Runs one case's steps on `lim` under `policy`; a step with its own policy (a reload that
   *  redefined it) runs on a limiter of that definition over the same keys. */
  static void runCase(String url, String prefix, RedisLimiter lim, String policy, String algorithm, int index,
                      Map<String, Object> c, List<String> failures) {
    List<Object> steps = list(c.get("steps"));
    for (int i = 0; i < steps.size(); i++) {
      Map<String, Object> st = obj(steps.get(i));
      String where = algorithm + "/" + c.get("name") + " step " + i;
      if (st.containsKey("policy")) {
        Map<String, Object> p = obj(st.get("policy"));
        try (RedisLimiter other = builder(url, prefix).policy(policyOf(policy, algorithm, p, c)).build()) {
          step(other, policy, where, st, capacity(p), failures);
          check(other.failures() == 0, where + ": failures " + other.failures());
        }
      } else {
        step(lim, policy, where, st, capacity(obj(c.get("policy"))), failures);
      }
    }
  }

  /** The fixed window's year-long race windows are epoch-aligned: start 60 s clear of a boundary. */
  static void roomForRace(Map<String, Object> policy) throws InterruptedException {
    if (!policy.containsKey("window_us")) return;
    long w = num(policy, "window_us", 0) / 1000, into = System.currentTimeMillis() % w;
    if (w - into < 60_000) Thread.sleep(w - into + 1000);
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
      conformance(url);
      behaviour(url, dir);
      int dp = RateLimitFilterTest.freePort();
      daemon = RateLimitFilterTest.startDaemon(dir, dp, url, "closed");
      withRatelimitd(url, "http://127.0.0.1:" + dp);
      tls = tls(dir);
      int hp = RateLimitFilterTest.freePort();
      hung = RateLimitFilterTest.startRedis(dir, hp);
      outages(hung, "redis://127.0.0.1:" + hp + "/0");
    } finally {
      if (hung != null && hung.isAlive()) signal(hung, "CONT");
      RateLimitFilterTest.stop(hung);
      RateLimitFilterTest.stop(tls);
      RateLimitFilterTest.stop(daemon);
      RateLimitFilterTest.stop(redis);
    }
    int failed = RateLimitFilterTest.failed;
    System.out.println(failed == 0 ? "RedisLimiterTest: all checks passed" : "RedisLimiterTest: " + failed + " checks failed");
    System.exit(failed == 0 ? 0 : 1);
  }

  /** The runner contract (clients/conformance/README.md). */
  static void conformance(String url) throws Exception {
    Path vectors = env("RATELIMIT_VECTORS_DIR"), conf = env("RATELIMIT_CONFORMANCE_DIR");
    List<String> table = new ArrayList<>(), notPorted = new ArrayList<>();
    for (Object a : list(obj(Json.parse(Files.readString(conf.resolve("algorithms.json")))).get("algorithms"))) {
      (obj(a).get("kind").equals("rate") ? table : notPorted).add((String) obj(a).get("name"));
    }
    // Same order: an algorithm's index is its argument to the library.
    check(Policy.ALGORITHMS.equals(table), "the client's algorithms " + Policy.ALGORITHMS + " are the library's rate rows " + table);
    check(notPorted.equals(List.of("concurrency")), "algorithms this client does not port: " + notPorted);
    List<Map<String, Object>> files = new ArrayList<>();
    int fileCases = 0;
    for (String a : table) {
      files.add(obj(Json.parse(Files.readString(vectors.resolve(a + ".json")))));
      fileCases += list(files.get(files.size() - 1).get("cases")).size();
    }

    // Step by step: a limiter per case, steps in order.
    List<String> failures = new ArrayList<>();
    int ran = eachCase(files, (alg, i, c) -> {
      String prefix = "conf:" + RUN + ":java-seq:" + alg + ":" + i + ":";
      try (RedisLimiter lim = builder(url, prefix).policy(policyOf("p", alg, obj(c.get("policy")), c)).build()) {
        runCase(url, prefix, lim, "p", alg, i, c, failures);
        check(lim.failures() == 0, alg + "/" + i + ": failures " + lim.failures());
      }
    });
    check(ran == fileCases && ran >= 40, "cases run step by step: " + ran + " of " + fileCases);
    check(failures.isEmpty(), "vectors step by step:\n  " + String.join("\n  ", failures));

    // All at once: one limiter, a policy per case, every case on its own thread, so decisions
    // of different cases share calls (counted).
    String prefix = "conf:" + RUN + ":java-par:";
    RespClient resp = new RespClient(url, Duration.ofSeconds(30));
    Counting counting = new Counting(resp);
    RedisLimiter.Builder b = RedisLimiter.builder(counting).keyPrefix(prefix).onFailure(FailurePolicy.CLOSED).timeout(Duration.ofSeconds(30));
    eachCase(files, (alg, i, c) -> b.policy(policyOf("c_" + alg + "_" + i, alg, obj(c.get("policy")), c)));
    List<String> parFailures = Collections.synchronizedList(new ArrayList<>());
    AtomicInteger decisions = new AtomicInteger();
    try (RedisLimiter all = b.build()) {
      List<Callable<Void>> tasks = new ArrayList<>();
      eachCase(files, (alg, i, c) -> tasks.add(() -> {
        decisions.addAndGet(list(c.get("steps")).size());
        runCase(url, prefix, all, "c_" + alg + "_" + i, alg, i, c, parFailures);
        return null;
      }));
      AtomicInteger next = new AtomicInteger();
      inFlight(tasks.size(), tasks.size(), () -> tasks.get(next.getAndIncrement()).call());
      check(all.failures() == 0, "all at once: failures " + all.failures());
    }
    resp.close();
    check(parFailures.isEmpty(), "vectors all at once:\n  " + String.join("\n  ", parFailures));
    System.out.println("all cases at once: " + decisions.get() + " steps in " + counting.calls.get() + " FCALLs (of the shared limiter)");

    // The race: 200 acquires, 50 in flight, Redis' clock, the normal path (batching included).
    Map<String, Object> race = obj(Json.parse(Files.readString(conf.resolve("race.json"))));
    for (Object o : list(race.get("cases"))) {
      Map<String, Object> rc = obj(o);
      String alg = (String) rc.get("algorithm");
      try (RedisLimiter lim = RedisLimiter.builder(url).keyPrefix("conf:" + RUN + ":java-race:").timeout(Duration.ofSeconds(30))
          .policy(policyOf("p", alg, obj(rc.get("policy")), rc)).build()) {
        roomForRace(obj(rc.get("policy")));
        List<Decision> ds = inFlight((int) num(race, "requests", 0), (int) num(race, "concurrency", 0), () -> lim.acquire("p", alg, 1));
        long admitted = ds.stream().filter(Decision::allowed).count();
        check(admitted == num(rc, "expect_admitted", -1) && lim.failures() == 0
            && ds.stream().allMatch(d -> d.allowed() || d.reason().equals("over_limit")),
            "race " + alg + ": " + admitted + " admitted, failures " + lim.failures());
      }
    }
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

      // RateLimitFilter on this back-end in Jetty 9: 200 concurrent requests, exactly 10 admitted.
      org.eclipse.jetty.server.Server jetty = new org.eclipse.jetty.server.Server();
      var connector = new org.eclipse.jetty.server.ServerConnector(jetty);
      connector.setHost("127.0.0.1");
      connector.setPort(0);
      jetty.addConnector(connector);
      var ctx = new org.eclipse.jetty.servlet.ServletContextHandler();
      ctx.addServlet(new org.eclipse.jetty.servlet.ServletHolder(new RateLimitFilterTest.Items()), "/items");
      ctx.addFilter(new org.eclipse.jetty.servlet.FilterHolder(new RateLimitFilter(lim, "web", r -> r.getHeader("X-Client"), null, null)),
          "/*", null);
      jetty.setHandler(ctx);
      jetty.start();
      try {
        var http = java.net.http.HttpClient.newBuilder().version(java.net.http.HttpClient.Version.HTTP_1_1).build();
        int port = connector.getLocalPort();
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

  static long timed(Runnable r) {
    long t0 = System.nanoTime();
    r.run();
    return (System.nanoTime() - t0) / 1_000_000;
  }

  /** Redis hanging (SIGSTOP), then gone: the failure policy answers within the timeout, on the
   *  limiter's own RespClient and on an app's client whose own timeout is a minute (issue 31
   *  defect 2); the library is not re-sent through the outage (defect 3). */
  static void outages(Process redis, String url) throws Exception {
    List<Exception> errors = Collections.synchronizedList(new ArrayList<>());
    Counting own = new Counting(new RespClient(url, Duration.ofMillis(250)));
    RespClient slow = new RespClient(url, Duration.ofSeconds(60));
    Policy api = Policy.window("api", "fixed_window", 10, Duration.ofMinutes(1));
    try (RedisLimiter closed = RedisLimiter.builder(own).policy(api).onFailure(FailurePolicy.CLOSED).timeout(Duration.ofMillis(250))
             .onError(errors::add).build();
         RedisLimiter open = RedisLimiter.builder(url).policy(api).onFailure(FailurePolicy.OPEN).timeout(Duration.ofMillis(250)).build();
         RedisLimiter appClient = RedisLimiter.builder(slow).policy(api).onFailure(FailurePolicy.CLOSED).timeout(Duration.ofMillis(250)).build()) {
      // Up before the outage (retried: on a loaded machine a first call, the library's load
      // included, may exceed 250 ms); what follows counts from here.
      for (RedisLimiter l : List.of(closed, open, appClient)) {
        check(RateLimitFilterTest.eventually(() -> l.acquire("api", "o", 1).reason().equals("within_limit")), "before the outage");
      }
      long f0 = closed.failures();
      int e0 = errors.size(), l0 = own.loads.get();
      signal(redis, "STOP");
      for (int i = 0; i < 3; i++) {
        Decision[] d = new Decision[1];
        long ms = timed(() -> d[0] = closed.acquire("api", "o", 1));
        System.out.println("Redis stopped: closed answered " + d[0].reason() + " in " + ms + " ms (timeout 250 ms)");
        // A hang guard, not a claim on speed: far below anything but the 250 ms bound answering.
        check(!d[0].allowed() && d[0].reason().equals("failed_closed") && d[0].retryAfterUs() == 1_000_000 && ms < 10_000,
            "Redis stopped, closed: " + d[0] + " in " + ms + " ms");
      }
      check(closed.failures() - f0 == 3 && errors.size() - e0 == 3, "failures counted and told: " + (closed.failures() - f0) + ", " + (errors.size() - e0));
      check(own.loads.get() == l0, "the library was sent " + (own.loads.get() - l0) + " times through the outage, want 0");
      Decision[] o = new Decision[1];
      long ms = timed(() -> o[0] = open.acquire("api", "o", 1));
      check(o[0].allowed() && o[0].reason().equals("failed_open") && ms < 10_000, "Redis stopped, open: " + o[0] + " in " + ms + " ms");
      Decision[] a = new Decision[1];
      ms = timed(() -> a[0] = appClient.acquire("api", "o", 1));
      System.out.println("Redis stopped: an app's client with a 60 s timeout answered " + a[0].reason() + " in " + ms + " ms");
      check(a[0].reason().equals("failed_closed") && ms < 10_000, "the app's client's call hangs, the limiter answers: " + a[0] + " in " + ms + " ms");
      signal(redis, "CONT");
      check(RateLimitFilterTest.eventually(() -> closed.acquire("api", "o", 1).allowed()), "Redis back: admitted again");
      RateLimitFilterTest.stop(redis);
      Decision gone = closed.acquire("api", "o", 1);
      check(gone.reason().equals("failed_closed"), "Redis gone, closed: " + gone);
      check(open.acquire("api", "o", 1).reason().equals("failed_open"), "Redis gone, open");
    } finally {
      slow.close();
    }
  }

  static void run(Path dir, String... cmd) throws Exception {
    Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true)
        .redirectOutput(dir.resolve("openssl.log").toFile()).start();
    if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) throw new IllegalStateException(String.join(" ", cmd) + " failed");
  }

  /** rediss:// with a password and a database: a redis-server on TLS only (a private CA, a server
   *  certificate for 127.0.0.1) and requirepass; the Process, to stop. */
  static Process tls(Path dir) throws Exception {
    Path d = Files.createDirectories(dir.resolve("tls"));
    run(d, "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
        "-out", "ca.crt", "-days", "2", "-subj", "/CN=ratelimit java test CA");
    run(d, "openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "server.key",
        "-out", "server.csr", "-subj", "/CN=localhost");
    Files.writeString(d.resolve("server.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
    run(d, "openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.crt", "-days", "2", "-extfile", "server.ext");
    int port = RateLimitFilterTest.freePort();
    Process redis = RateLimitFilterTest.start(new ProcessBuilder("redis-server", "--bind", "127.0.0.1", "--port", "0",
        "--tls-port", "" + port, "--tls-cert-file", d.resolve("server.crt").toString(), "--tls-key-file", d.resolve("server.key").toString(),
        "--tls-ca-cert-file", d.resolve("ca.crt").toString(), "--tls-auth-clients", "no", "--requirepass", "s3cret",
        "--save", "", "--appendonly", "no", "--dir", d.toString()).redirectErrorStream(true).redirectOutput(d.resolve("redis.log").toFile()));
    RateLimitFilterTest.waitPort(port, redis, "redis-server (TLS)");

    java.security.KeyStore trust = java.security.KeyStore.getInstance("PKCS12");
    trust.load(null, null);
    try (var in = Files.newInputStream(d.resolve("ca.crt"))) {
      trust.setCertificateEntry("ca", java.security.cert.CertificateFactory.getInstance("X.509").generateCertificate(in));
    }
    var tmf = javax.net.ssl.TrustManagerFactory.getInstance(javax.net.ssl.TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(trust);
    javax.net.ssl.SSLContext ctx = javax.net.ssl.SSLContext.getInstance("TLS");
    ctx.init(null, tmf.getTrustManagers(), null);

    String url = "rediss://:s3cret@127.0.0.1:" + port + "/2";
    Policy two = Policy.window("api", "sliding_window_log", 2, Duration.ofMinutes(1));
    try (RedisLimiter lim = RedisLimiter.builder(url).tls(ctx).timeout(Duration.ofSeconds(30)).onFailure(FailurePolicy.CLOSED)
        .policy(two).build()) {
      String got = "";
      for (int i = 0; i < 3; i++) got += lim.acquire("api", "tls", 1).reason() + " ";
      check(got.equals("within_limit within_limit over_limit ") && lim.failures() == 0, "rediss:// with a password: " + got);
      try (RespClient db2 = new RespClient(url, Duration.ofSeconds(30), ctx);
           RespClient db0 = new RespClient("rediss://:s3cret@127.0.0.1:" + port + "/0", Duration.ofSeconds(30), ctx)) {
        check(Long.valueOf(1).equals(db2.execute("EXISTS", "rl:{tls}:api")) && Long.valueOf(0).equals(db0.execute("EXISTS", "rl:{tls}:api")),
            "the state is in database 2");
      }
    }
    // Refused: a wrong password, and a CA the JVM does not trust: the failure policy, counted.
    List<RedisLimiter.Builder> refusing = List.of(RedisLimiter.builder("rediss://:wrong@127.0.0.1:" + port + "/2").tls(ctx),
        RedisLimiter.builder(url));
    List<String> why = List.of("WRONGPASS", "PKIX");
    for (int i = 0; i < 2; i++) {
      RedisLimiter.Builder b = refusing.get(i);
      List<Exception> errs = Collections.synchronizedList(new ArrayList<>());
      try (RedisLimiter lim = b.timeout(Duration.ofSeconds(30)).onFailure(FailurePolicy.CLOSED).onError(errs::add).policy(two).build()) {
        Decision refused = lim.acquire("api", "tls", 1);
        check(refused.reason().equals("failed_closed") && lim.failures() == 1 && errs.size() == 1
            && String.valueOf(errs.get(0)).contains(why.get(i)), "refused TLS or AUTH: " + refused + ", failures " + lim.failures() + ", errors " + errs);
      }
    }
    return redis;
  }
}
