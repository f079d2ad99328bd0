// FilterFeatures.java — RateLimitFilterTest's part for the middleware options of issue 31, in
// Jetty 9 against the real ratelimitd RateLimitFilterTest started (policy api: 10 per 60 s) and
// a second one with `headers: draft6` and `problem_json: true`: that set and problem+json
// byte for byte as that ratelimitd answers the same decision; x-ratelimit and none; a custom
// refusal (status + text, a handler); the decision as the request attribute; the default key
// through trusted proxies only (and ClientIp's walk and address forms); skip-successful /
// skip-failed requests seen as counts given back; the init-params of all these, bad values
// refused at init; Policy.parseRate. Helpers only; RateLimitFilterTest.main runs them.
package dev.ratelimit.client;

import static dev.ratelimit.client.RateLimitFilterTest.check;
import static dev.ratelimit.client.RateLimitFilterTest.eventually;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import javax.servlet.DispatcherType;
import javax.servlet.FilterConfig;
import javax.servlet.ServletContext;
import javax.servlet.ServletException;
import javax.servlet.http.HttpServlet;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import org.eclipse.jetty.servlet.FilterHolder;
import org.eclipse.jetty.servlet.ServletContextHandler;
import org.eclipse.jetty.servlet.ServletHolder;

final class FilterFeatures {
  private FilterFeatures() {}

  static final String RUN = RateLimitFilterTest.RUN;

