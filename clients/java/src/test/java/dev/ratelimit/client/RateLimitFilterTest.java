// RateLimitFilterTest.java — the Java client as users run it: a Servlet app in Debian's Jetty 9
// behind RateLimitFilter, decided by a real ratelimitd (the project's build) on real Redis,
// limited at 10 per minute under 200 concurrent requests (the acceptance); the header
// text equal to ratelimitd's own for the same decision; bad input; the filter's options of issue
// 31 (FilterFeatures.java); Redis down behind ratelimitd; ratelimitd down. A plain main (no test framework is packaged with this JDK setup): every
// check failing is counted, exit 1 if any.
// Arguments: none; environment RATELIMIT_BIN_DIR, RATELIMIT_TEST_REDIS_URL (else a redis-server
// is started). Every process is stopped by handle, and dies with this JVM however it dies
// (start); every wait is bounded.
package dev.ratelimit.client;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import javax.servlet.http.HttpServlet;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.servlet.FilterHolder;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

public final class RateLimitFilterTest {
  static int failed = 0, checks = 0;
  static final String RUN = ProcessHandle.current().pid() + "-" + System.currentTimeMillis();

  static synchronized void check(boolean ok, String what) {
    checks++;
    if (!ok) {
      failed++;
      System.err.println("FAIL: " + what);
    }
  }

  static int freePort() throws IOException {
    try (ServerSocket s = new ServerSocket(0)) { return s.getLocalPort(); }
  }

  static void waitPort(int port, Process p, String what) throws Exception {
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
    while (System.nanoTime() < end) {
      if (p != null && !p.isAlive()) throw new IllegalStateException(what + " exited with " + p.exitValue());
      try {
        new Socket("127.0.0.1", port).close();
        return;
      } catch (IOException e) {
        Thread.sleep(50);
      }
    }
    throw new IllegalStateException(what + " did not listen on " + port + " within 10 s");
  }

  /** The one thread that starts processes: a daemon that lives as long as the JVM. */
  static final ExecutorService SPAWNER = Executors.newSingleThreadExecutor(r -> {
    Thread t = new Thread(r, "spawner");
    t.setDaemon(true);
    return t;
  });

  /** Starts `pb`'s command as a child that the kernel SIGKILLs when this JVM dies, however it
   *  dies (a runner killed by a timeout runs no finally, and an orphaned redis-server or
   *  ratelimitd holds its port and files): util-linux's setpriv sets PR_SET_PDEATHSIG and execs
   *  the command, so the Process is the server's own pid. The signal follows the *thread* that
   *  forked (ProcessBuilder forks from the calling thread), and fires when that thread ends even
   *  if the JVM lives on: every start goes through SPAWNER, whose one thread ends only with the
   *  JVM, whichever thread asks. */
  static Process start(ProcessBuilder pb) throws Exception {
    List<String> cmd = new ArrayList<>(List.of("setpriv", "--pdeathsig", "KILL", "--"));
    cmd.addAll(pb.command());
    pb.command(cmd);
    try {
      return SPAWNER.submit(pb::start).get(30, TimeUnit.SECONDS);
    } catch (java.util.concurrent.ExecutionException e) {
      throw e.getCause() instanceof Exception c ? c : e;
    }
  }

  static void stop(Process p) throws InterruptedException {
    if (p == null) return;
    p.destroy();
    if (!p.waitFor(5, TimeUnit.SECONDS)) p.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
  }

