// ConcurrencyFilterTest.java — ConcurrencyFilter (issue 30) in Debian's Jetty 9 against a real
// ratelimitd (the project's build; memory store, where adaptive limits live, and a Redis store for
// the policy conflict): at limit 2, 3 concurrent slow requests: exactly 2 run and the 3rd gets
// ratelimitd's 429 with Retry-After; the leases come back; the key defaults to the client address,
// X-Forwarded-For believed only from trusted proxies; a handler answering 500, throwing, or
// overrunning the filter's timeout lowers the adaptive (AIMD) limit, read from a later acquire,
// while one answering 200 does not; the priority header; the filter declared by init-params; the
// jakarta twin's init; a lease refused policy_conflict answered by the failure policy; then
// ratelimitd stopped — open runs the handler, closed answers 429 with Retry-After: 1. The lease API
// itself: LeaseApiTest, which uses this file's daemon and helpers.
// A plain main like the other tests (RateLimitFilterTest's process and check helpers): every
// check can fail and is counted; exit 1 if any did. Every process dies with this JVM.
package dev.ratelimit.client;

import static dev.ratelimit.client.RateLimitFilterTest.check;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.servlet.DispatcherType;
import javax.servlet.http.HttpServlet;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.servlet.FilterHolder;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

public final class ConcurrencyFilterTest {
  static final String RUN = RateLimitFilterTest.RUN;

  /** Holds each request until GATE opens; counts the requests that got in. */
  public static class Slow extends HttpServlet {
    private static final long serialVersionUID = 1L;
    static final AtomicInteger ENTERED = new AtomicInteger();
    static volatile CountDownLatch gate = new CountDownLatch(1);

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse res) throws IOException {
      ENTERED.incrementAndGet();
      try {
        gate.await(30, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      res.setContentType("application/json");
      res.getWriter().write("{\"done\":true}");
    }
  }

  /** Answers ?status=N (default 200) after ?sleep=ms; counts the requests it served. */
  public static class Status extends HttpServlet {
    private static final long serialVersionUID = 1L;
    static final AtomicInteger SERVED = new AtomicInteger();

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse res) throws IOException {
      SERVED.incrementAndGet();
      if (req.getParameter("sleep") != null) {
        try {
          Thread.sleep(Long.parseLong(req.getParameter("sleep")));
        } catch (InterruptedException e) {
          Thread.currentThread().interrupt();
        }
      }
      if (req.getParameter("throw") != null) throw new IllegalStateException("the handler failed");
      res.setStatus(req.getParameter("status") == null ? 200 : Integer.parseInt(req.getParameter("status")));
      res.setContentType("application/json");
      res.getWriter().write("{\"served\":true}");
    }
  }

  static Process daemon(Path dir, int port, String store) throws Exception {
    Path config = dir.resolve("ratelimit-" + port + ".yaml");
    Files.writeString(config, "listen: 127.0.0.1:" + port + "\nstore: " + store + "\npolicies:\n"
        + "  db: { algorithm: concurrency, limit: 2, lease_ttl: 30s }\n"
        + "  dbw: { algorithm: concurrency, limit: 2, lease_ttl: 30s, max_wait: 10s, max_queue: 10 }\n"
        + (store.contains("memory")
            ? "  ad: { algorithm: concurrency, limit: adaptive, estimator: aimd, min_limit: 1, initial_limit: 4, max_limit: 8, sample_window: 0, lease_ttl: 30s }\n"
              + "  pri: { algorithm: concurrency, limit: 2, lease_ttl: 30s, classes: default }\n"
            : "")
        + "  api: { algorithm: sliding_window_log, limit: 10, window: 60s }\n");
    String bin = System.getenv().getOrDefault("RATELIMIT_BIN_DIR", "build/bin");
    Process p = RateLimitFilterTest.start(new ProcessBuilder(bin + "/ratelimitd", "--config", config.toString())
        .redirectErrorStream(true).redirectOutput(dir.resolve("ratelimitd-" + port + ".log").toFile()));
    RateLimitFilterTest.waitPort(port, p, "ratelimitd");
    return p;
  }

  record Got(int status, java.net.http.HttpHeaders headers, String body) {
    String h(String name) { return headers.firstValue(name).orElse(null); }
  }