  /** Answers the filter's decision as the servlet sees it ("none" without one), with the status
   *  of ?status=N, or throws for ?throw. */
  public static class Echo extends HttpServlet {
    private static final long serialVersionUID = 1L;

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse res) throws IOException {
      if (req.getParameter("throw") != null) throw new IllegalStateException("the servlet failed (on purpose)");
      if (req.getParameter("status") != null) res.setStatus(Integer.parseInt(req.getParameter("status")));
      res.setContentType("text/plain");
      Object a = req.getAttribute(RateLimitFilter.DECISION_ATTRIBUTE);
      res.getWriter().write(a instanceof RateLimitInfo i ? i.policy() + "|" + i.key() + "|" + i.cost() + "|" + i.allowed() + "|"
          + i.reason() + "|" + i.limit() + "|" + i.remaining() + "|" + i.resetMs() + "|" + i.retryAfterMs() : "none");
    }
  }

  /** A Limiter deciding on ratelimitd at `url` that keeps ratelimitd's last HTTP answer, to set
   *  beside what the filter answered for the same decision. */
  static final class Recording implements Limiter {
    final String url;
    final RatelimitdClient via;
    final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();
    volatile HttpResponse<String> last;

    Recording(String url) {
      this.url = url;
      this.via = new RatelimitdClient(url, FailurePolicy.CLOSED, Duration.ofSeconds(30), null);
    }

    @Override
    public Decision acquire(String policy, String key, long cost) {
      try {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(url + "/v1/acquire"))
            .POST(HttpRequest.BodyPublishers.ofString("{\"key\":" + Json.quote(key) + ",\"policy\":" + Json.quote(policy) + ",\"cost\":" + cost + "}"))
            .header("Content-Type", "application/json").timeout(Duration.ofSeconds(30)).build(), HttpResponse.BodyHandlers.ofString());
        last = r;
        return via.read(r.statusCode(), r.headers().firstValue("RateLimit-Policy").orElse(""), r.body());
      } catch (IOException | InterruptedException e) {
        throw new IllegalStateException("ratelimitd at " + url + ": " + e, e);
      }
    }

    @Override
    public Decision peek(String policy, String key, long cost) { return via.peek(policy, key, cost); }

    @Override
    public Decision report(String policy, String key, long cost) { return via.report(policy, key, cost); }

    @Override
    public Optional<PolicyInfo> describe(String policy) { return via.describe(policy); }

    @Override
    public long failures() { return via.failures(); }
  }

  /** init() of a filter declared with `params`: null when it was accepted, else its message. */
  static String initError(Map<String, String> params) {
    FilterConfig config = new FilterConfig() {
      public String getFilterName() { return "ratelimit"; }
      public ServletContext getServletContext() { return null; }
      public String getInitParameter(String name) { return params.get(name); }
      public java.util.Enumeration<String> getInitParameterNames() { return Collections.enumeration(params.keySet()); }
    };
    try {
      new RateLimitFilter().init(config);
      return null;
    } catch (ServletException e) {
      return e.getMessage();
    }
  }

  static RateLimitFilterTest.Got get(HttpClient http, int port, String path, String... headers) throws Exception {
    HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + path)).timeout(Duration.ofSeconds(30));
    for (int i = 0; i < headers.length; i += 2) b.header(headers[i], headers[i + 1]);
    HttpResponse<String> r = http.send(b.build(), HttpResponse.BodyHandlers.ofString());
    return new RateLimitFilterTest.Got(r.statusCode(), r.headers(), r.body());
  }

  static void run(Path dir, String redisUrl, String daemonUrl, RatelimitdClient client, HttpClient http) throws Exception {
    units();
    int dp = RateLimitFilterTest.freePort();
    Process draft6 = RateLimitFilterTest.startDaemon(dir, dp, redisUrl, "closed", "headers: draft6\nproblem_json: true\n");
    Server jetty = new Server();
    try {
      Recording recording = new Recording("http://127.0.0.1:" + dp);
      ServerConnector connector = new ServerConnector(jetty);
      connector.setHost("127.0.0.1");
      connector.setPort(0);
      jetty.addConnector(connector);
      ServletContextHandler ctx = new ServletContextHandler();
      ctx.addServlet(new ServletHolder(new Echo()), "/*");
      java.util.function.Function<HttpServletRequest, String> byHeader = r -> r.getHeader("X-Client");
      Map<String, RateLimitFilter> filters = new java.util.LinkedHashMap<>();
      filters.put("/d6", new RateLimitFilter(recording, "api", byHeader, null, null).headers(HeaderSet.DRAFT6, true));
      filters.put("/xr", new RateLimitFilter(client, "api", byHeader, null, null).headers(HeaderSet.X_RATELIMIT, false));
      filters.put("/none", new RateLimitFilter(client, "api", byHeader, null, null).headers(HeaderSet.NONE, false));
      filters.put("/msg", new RateLimitFilter(client, "api", byHeader, null, null).refusal(503, "slow down"));
      filters.put("/h", new RateLimitFilter(client, "api", byHeader, null, null).onRefusal((req, res, info) -> res.getWriter()
          .write(info.policy() + " " + info.remaining() + " " + ((RateLimitInfo) req.getAttribute(RateLimitFilter.DECISION_ATTRIBUTE)).allowed())));
      filters.put("/info", new RateLimitFilter(client, "api", byHeader, r -> 2, null));
      filters.put("/trusting", new RateLimitFilter(client, "api", null, null, null).trustedProxies("127.0.0.0/8", "10.0.0.0/8"));
      filters.put("/untrusting", new RateLimitFilter(client, "api", null, null, null));
      // On "tokens" (10000 per hour): what is given back is still told apart after the waits.
      filters.put("/login", new RateLimitFilter(client, "tokens", byHeader, null, null).skipSuccessfulRequests(true));
      filters.put("/signup", new RateLimitFilter(client, "tokens", byHeader, null, null).skipFailedRequests(true));
      for (var f : filters.entrySet()) ctx.addFilter(new FilterHolder(f.getValue()), f.getKey(), EnumSet.of(DispatcherType.REQUEST));
      FilterHolder declared = new FilterHolder(RateLimitFilter.class);  // as web.xml declares it
      declared.setInitParameters(Map.of("ratelimitd-url", daemonUrl,
          "policy", "api", "timeout-ms", "30000", "on-failure", "closed", "headers", "x-ratelimit", "status-code", "503", "message", "busy",
          "trusted-proxies", "127.0.0.1, 10.0.0.0/8", "skip-failed-requests", "true"));
      ctx.addFilter(declared, "/declared", EnumSet.of(DispatcherType.REQUEST));
      jetty.setHandler(ctx);
      jetty.start();
      int port = connector.getLocalPort();

      headerSets(http, port, recording);
      refusals(http, port);
      attributeAndKeys(http, port);
      skips(http, port, client);
    } finally {
      jetty.stop();
      RateLimitFilterTest.stop(draft6);
    }
  }

  /** draft6 + problem+json equal to ratelimitd's own answer; x-ratelimit; none. */
  static void headerSets(HttpClient http, int port, Recording recording) throws Exception {
    int refused = 0;
    for (int i = 0; i < 12; i++) {
      RateLimitFilterTest.Got mine = get(http, port, "/d6", "X-Client", "d6-" + RUN);
      HttpResponse<String> theirs = recording.last;
      check(mine.status() == theirs.statusCode(), "draft6 request " + i + ": status " + mine.status() + " vs " + theirs.statusCode());
      for (String h : List.of("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset", "Retry-After", "Cache-Control",
          "RateLimit-Policy", "RateLimit", "X-RateLimit-Limit")) {
        check(java.util.Objects.equals(mine.h(h), theirs.headers().firstValue(h).orElse(null)),
            "draft6 request " + i + ": " + h + " " + mine.h(h) + " vs " + theirs.headers().firstValue(h));
      }
      if (mine.status() == 429) {
        refused++;
        check(mine.body().equals(theirs.body()), "draft6 request " + i + ": body " + mine.body() + " vs " + theirs.body());
        check(mine.h("Content-Type").startsWith("application/problem+json")
            && theirs.headers().firstValue("Content-Type").orElse("").startsWith("application/problem+json"),
            "problem+json content type: " + mine.h("Content-Type") + " vs " + theirs.headers().firstValue("Content-Type"));
        check(List.of("api").equals(Json.parseObject(mine.body()).get("violated-policies")), "violated-policies: " + mine.body());
      } else {
        check(mine.status() == 200 && mine.h("RateLimit-Remaining").equals(Integer.toString(9 - i)), "draft6 admitted " + i + ": " + mine.headers().map());
      }
    }
    check(refused == 2, "draft6: " + refused + " of 12 refused; want 2");

    RateLimitFilterTest.Got xr = get(http, port, "/xr", "X-Client", "xr-" + RUN);
    check("9".equals(xr.h("X-RateLimit-Remaining")) && "10".equals(xr.h("X-RateLimit-Limit")) && xr.h("X-RateLimit-Reset") != null
        && xr.h("RateLimit") == null && xr.h("RateLimit-Policy") == null, "x-ratelimit: " + xr.headers().map());
    RateLimitFilterTest.Got none = null;
    for (int i = 0; i < 11; i++) none = get(http, port, "/none", "X-Client", "none-" + RUN);
    check(none.status() == 429 && Integer.parseInt(none.h("Retry-After")) >= 1 && "no-store".equals(none.h("Cache-Control"))
        && none.headers().map().keySet().stream().noneMatch(h -> h.toLowerCase().contains("ratelimit")), "none, refused: " + none.headers().map());
    check(none.h("Content-Type").startsWith("application/json") && none.body().startsWith("{\"allowed\":false,"), "none, body: " + none.body());
  }

  /** refusal(503, text) and onRefusal(handler): ratelimitd's headers kept. */
  static void refusals(HttpClient http, int port) throws Exception {
    RateLimitFilterTest.Got g = null;
    for (int i = 0; i < 11; i++) g = get(http, port, "/msg", "X-Client", "msg-" + RUN);
    check(g.status() == 503 && g.body().equals("slow down") && g.h("Content-Type").startsWith("text/plain")
        && Integer.parseInt(g.h("Retry-After")) >= 1 && g.h("RateLimit").startsWith("\"api\";r=0;t="), "custom refusal: " + g.status() + " " + g.headers().map() + " " + g.body());
    for (int i = 0; i < 11; i++) g = get(http, port, "/h", "X-Client", "h-" + RUN);
    check(g.status() == 429 && g.body().equals("api 0 false") && "\"api\";q=10;w=60".equals(g.h("RateLimit-Policy")),
        "refusal handler: " + g.status() + " " + g.body() + " " + g.headers().map());
    for (int i = 0; i < 11; i++) g = get(http, port, "/declared", "X-Forwarded-For", "192.0.2.44");
    check(g.status() == 503 && g.body().equals("busy") && "0".equals(g.h("X-RateLimit-Remaining")) && g.h("RateLimit") == null,
        "declared: status-code, message, headers: " + g.status() + " " + g.body() + " " + g.headers().map());
    g = get(http, port, "/declared?status=500", "X-Forwarded-For", "192.0.2.45");
    check(g.status() == 500 && g.body().startsWith("api|192.0.2.45|1|true|"), "declared: trusted-proxies key: " + g.body());

    try {
      new RateLimitFilter(new RatelimitdClient("http://127.0.0.1:9"), "api", null, null, null).refusal(200, "ok");
      check(false, "refusal(200) accepted");
    } catch (RateLimitException e) {
      check(e.getMessage().contains("400-599"), "refusal(200): " + e.getMessage());
    }
    String base = "http://127.0.0.1:9";
    for (String[] bad : new String[][] {{"headers", "draft7", "ietf, draft6, x-ratelimit, none"}, {"problem-json", "yes", "true or false"},
        {"status-code", "600", "400-599"}, {"status-code", "abc", "400-599"}, {"trusted-proxies", "10.0.0.0/33", "'10.0.0.0/33' is not an IP address"},
        {"trusted-proxies", "proxy.local", "not an IP address"}, {"skip-failed-requests", "1", "true or false"}}) {
      String err = initError(Map.of("ratelimitd-url", base, "policy", "api", bad[0], bad[1]));
      check(err != null && err.contains(bad[2]), "init-param " + bad[0] + "=" + bad[1] + ": " + err);
    }
    check(initError(Map.of("ratelimitd-url", base, "policy", "api", "headers", "draft6", "problem-json", "true", "status-code", "429",
        "trusted-proxies", "::1 10.0.0.0/8", "skip-successful-requests", "false")) == null, "good init-params refused");
  }

  /** The request attribute; the default key: the peer, X-Forwarded-For believed from trusted proxies only. */
  static void attributeAndKeys(HttpClient http, int port) throws Exception {
    RateLimitFilterTest.Got g = get(http, port, "/info", "X-Client", "info-" + RUN);
    String[] f = g.body().split("\\|");
    check(f.length == 9 && f[0].equals("api") && f[1].equals("info-" + RUN) && f[2].equals("2") && f[3].equals("true")
        && f[4].equals("within_limit") && f[5].equals("10") && f[6].equals("8") && Long.parseLong(f[7]) > 0
        && Long.parseLong(f[7]) <= 60_000 && f[8].equals("0"), "the decision attribute: " + g.body());
    // Each client behind the trusted proxy has its own count; an untrusted peer's header is ignored.
    String a = "198.51.100." + (ProcessHandle.current().pid() % 250), b = "203.0.113." + (ProcessHandle.current().pid() % 250);
    List<Integer> statuses = new ArrayList<>();
    for (int i = 0; i < 11; i++) {
      g = get(http, port, "/trusting", "X-Forwarded-For", a);
      statuses.add(g.status());
      if (i == 0) check(g.body().startsWith("api|" + a + "|"), "trusted proxy: the key is the forwarded client: " + g.body());
    }
    check(statuses.equals(List.of(200, 200, 200, 200, 200, 200, 200, 200, 200, 200, 429)), "one client behind the proxy: " + statuses);
    g = get(http, port, "/trusting", "X-Forwarded-For", "garbage, " + b + ", 10.1.2.3");
    check(g.status() == 200 && g.body().startsWith("api|" + b + "|"), "another client behind two proxies: " + g.body());
    g = get(http, port, "/untrusting", "X-Forwarded-For", b);
    check(g.body().startsWith("api|127.0.0.1|"), "no trusted proxies: the key is the peer: " + g.body());
  }

  /** skip-successful / skip-failed: the admitted unit given back after the response. */
  static void skips(HttpClient http, int port, RatelimitdClient client) throws Exception {
    String[][] runs = {{"/login", "", "5", "ss-ok"}, {"/login", "?status=401", "3", "ss-bad"}, {"/signup", "", "3", "sf-ok"},
        {"/signup", "?status=500", "5", "sf-bad"}, {"/signup", "?throw=1", "2", "sf-throw"}};
    for (String[] r : runs) {
      for (int i = 0; i < Integer.parseInt(r[2]); i++) get(http, port, r[0] + r[1], "X-Client", r[3] + "-" + RUN);
    }
    // The refund is sent once the response is flushed: read back until it lands (bounded).
    Map<String, Long> want = Map.of("ss-ok", 10000L, "ss-bad", 9997L, "sf-ok", 9997L, "sf-bad", 10000L, "sf-throw", 10000L);
    for (var w : want.entrySet()) {
      String key = w.getKey() + "-" + RUN;
      check(eventually(() -> client.report("tokens", key, 0).remaining() == w.getValue()),
          w.getKey() + ": want " + w.getValue() + " left, have " + client.report("tokens", key, 0).remaining());
    }
  }

  /** ClientIp and Policy.parseRate without a server. */
  static void units() {
    ClientIp.TrustedProxies t = new ClientIp.TrustedProxies(List.of("127.0.0.0/8", "10.0.0.0/8", "::1"));
    String[][] walks = {{"127.0.0.1", "203.0.113.9, 10.1.2.3", "203.0.113.9"},
        {"::ffff:127.0.0.1", "198.51.100.1, 203.0.113.9, 10.1.2.3", "203.0.113.9"}, {"192.0.2.1", "203.0.113.9", "192.0.2.1"},
        {"127.0.0.1", "garbage, 10.1.2.3", "10.1.2.3"}, {"127.0.0.1", "[2001:db8::1]:443", "2001:db8::1"},
        {"0:0:0:0:0:0:0:1", "192.0.2.7:4711", "192.0.2.7"}, {"127.0.0.1", "10.0.0.1,, 10.0.0.2", "10.0.0.2"},
        {"127.0.0.1", "2001:DB8:0:0:1:0:0:1", "2001:db8::1:0:0:1"}, {"127.0.0.1", null, "127.0.0.1"}, {"not-an-ip", "1.2.3.4", "not-an-ip"}};
    for (String[] w : walks) {
      String got = ClientIp.clientAddress(w[0], w[1], t);
      check(w[2].equals(got), "clientAddress(" + w[0] + ", " + w[1] + ") = " + got + ", want " + w[2]);
    }
    check("127.0.0.1".equals(ClientIp.clientAddress("127.0.0.1", "203.0.113.9", new ClientIp.TrustedProxies(List.of()))), "no trusted proxies");
    String[][] forms = {{"::", "::"}, {"::1", "::1"}, {"1::", "1::"}, {"0:0:1:0:0:0:0:1", "0:0:1::1"}, {"2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"},
        {"::ffff:192.0.2.1", "192.0.2.1"}, {"::192.0.2.1", "::192.0.2.1"}, {"fe80::1:2:3:4:5", "fe80::1:2:3:4:5"}};
    for (String[] f : forms) check(f[1].equals(ClientIp.parseAddress(f[0])), "parseAddress(" + f[0] + ") = " + ClientIp.parseAddress(f[0]));
    for (String bad : new String[] {"", "01.2.3.4", "1.2.3", "256.1.1.1", "1.2.3.4::", "1:2:3:4:5:6:7:8:9", "1::2::3", "[1.2.3.4]", "g::1",
        "example.com", "1.2.3.4:123456", "[::1", "::1%eth0"}) {
      check(ClientIp.parseAddress(bad) == null, "parseAddress(" + bad + ") = " + ClientIp.parseAddress(bad) + ", want null");
    }
    for (String bad : new String[] {"10.0.0.0/33", "::/129", "proxy.local", "::ffff:10.0.0.0/104", "10.0.0.0/", "[::1]"}) {
      try {
        new ClientIp.TrustedProxies(List.of(bad));
        check(false, "trusted proxy " + bad + " accepted");
      } catch (RateLimitException e) {
        check(e.getMessage().contains("not an IP address or CIDR block"), bad + ": " + e.getMessage());
      }
    }
    check(new ClientIp.TrustedProxies(List.of("10.1.2.3/8")).contains(ClientIp.bytes("10.200.0.1")), "host bits of a block ignored");
    check(!new ClientIp.TrustedProxies(List.of("10.0.0.0/9")).contains(ClientIp.bytes("10.128.0.1")), "a /9 stops at its 9th bit");

    Policy p = Policy.parseRate("x", "10/minute");
    check(p.algorithm().equals("sliding_window_counter") && p.limit() == 10 && p.windowUs() == 60_000_000, "10/minute: " + p);
    check(Policy.parseRate("x", "100/30s").windowUs() == 30_000_000 && Policy.parseRate("x", "5/day").windowUs() == 86_400_000_000L, "100/30s, 5/day");
    for (String bad : new String[] {"10 per minute", "10/minutes", "10/ minute", "0/minute", "10/0s", "ten/minute", "10/minute ", "10/1w", "/minute", "10/Minute"}) {
      try {
        Policy.parseRate("x", bad);
        check(false, "rate " + bad + " accepted");
      } catch (RateLimitException e) {
        check(e.code().equals("invalid_policy") && e.getMessage().contains("e.g. \"10/minute\""), bad + ": " + e.getMessage());
      }
    }
  }
}
