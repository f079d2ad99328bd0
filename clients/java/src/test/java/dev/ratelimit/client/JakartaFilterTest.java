// JakartaFilterTest.java — JakartaRateLimitFilter as a Spring Boot 3 / Tomcat 10 user runs it:
// Debian's embedded Tomcat 10 (libtomcat10-java), the filter in front of a jakarta.servlet app,
// (1) built in code on a RedisLimiter — 200 concurrent requests at 10 per minute: exactly 10
// admitted, every answer with ratelimitd's headers, a missing key 400 missing_key; (2) declared
// as web.xml declares it (class name + init-params) against a real ratelimitd on the same Redis:
// 10 admitted then 429 with ratelimitd's policy header and Retry-After; (3) issue 31's options
// on the Jakarta side: a "2/hour" policy, the default key (the peer) in the decision attribute,
// draft6 + problem+json with a 503 refusal.
// A plain main like the other tests (their process and check helpers); exit 1 on any failure.
package dev.ratelimit.client;

import static dev.ratelimit.client.RateLimitFilterTest.check;

import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.regex.Pattern;
import org.apache.catalina.Context;
import org.apache.catalina.startup.Tomcat;
import org.apache.tomcat.util.descriptor.web.FilterDef;
import org.apache.tomcat.util.descriptor.web.FilterMap;

public final class JakartaFilterTest {
  static final String RUN = RateLimitFilterTest.RUN;