  static HttpRequest request(int port, String path, String... headers) {
    HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).timeout(Duration.ofSeconds(60));
    for (int i = 0; i < headers.length; i += 2) b.header(headers[i], headers[i + 1]);
    return b.build();
  }

  static Got get(HttpClient http, int port, String path, String... headers) throws Exception {
    HttpResponse<String> r = http.send(request(port, path, headers), HttpResponse.BodyHandlers.ofString());
    return new Got(r.statusCode(), r.headers(), r.body());
  }

  static String code(Runnable r) {
    try {
      r.run();
      return "no exception";
    } catch (RateLimitException e) {
      return e.code();
    }
  }

  /** The adaptive policy's limit for `key` now: a lease's answer (released again, no outcome). */
  static long limitOf(RatelimitdClient client, String key) {
    Lease l = client.acquireLease("ad", key, 1);
    client.releaseLease(l, Outcome.NONE);
    return l.limit();
  }

  public static void main(String[] args) throws Exception {
    Path dir = Files.createTempDirectory("rl-java-lease-");
    Process daemon = null, redis = null, redisDaemon = null;
    Server jetty = null;
    try {
      int dp = RateLimitFilterTest.freePort();
      daemon = daemon(dir, dp, "{ type: memory }");
      String url = "http://127.0.0.1:" + dp;
      // Generous timeouts: hang guards on a loaded machine, not claims on speed.
      RatelimitdClient client = new RatelimitdClient(url, FailurePolicy.CLOSED, Duration.ofSeconds(30), null);

      // Priority classes (classes: default; limit 2: sheddable keeps half, critical all).
      String kp = "pri-" + RUN;
      Lease s1 = client.acquireLease("pri", kp, 1, new LeaseOptions("sheddable", null));
      check(s1.allowed(), "sheddable holds its half of pri: " + s1);

      // The filter in Jetty 9.
      jetty = new Server();
      ServerConnector connector = new ServerConnector(jetty);
      connector.setHost("127.0.0.1");
      connector.setPort(0);
      jetty.addConnector(connector);
      ServletContextHandler ctx = new ServletContextHandler();
      ctx.addServlet(new ServletHolder(new Slow()), "/slow");
      for (String p : List.of("/ad/status", "/pri", "/init", "/addr", "/xff", "/open", "/closed")) ctx.addServlet(new ServletHolder(new Status()), p);
      EnumSet<DispatcherType> req = EnumSet.of(DispatcherType.REQUEST);
      List<RuntimeException> releaseErrors = Collections.synchronizedList(new ArrayList<>());
      ctx.addFilter(new FilterHolder(new ConcurrencyFilter(client, "db", r -> r.getHeader("X-Client"), null, null)
          .onReleaseError(releaseErrors::add)), "/slow", req);
      ctx.addFilter(new FilterHolder(new ConcurrencyFilter(client, "ad", r -> r.getHeader("X-Client"), null, null)
          .timeout(Duration.ofMillis(150)).onReleaseError(releaseErrors::add)), "/ad/*", req);
      ctx.addFilter(new FilterHolder(new ConcurrencyFilter(client, "pri", r -> r.getHeader("X-Client"), null, null)
          .priorityHeader("X-Priority")), "/pri", req);
      ctx.addFilter(new FilterHolder(new ConcurrencyFilter(client, "db", null, null, null)), "/addr", req);
      FilterHolder declared = new FilterHolder(ConcurrencyFilter.class);
      declared.setInitParameters(Map.of("ratelimitd-url", url, "policy", "db", "key-header", "X-Client", "on-failure", "closed",
          "timeout-ms", "30000", "handler-timeout-ms", "60000"));
      ctx.addFilter(declared, "/init", req);
      FilterHolder proxied = new FilterHolder(ConcurrencyFilter.class);
      proxied.setInitParameters(Map.of("ratelimitd-url", url, "policy", "db", "trusted-proxies", "127.0.0.1, ::1"));
      ctx.addFilter(proxied, "/xff", req);
      RatelimitdClient open = new RatelimitdClient(url, FailurePolicy.OPEN, Duration.ofSeconds(5), null);
      RatelimitdClient closed = new RatelimitdClient(url, FailurePolicy.CLOSED, Duration.ofSeconds(5), null);
      ctx.addFilter(new FilterHolder(new ConcurrencyFilter(open, "db", r -> r.getHeader("X-Client"), null, null)), "/open", req);
      ctx.addFilter(new FilterHolder(new ConcurrencyFilter(closed, "db", r -> r.getHeader("X-Client"), null, null)), "/closed", req);
      jetty.setHandler(ctx);
      jetty.start();
      int port = connector.getLocalPort();
      HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

      // Limit 2, three concurrent slow requests: 2 run, the 3rd is ratelimitd's 429 while they do.
      String ks = "slow-" + RUN;
      List<CompletableFuture<HttpResponse<String>>> slow = new ArrayList<>();
      for (int i = 0; i < 3; i++) slow.add(http.sendAsync(request(port, "/slow", "X-Client", ks), HttpResponse.BodyHandlers.ofString()));
      check(RateLimitFilterTest.eventually(() -> Slow.ENTERED.get() == 2 && slow.stream().filter(CompletableFuture::isDone).count() == 1),
          "2 in the handler and 1 answered: entered " + Slow.ENTERED.get());
      HttpResponse<String> refused = slow.stream().filter(CompletableFuture::isDone).findFirst().orElseThrow().get();
      Map<String, Object> rb = Json.parseObject(refused.body());
      long retry = Long.parseLong(refused.headers().firstValue("Retry-After").orElse("0"));
      check(refused.statusCode() == 429 && retry >= 1 && retry <= 30
          && refused.headers().firstValue("RateLimit-Policy").orElse("").startsWith("\"db\";q=2")
          && ("\"db\";r=0;t=" + retry).equals(refused.headers().firstValue("RateLimit").orElse(""))
          && "no-store".equals(refused.headers().firstValue("Cache-Control").orElse(null))
          && Boolean.FALSE.equals(rb.get("allowed")) && "db".equals(rb.get("policy")) && Double.valueOf(2).equals(rb.get("limit")),
          "the refused request: " + refused.statusCode() + " " + refused.headers().map() + " " + refused.body());
      check(Slow.ENTERED.get() == 2, "the refused request never reached the handler");
      Slow.gate.countDown();
      int ok = 0;
      for (CompletableFuture<HttpResponse<String>> f : slow) {
        HttpResponse<String> r = f.get(60, TimeUnit.SECONDS);
        if (r.statusCode() == 200) {
          ok++;
          check(r.headers().firstValue("RateLimit-Policy").orElse("").startsWith("\"db\";q=2")
              && r.headers().firstValue("RateLimit").isPresent(), "admitted answer's fields " + r.headers().map());
        }
      }
      check(ok == 2, ok + " of 3 ran; want 2");
      Lease after = client.acquireLease("db", ks, 1);
      check(after.allowed() && after.remaining() == 1, "the filter released both leases: " + after);
      client.releaseLease(after, Outcome.NONE);

      // The adaptive policy learns from the outcomes: one key per step, each starting at 4.
      String ka = "ad-" + RUN;
      check(limitOf(client, ka + "-ok") == 4 && limitOf(client, ka + "-500") == 4 && limitOf(client, ka + "-throw") == 4
          && limitOf(client, ka + "-slow") == 4, "initial_limit 4 for every key");
      Got g = get(http, port, "/ad/status", "X-Client", ka + "-ok");
      check(g.status() == 200 && limitOf(client, ka + "-ok") == 4, "a 200 leaves the limit: " + limitOf(client, ka + "-ok"));
      g = get(http, port, "/ad/status?status=500", "X-Client", ka + "-500");
      check(g.status() == 500 && limitOf(client, ka + "-500") == 3, "a 500 is dropped, 4 -> 3: " + limitOf(client, ka + "-500"));
      g = get(http, port, "/ad/status?throw=1", "X-Client", ka + "-throw");
      check(g.status() == 500 && limitOf(client, ka + "-throw") == 3, "an exception is dropped, 4 -> 3: " + limitOf(client, ka + "-throw"));
      g = get(http, port, "/ad/status?sleep=400", "X-Client", ka + "-slow");
      check(g.status() == 200 && limitOf(client, ka + "-slow") == 3, "over the 150 ms timeout, 4 -> 3: " + limitOf(client, ka + "-slow"));
      check(releaseErrors.isEmpty(), "release errors " + releaseErrors);

      // The priority header is sent: sheddable is refused (its half is held by s1), critical runs,
      // a class the policy lacks is the request's fault (400).
      g = get(http, port, "/pri", "X-Client", kp, "X-Priority", "sheddable");
      check(g.status() == 429 && g.h("Retry-After") != null, "sheddable through the filter: " + g.status());
      g = get(http, port, "/pri", "X-Client", kp, "X-Priority", "critical");
      check(g.status() == 200, "critical through the filter: " + g.status());
      g = get(http, port, "/pri", "X-Client", kp, "X-Priority", "gold");
      check(g.status() == 400 && g.body().contains("\"error\":\"unknown_priority\""), "an unknown class: " + g.status() + " " + g.body());
      client.releaseLease(s1, Outcome.NONE);
      g = get(http, port, "/pri", "X-Client", kp);
      check(g.status() == 200, "no X-Priority: the lowest class, admitted now that its half is free: " + g.status());

      // Declared by init-params; a missing key; a declaration without a policy fails init.
      g = get(http, port, "/init", "X-Client", "init-" + RUN);
      check(g.status() == 200 && g.h("RateLimit-Policy") != null && g.h("RateLimit-Policy").startsWith("\"db\";q=2"),
          "declared filter: " + g.status() + " " + g.headers().map());
      g = get(http, port, "/init");
      check(g.status() == 400 && g.body().contains("\"error\":\"missing_key\""), "no key: " + g.status() + " " + g.body());
      g = get(http, port, "/init", "X-Client", "k".repeat(600));
      check(g.status() == 400 && g.body().contains("\"error\":\"invalid_key\""), "a 600-byte key: " + g.status() + " " + g.body());
      // No key function: the client's address is the key (both of 127.0.0.1's units held: 429).
      check(get(http, port, "/addr").status() == 200, "keyed by address, a unit free");
      Lease x1 = client.acquireLease("db", "127.0.0.1", 1), x2 = client.acquireLease("db", "127.0.0.1", 1);
      g = get(http, port, "/addr");
      check(x1.allowed() && x2.allowed() && g.status() == 429, "keyed by address, both held: " + g.status());
      g = get(http, port, "/addr", "X-Forwarded-For", "192.0.2.1");
      check(g.status() == 429, "no trusted proxies: X-Forwarded-For ignored, keyed by the peer: " + g.status());
      client.releaseLease(x1, Outcome.NONE);
      client.releaseLease(x2, Outcome.NONE);
      // Behind a trusted proxy (init-param trusted-proxies) the default key is the client that
      // X-Forwarded-For names, as RateLimitFilter's (ClientIp): two clients, two keys.
      Lease y1 = client.acquireLease("db", "192.0.2.1", 1), y2 = client.acquireLease("db", "192.0.2.1", 1);
      g = get(http, port, "/xff", "X-Forwarded-For", "192.0.2.1");
      Got other = get(http, port, "/xff", "X-Forwarded-For", "198.51.100.7, 192.0.2.2");
      check(y1.allowed() && y2.allowed() && g.status() == 429 && other.status() == 200,
          "through a trusted proxy: 192.0.2.1's units held " + g.status() + ", 192.0.2.2 free " + other.status());
      client.releaseLease(y1, Outcome.NONE);
      client.releaseLease(y2, Outcome.NONE);
      Map<String, String> noPolicy = Map.of("ratelimitd-url", url);
      try {
        new ConcurrencyFilter().init(new javax.servlet.FilterConfig() {
          public String getFilterName() { return "c"; }
          public javax.servlet.ServletContext getServletContext() { return null; }
          public String getInitParameter(String n) { return noPolicy.get(n); }
          public java.util.Enumeration<String> getInitParameterNames() { return Collections.enumeration(noPolicy.keySet()); }
        });
        check(false, "init without a policy was accepted");
      } catch (javax.servlet.ServletException e) {
        check(e.getMessage().contains("policy"), "init without a policy: " + e.getMessage());
      }
      try {
        new JakartaConcurrencyFilter().init(new jakarta.servlet.FilterConfig() {
          public String getFilterName() { return "c"; }
          public jakarta.servlet.ServletContext getServletContext() { return null; }
          public String getInitParameter(String n) { return noPolicy.get(n); }
          public java.util.Enumeration<String> getInitParameterNames() { return Collections.enumeration(noPolicy.keySet()); }
        });
        check(false, "jakarta init without a policy was accepted");
      } catch (jakarta.servlet.ServletException e) {
        check(e.getMessage().contains("JakartaConcurrencyFilter"), "jakarta init without a policy: " + e.getMessage());
      }

      // The Redis store, for a lease refused policy_conflict.
      int rp = RateLimitFilterTest.freePort(), rdp = RateLimitFilterTest.freePort();
      redis = RateLimitFilterTest.startRedis(dir, rp);
      redisDaemon = daemon(dir, rdp, "{ type: redis, url: \"redis://127.0.0.1:" + rp + "/0\", key_prefix: \"rl:javalease-" + RUN
          + ":\", on_failure: closed, command_timeout: 30s }");
      RatelimitdClient viaRedis = new RatelimitdClient("http://127.0.0.1:" + rdp, FailurePolicy.CLOSED, Duration.ofSeconds(30), null);

      // Issue 31 defect 8: the key holds another definition's state (a RedisLimiter's fixed
      // window under the name db): the acquire is refused policy_conflict, and the filter answers
      // it as ratelimitd failing — OPEN runs the handler, CLOSED is the failure's 429 with
      // Retry-After 1 — counted in failures(), never a 429 with the conflict's wait.
      String kc = "conflict-" + RUN;
      try (RedisLimiter window = RedisLimiter.builder("redis://127.0.0.1:" + rp + "/0").keyPrefix("rl:javalease-" + RUN + ":")
          .timeout(Duration.ofSeconds(30)).policy(Policy.window("db", "fixed_window", 10, Duration.ofMinutes(1))).build()) {
        check(window.acquire("db", kc, 1).allowed(), "the fixed window takes its key");
      }
      Lease conflict = viaRedis.acquireLease("db", kc, 1);
      check(!conflict.allowed() && "policy_conflict".equals(conflict.reason()) && conflict.id() == null
          && conflict.retryAfter().compareTo(Duration.ZERO) > 0, "a lease on another definition's key: " + conflict);
      for (FailurePolicy fp : new FailurePolicy[] {FailurePolicy.OPEN, FailurePolicy.CLOSED}) {
        RatelimitdClient cc = new RatelimitdClient("http://127.0.0.1:" + rdp, fp, Duration.ofSeconds(30), null);
        Server small = new Server();
        ServerConnector sc = new ServerConnector(small);
        sc.setHost("127.0.0.1");
        sc.setPort(0);
        small.addConnector(sc);
        ServletContextHandler sctx = new ServletContextHandler();
        sctx.addServlet(new ServletHolder(new Status()), "/conflict");
        sctx.addFilter(new FilterHolder(new ConcurrencyFilter(cc, "db", r -> r.getHeader("X-Client"), null, null)), "/conflict", req);
        small.setHandler(sctx);
        small.start();
        try {
          int served = Status.SERVED.get();
          var got = get(http, sc.getLocalPort(), "/conflict", "X-Client", kc);
          boolean answered = fp == FailurePolicy.OPEN ? got.status() == 200 && Status.SERVED.get() == served + 1
              : got.status() == 429 && "1".equals(got.h("Retry-After")) && Status.SERVED.get() == served;
          check(answered && cc.failures() == 1, "the filter on a conflict, " + fp + ": " + got.status() + " " + got.headers().map()
              + " " + got.body() + ", failures " + cc.failures());
        } finally {
          small.stop();
        }
      }

      // ratelimitd stopped: the failure policy.
      RateLimitFilterTest.stop(daemon);
      daemon = null;
      int before = Status.SERVED.get();
      g = get(http, port, "/open", "X-Client", "down-" + RUN);
      check(g.status() == 200 && Status.SERVED.get() == before + 1 && g.h("RateLimit-Policy") == null && open.failures() >= 1,
          "open with ratelimitd down runs the handler: " + g.status() + " failures " + open.failures());
      g = get(http, port, "/closed", "X-Client", "down-" + RUN);
      check(g.status() == 429 && "1".equals(g.h("Retry-After")) && g.h("RateLimit-Policy") == null && Status.SERVED.get() == before + 1
          && g.body().contains("\"allowed\":false") && closed.failures() >= 1,
          "closed with ratelimitd down: " + g.status() + " " + g.headers().map() + " " + g.body());
    } finally {
      if (jetty != null) jetty.stop();
      RateLimitFilterTest.stop(daemon);
      RateLimitFilterTest.stop(redisDaemon);
      RateLimitFilterTest.stop(redis);
    }
    int failed = RateLimitFilterTest.failed;
    System.out.println(failed == 0 ? "ConcurrencyFilterTest: all checks passed" : "ConcurrencyFilterTest: " + failed + " checks failed");
    System.exit(failed == 0 ? 0 : 1);
  }
}