  public static class Items extends HttpServlet {
    private static final long serialVersionUID = 1L;

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse res) throws IOException {
      res.setContentType("application/json");
      res.getWriter().write("{\"items\":[]}");
    }
  }

  /** The "model": answers with its usage (?tokens=N) in X-Usage-Tokens, as an LLM API's usage field. */
  public static class Chat extends HttpServlet {
    private static final long serialVersionUID = 1L;

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse res) throws IOException {
      if (req.getParameter("tokens") != null) res.setHeader("X-Usage-Tokens", req.getParameter("tokens"));
      res.setContentType("application/json");
      res.getWriter().write("{\"answer\":\"...\"}");
    }
  }

  /** Polls `cond` every 20 ms; false after 30 s (a hang guard, not a claim on speed). */
  static boolean eventually(java.util.function.BooleanSupplier cond) throws InterruptedException {
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
    while (!cond.getAsBoolean()) {
      if (System.nanoTime() > end) return false;
      Thread.sleep(20);
    }
    return true;
  }

  record Got(int status, java.net.http.HttpHeaders headers, String body) {
    String h(String name) { return headers.firstValue(name).orElse(null); }
  }

  static Got get(HttpClient http, int port, String path, String client) throws Exception {
    HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path))
        .header("X-Client", client).timeout(Duration.ofSeconds(30)).build(), HttpResponse.BodyHandlers.ofString());
    return new Got(r.statusCode(), r.headers(), r.body());
  }

  static Process startRedis(Path dir, int port) throws Exception {
    Process p = start(new ProcessBuilder("redis-server", "--bind", "127.0.0.1", "--port", "" + port, "--save", "", "--appendonly", "no",
        "--dir", dir.toString()).redirectErrorStream(true).redirectOutput(dir.resolve("redis-" + port + ".log").toFile()));
    waitPort(port, p, "redis-server");
    return p;
  }

  /** A real ratelimitd on `redisUrl` with policy api (10 per 60 s) and the store's `onFailure`;
   *  its URL is http://127.0.0.1:`port`. */
  static Process startDaemon(Path dir, int port, String redisUrl, String onFailure) throws Exception {
    return startDaemon(dir, port, redisUrl, onFailure, "");
  }

  /** The same with `extra` top-level settings (e.g. "headers: draft6\n"). */
  static Process startDaemon(Path dir, int port, String redisUrl, String onFailure, String extra) throws Exception {
    Path config = dir.resolve("ratelimit-" + port + ".yaml");
    Files.writeString(config, extra + "listen: 127.0.0.1:" + port + "\nstore: { type: redis, url: \"" + redisUrl + "\", key_prefix: \"rl:java-"
        + RUN + ":\", on_failure: " + onFailure + ", command_timeout: 30s }\npolicies:\n  api: { algorithm: sliding_window_log, limit: 10, window: 60s }\n"
        + "  tokens: { algorithm: sliding_window_log, limit: 10000, window: 1h }\n");
    String bin = System.getenv().getOrDefault("RATELIMIT_BIN_DIR", "build/bin");
    Process p = start(new ProcessBuilder(bin + "/ratelimitd", "--config", config.toString()).redirectErrorStream(true)
        .redirectOutput(dir.resolve("ratelimitd-" + port + ".log").toFile()));
    waitPort(port, p, "ratelimitd");
    return p;
  }

  public static void main(String[] args) throws Exception {
    Process redis = null, daemon = null, ownRedis = null, daemonClosed = null, daemonOpen = null;
    Server jetty = null;
    Path dir = Files.createTempDirectory("rl-java-");
    try {
      String redisUrl = System.getenv("RATELIMIT_TEST_REDIS_URL");
      if (redisUrl == null || redisUrl.isEmpty()) {
        int rp = freePort();
        redis = startRedis(dir, rp);
        redisUrl = "redis://127.0.0.1:" + rp + "/0";
      }
      int dp = freePort();
      daemon = startDaemon(dir, dp, redisUrl, "closed");
      String daemonUrl = "http://127.0.0.1:" + dp;
      // Generous timeouts, each a hang guard and not a claim: a loaded machine must not turn into
      // failure-policy answers (under 4 CPU hogs the Node client's 200-request race took 4.6 s end
      // to end, against the 5 s the limiter's and ratelimitd's were); 30 s.
      RatelimitdClient client = new RatelimitdClient(daemonUrl, FailurePolicy.CLOSED, Duration.ofSeconds(30), null);

      // The Servlet app in Jetty 9, the filter in front of /items (not of /healthz).
      jetty = new Server();
      ServerConnector connector = new ServerConnector(jetty);
      connector.setHost("127.0.0.1");
      connector.setPort(0);
      jetty.addConnector(connector);
      ServletContextHandler ctx = new ServletContextHandler();
      ctx.addServlet(new ServletHolder(new Items()), "/items");
      ctx.addServlet(new ServletHolder(new Items()), "/healthz");
      ctx.addServlet(new ServletHolder(new Chat()), "/chat");
      ctx.addFilter(new FilterHolder(new RateLimitFilter(client, "api", r -> r.getHeader("X-Client"), null,
          r -> r.getRequestURI().equals("/healthz") || r.getRequestURI().equals("/chat"))), "/*", null);
      // Usage after the response: an estimate of 500 tokens, reconciled from X-Usage-Tokens.
      List<RuntimeException> reportErrors = java.util.Collections.synchronizedList(new ArrayList<>());
      ctx.addFilter(new FilterHolder(new RateLimitFilter(client, "tokens", r -> r.getHeader("X-Client"), r -> 500, null)
          .usage((rq, rs) -> rs.getHeader("X-Usage-Tokens") == null ? null : Long.valueOf(rs.getHeader("X-Usage-Tokens")),
              reportErrors::add)), "/chat", null);
      jetty.setHandler(ctx);
      jetty.start();
      int port = connector.getLocalPort();
      HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

      // 200 concurrent requests (200 threads released together): exactly 10 pass, every denial
      // is ratelimitd's 429.
      ExecutorService pool = Executors.newFixedThreadPool(200);
      CountDownLatch start = new CountDownLatch(1);
      List<Future<Got>> futures = new ArrayList<>();
      for (int i = 0; i < 200; i++) {
        futures.add(pool.submit(() -> {
          if (!start.await(30, TimeUnit.SECONDS)) throw new IllegalStateException("the requests were never released");
          return get(http, port, "/items", "java-" + RUN);
        }));
      }
      start.countDown();
      int ok = 0, denied = 0;
      Pattern admittedItem = Pattern.compile("^\"api\";r=[0-9];t=60$");
      for (Future<Got> f : futures) {
        Got a = f.get(60, TimeUnit.SECONDS);
        if (a.status() == 200) {
          ok++;
          check("\"api\";q=10;w=60".equals(a.h("RateLimit-Policy")) && admittedItem.matcher(a.h("RateLimit")).matches()
              && a.body().equals("{\"items\":[]}"), "admitted answer " + a.headers().map() + " " + a.body());
        } else if (a.status() == 429) {
          denied++;
          int retry = Integer.parseInt(a.h("Retry-After"));
          var body = Json.parseObject(a.body());
          check(retry >= 1 && retry <= 60 && "\"api\";q=10;w=60".equals(a.h("RateLimit-Policy"))
              && ("\"api\";r=0;t=" + retry).equals(a.h("RateLimit")) && "no-store".equals(a.h("Cache-Control"))
              && a.h("Content-Type").startsWith("application/json") && Boolean.FALSE.equals(body.get("allowed"))
              && "api".equals(body.get("policy")) && Double.valueOf(10).equals(body.get("limit"))
              && Math.ceil((Double) body.get("retry_after_ms") / 1000) == retry, "denied answer " + a.headers().map() + " " + a.body());
        } else {
          check(false, "status " + a.status() + " " + a.body());
        }
      }
      pool.shutdown();
      check(ok == 10 && denied == 190, ok + " admitted and " + denied + " denied; want 10 and 190");
      Got skipped = get(http, port, "/healthz", "java-" + RUN);
      check(skipped.status() == 200 && skipped.h("RateLimit") == null, "skipped request");

      // Header text: ratelimitd's own answer, read by the client and rendered by Headers.
      for (int i = 0; i < 12; i++) {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(daemonUrl + "/v1/acquire"))
            .POST(HttpRequest.BodyPublishers.ofString("{\"key\":\"hdr-" + RUN + "\",\"policy\":\"api\"}"))
            .header("Content-Type", "application/json").build(), HttpResponse.BodyHandlers.ofString());
        Decision d = client.read(r.statusCode(), r.headers().firstValue("RateLimit-Policy").orElse(""), r.body());
        Headers.Answer mine = RateLimitFilter.answer(client, "api", d);
        check(mine.status() == r.statusCode() && mine.body().equals(r.body()), "request " + i + ": " + mine.body() + " vs " + r.body());
        for (String[] h : mine.headers()) {
          check(h[1].equals(r.headers().firstValue(h[0]).orElse(null)), "request " + i + ": " + h[0] + " " + h[1] + " vs " + r.headers().firstValue(h[0]));
        }
        for (String name : List.of("RateLimit-Policy", "RateLimit", "Retry-After", "Cache-Control")) {
          boolean mineHas = mine.headers().stream().anyMatch(h -> h[0].equals(name));
          check(mineHas == r.headers().firstValue(name).isPresent(), "request " + i + ": " + name + " presence");
        }
      }

      // Bad input: RateLimitException (an IllegalArgumentException) with ratelimitd's code.
      for (Object[] c : new Object[][] {{"nope", "k", 1L, "unknown_policy"}, {"api", "k", 0L, "invalid_cost"},
          {"api", "k".repeat(513), 1L, "invalid_key"}, {"api", "", 1L, "invalid_key"}}) {
        try {
          client.acquire((String) c[0], (String) c[1], (Long) c[2]);
          check(false, "accepted " + c[0] + "/" + ((String) c[1]).length() + "/" + c[2]);
        } catch (RateLimitException e) {
          check(e.code().equals(c[3]), "code " + e.code() + " for " + c[3] + ": " + e.getMessage());
        }
      }

      // Usage known after the fact (POST /v1/report, docs/usage.md): recorded past the limit (a
      // debt: the next acquire is refused), a refund gives units back, bad input throws.
      String rk = "report-" + RUN;
      check(client.acquire("api", rk, 5).remaining() == 5, "acquire 5 before the report");
      Decision debt = client.report("api", rk, 10);
      check(debt.allowed() && debt.remaining() == 0 && "within_limit".equals(debt.reason()), "report +10: " + debt);
      Decision refused = client.acquire("api", rk, 1);
      check(!refused.allowed() && refused.retryAfterUs() > 0, "acquire in debt: " + refused);
      Decision refund = client.report("api", rk, -12);
      check(refund.allowed() && refund.remaining() == 7, "refund -12 of 15 held: " + refund);
      for (Object[] c : new Object[][] {{"nope", 1L, "unknown_policy"}, {"api", 1_000_000_001L, "invalid_cost"},
          {"api", -1_000_000_001L, "invalid_cost"}}) {
        try {
          client.report((String) c[0], rk, (Long) c[1]);
          check(false, "report accepted " + c[0] + "/" + c[1]);
        } catch (RateLimitException e) {
          check(e.code().equals(c[2]), "report code " + e.code() + " for " + c[2] + ": " + e.getMessage());
        }
      }
      check(client.peek("api", rk, 1).remaining() == 6, "bad reports recorded nothing (a peek of 1 leaves 6 of 7)");

      // reserve -> reconcile / cancel (try-with-resources cancels an abandoned reservation).
      String vk = "reserve-" + RUN;
      Reservation r1 = client.reserve("tokens", vk, 500);
      check(r1.decision().remaining() == 9500 && r1.reconcile(700).orElseThrow().remaining() == 9300, "reserve 500, reconcile 700");
      try {
        r1.reconcile(700);
        check(false, "a second reconcile was accepted");
      } catch (RateLimitException e) {
        check(e.code().equals("invalid_request"), "second reconcile: " + e.code());
      }
      check(client.reserve("tokens", vk, 500).reconcile(100).orElseThrow().remaining() == 9200, "reconcile 100: 400 refunded");
      check(client.reserve("tokens", vk, 500).reconcile(500).isEmpty(), "reconcile = estimate: nothing sent");
      try (Reservation r2 = client.reserve("tokens", vk, 500)) {
        check(r2.decision().remaining() == 8200, "reserved in the block: " + r2.decision());
      }
      try (Reservation r3 = client.reserve("tokens", vk, 500)) {
        r3.reconcile(600);
      }
      check(client.report("tokens", vk, 0).remaining() == 8100, "after the block: " + client.report("tokens", vk, 0));
      check(client.reserve("tokens", vk, 8000).reconcile(9000).orElseThrow().remaining() == 0, "into debt");
      Reservation refusedR = client.reserve("tokens", vk, 500);
      check(!refusedR.decision().allowed() && refusedR.cancel().isEmpty(), "a refused reservation: nothing to give back");

      // The filter reconciles after chain.doFilter with the servlet's X-Usage-Tokens.
      String ck = "chat-" + RUN;
      long[][] steps = {{700, 9300}, {100, 9200}, {-1, 8700}, {20000, 0}};
      for (long[] st : steps) {
        Got g = get(http, port, st[0] < 0 ? "/chat" : "/chat?tokens=" + st[0], ck);
        check(g.status() == 200, "chat " + st[0] + ": " + g.status());
        check(eventually(() -> client.report("tokens", ck, 0).remaining() == st[1]),
            "chat " + st[0] + ": want " + st[1] + " left, have " + client.report("tokens", ck, 0).remaining());
      }
      check(get(http, port, "/chat?tokens=1", ck).status() == 429, "chat in debt: 429");
      get(http, port, "/chat?tokens=-5", ck + "-bad");
      check(eventually(() -> reportErrors.size() == 1) && reportErrors.get(0) instanceof RateLimitException e
          && e.code().equals("invalid_cost"), "a negative usage told to onReportError: " + reportErrors);
      check(client.failures() == 0, "failures " + client.failures());

      // Issue 31's middleware options, each against this ratelimitd (FilterFeatures.java).
      FilterFeatures.run(dir, redisUrl, daemonUrl, client, http);
      check(client.failures() == 0, "failures after the options " + client.failures());

      // Redis down behind ratelimitd (RedisLimiterTest covers the Redis back-end's own outages):
      // ratelimitd's store applies its on_failure, the client
      // reads that answer as it is (no failure of its own), and the filter renders it.
      int orp = freePort(), cp = freePort(), op = freePort();
      ownRedis = startRedis(dir, orp);
      daemonClosed = startDaemon(dir, cp, "redis://127.0.0.1:" + orp + "/0", "closed");
      daemonOpen = startDaemon(dir, op, "redis://127.0.0.1:" + orp + "/0", "open");
      stop(ownRedis);
      ownRedis = null;
      // Above ratelimitd's command_timeout (30 s), so that what is read is ratelimitd's answer.
      RatelimitdClient viaClosed = new RatelimitdClient("http://127.0.0.1:" + cp, FailurePolicy.OPEN, Duration.ofSeconds(60), null);
      RatelimitdClient viaOpen = new RatelimitdClient("http://127.0.0.1:" + op, FailurePolicy.CLOSED, Duration.ofSeconds(60), null);
      Decision dc = viaClosed.acquire("api", "k", 1);
      check(!dc.allowed() && dc.retryAfterUs() == 1_000_000 && viaClosed.failures() == 0, "Redis down, on_failure closed: " + dc);
      Headers.Answer ac = RateLimitFilter.answer(viaClosed, "api", dc);
      check(ac.status() == 429 && ac.headers().stream().anyMatch(h -> h[0].equals("Retry-After") && h[1].equals("1")),
          "Redis down, on_failure closed, rendered: " + ac.status());
      Decision dop = viaOpen.acquire("api", "k", 1);
      check(dop.allowed() && viaOpen.failures() == 0, "Redis down, on_failure open: " + dop);
      check(RateLimitFilter.answer(viaOpen, "api", dop).status() == 200, "Redis down, on_failure open, rendered");

      // Issue 31 defect 6: a key the request makes too long, or none at all, was a 500 with a
      // stack trace; it is 400 invalid_key / missing_key, as ratelimitd answers.
      Got tooLong = get(http, port, "/items", "k".repeat(600));
      check(tooLong.status() == 400 && tooLong.body().contains("\"error\":\"invalid_key\""),
          "a 600-byte key: " + tooLong.status() + " " + tooLong.body());
      HttpResponse<String> none = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/items"))
          .timeout(Duration.ofSeconds(30)).build(), HttpResponse.BodyHandlers.ofString());
      check(none.statusCode() == 400 && none.body().contains("\"error\":\"missing_key\""),
          "no key header: " + none.statusCode() + " " + none.body());

      // ratelimitd down: the failure policy answers, and the filter renders it.
      stop(daemon);
      daemon = null;
      Decision closed = client.acquire("api", "k", 1);
      check(!closed.allowed() && "failed_closed".equals(closed.reason()) && client.failures() == 1, "closed " + closed);
      Decision open = new RatelimitdClient(daemonUrl, FailurePolicy.OPEN, Duration.ofMillis(500), null).acquire("api", "k", 1);
      check(open.allowed() && "failed_open".equals(open.reason()), "open " + open);
      Got down = get(http, port, "/items", "java-down-" + RUN);
      check(down.status() == 429 && "1".equals(down.h("Retry-After")), "filter with ratelimitd down: " + down.status() + " " + down.headers().map());

      // Issue 31 defect 1: a client that never heard from ratelimitd (no policy header seen)
      // answered 500 "no quota or window known"; the failure policy answers, without q or w.
      for (FailurePolicy fp : new FailurePolicy[] {FailurePolicy.OPEN, FailurePolicy.CLOSED}) {
        RatelimitdClient never = new RatelimitdClient("http://127.0.0.1:9", fp, Duration.ofMillis(500), null);
        Headers.Answer a = RateLimitFilter.answer(never, "api", never.acquire("api", "k", 1));
        int want = fp == FailurePolicy.OPEN ? 200 : 429;
        check(a.status() == want && a.headers().stream().noneMatch(h -> h[0].equals("RateLimit-Policy")),
            "never reached, " + fp + ": " + a.status());
      }
    } finally {
      if (jetty != null) jetty.stop();
      stop(daemon);
      stop(daemonClosed);
      stop(daemonOpen);
      stop(ownRedis);
      stop(redis);
    }
    System.out.println(failed == 0 ? "RateLimitFilterTest: all " + checks + " checks passed"
        : "RateLimitFilterTest: " + failed + " of " + checks + " checks failed");
    System.exit(failed == 0 ? 0 : 1);
  }
}