  public static class Items extends HttpServlet {
    private static final long serialVersionUID = 1L;

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse res) throws IOException {
      res.setContentType("application/json");
      res.getWriter().write("{\"items\":[]}");
    }
  }

  /** Answers the key of the filter's decision (the request attribute). */
  public static class Echo extends HttpServlet {
    private static final long serialVersionUID = 1L;

    @Override
    protected void doGet(HttpServletRequest req, HttpServletResponse res) throws IOException {
      res.setContentType("text/plain");
      Object a = req.getAttribute(JakartaRateLimitFilter.DECISION_ATTRIBUTE);
      res.getWriter().write(a instanceof RateLimitInfo i ? i.key() : "none");
    }
  }

  static void filter(Context ctx, String name, FilterDef def, String pattern) {
    def.setFilterName(name);
    ctx.addFilterDef(def);
    FilterMap map = new FilterMap();
    map.setFilterName(name);
    map.addURLPattern(pattern);
    ctx.addFilterMap(map);
  }

  public static void main(String[] args) throws Exception {
    Path dir = Files.createTempDirectory("rl-java-jakarta-");
    Process redis = null, daemon = null;
    Tomcat tomcat = null;
    try {
      int rp = RateLimitFilterTest.freePort(), dp = RateLimitFilterTest.freePort();
      redis = RateLimitFilterTest.startRedis(dir, rp);
      String url = "redis://127.0.0.1:" + rp + "/0";
      daemon = RateLimitFilterTest.startDaemon(dir, dp, url, "closed");
      RedisLimiter limiter = RedisLimiter.builder(url).keyPrefix("rl:jakarta-" + RUN + ":").timeout(Duration.ofSeconds(30))
          .policy(Policy.window("web", "sliding_window_log", 10, Duration.ofSeconds(60))).policy("short", "2/hour").build();

      tomcat = new Tomcat();
      tomcat.setBaseDir(dir.resolve("tomcat").toString());
      tomcat.setPort(0);
      tomcat.getConnector().setProperty("address", "127.0.0.1");
      Context ctx = tomcat.addContext("", null);
      Tomcat.addServlet(ctx, "items", new Items());
      ctx.addServletMapping("/items", "items");
      ctx.addServletMapping("/viad", "items");
      Tomcat.addServlet(ctx, "echo", new Echo());
      ctx.addServletMapping("/short", "echo");
      FilterDef options = new FilterDef();
      options.setFilter(new JakartaRateLimitFilter(limiter, "short", null, null, null).headers(HeaderSet.DRAFT6, true).refusal(503, null));
      filter(ctx, "options", options, "/short");
      FilterDef inCode = new FilterDef();
      inCode.setFilter(new JakartaRateLimitFilter(limiter, "web", r -> r.getHeader("X-Client"), null, null));
      filter(ctx, "in-code", inCode, "/items");
      FilterDef declared = new FilterDef();  // as web.xml's <filter> declares it
      declared.setFilterClass(JakartaRateLimitFilter.class.getName());
      declared.addInitParameter("ratelimitd-url", "http://127.0.0.1:" + dp);
      declared.addInitParameter("policy", "api");
      declared.addInitParameter("key-header", "X-Client");
      declared.addInitParameter("on-failure", "closed");
      declared.addInitParameter("timeout-ms", "30000");
      filter(ctx, "declared", declared, "/viad");
      tomcat.start();
      int port = tomcat.getConnector().getLocalPort();
      HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1).build();

      List<RateLimitFilterTest.Got> got = RedisLimiterTest.inFlight(200, 200,
          () -> RateLimitFilterTest.get(http, port, "/items", "jakarta-" + RUN));
      long ok = got.stream().filter(g -> g.status() == 200).count(), denied = got.stream().filter(g -> g.status() == 429).count();
      System.out.println("Tomcat 10, JakartaRateLimitFilter on RedisLimiter: " + ok + " of 200 admitted, " + denied + " denied");
      check(ok == 10 && denied == 190, "Tomcat 10, in code on Redis: " + ok + " admitted, " + denied + " denied; want 10 and 190");
      Pattern admitted = Pattern.compile("^\"web\";r=[0-9];t=60$");
      for (RateLimitFilterTest.Got g : got) {
        boolean headers = "\"web\";q=10;w=60".equals(g.h("RateLimit-Policy")) && (g.status() == 200
            ? admitted.matcher(g.h("RateLimit")).matches() && g.body().equals("{\"items\":[]}")
            : ("\"web\";r=0;t=" + g.h("Retry-After")).equals(g.h("RateLimit")) && "no-store".equals(g.h("Cache-Control"))
              && g.h("Content-Type").startsWith("application/json") && g.body().startsWith("{\"allowed\":false,\"policy\":\"web\",\"limit\":10,"));
        check(headers, "answer " + g.status() + " " + g.headers().map() + " " + g.body());
      }
      HttpResponse<String> none = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port + "/items"))
          .timeout(Duration.ofSeconds(30)).build(), HttpResponse.BodyHandlers.ofString());
      check(none.statusCode() == 400 && none.body().contains("\"error\":\"missing_key\""), "no key header: " + none.statusCode() + " " + none.body());

      for (int i = 0; i < 11; i++) {
        RateLimitFilterTest.Got g = RateLimitFilterTest.get(http, port, "/viad", "viad-" + RUN);
        boolean want = i < 10 ? g.status() == 200 : g.status() == 429 && g.h("Retry-After") != null;
        check(want && "\"api\";q=10;w=60".equals(g.h("RateLimit-Policy")), "declared filter via ratelimitd, request " + i + ": "
            + g.status() + " " + g.headers().map());
      }
      for (int i = 0; i < 3; i++) {
        RateLimitFilterTest.Got g = RateLimitFilterTest.get(http, port, "/short", "unused");
        check(i < 2 ? g.status() == 200 && g.body().equals("127.0.0.1") && Integer.toString(1 - i).equals(g.h("RateLimit-Remaining"))
                && "2".equals(g.h("RateLimit-Limit")) && g.h("RateLimit-Policy") == null
            : g.status() == 503 && g.h("Content-Type").startsWith("application/problem+json") && Integer.parseInt(g.h("Retry-After")) >= 1
                && g.body().contains("\"violated-policies\":[\"short\"],\"allowed\":false,\"policy\":\"short\",\"limit\":2,"),
            "Jakarta options, request " + i + ": " + g.status() + " " + g.headers().map() + " " + g.body());
      }
      check(limiter.failures() == 0, "failures " + limiter.failures());
      limiter.close();
    } finally {
      if (tomcat != null) {
        tomcat.stop();
        tomcat.destroy();
      }
      RateLimitFilterTest.stop(daemon);
      RateLimitFilterTest.stop(redis);
    }
    int failed = RateLimitFilterTest.failed;
    System.out.println(failed == 0 ? "JakartaFilterTest: all " + RateLimitFilterTest.checks + " checks passed"
        : "JakartaFilterTest: " + failed + " of " + RateLimitFilterTest.checks + " checks failed");
    System.exit(failed == 0 ? 0 : 1);
  }
}
