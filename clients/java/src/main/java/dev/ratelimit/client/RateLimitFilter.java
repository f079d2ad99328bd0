// RateLimitFilter.java — a Servlet filter (javax.servlet, Servlet 3.1+: Jetty 9, Tomcat 8.5/9):
// every request it sees is decided by a Limiter (RatelimitdClient, or RedisLimiter on Redis
// directly); admitted ones go on with RateLimit-Policy and RateLimit set, denied ones are answered
// here with ratelimitd's 429 (400 for a cost over the capacity), rendered by Headers. Built in
// code (the constructor, any Limiter) or from web.xml init-params (ratelimitd):
//   ratelimitd-url (required), policy (required), key-header (default: the client address),
//   on-failure (open|closed, default open), timeout-ms (default 250), cost (default 1),
//   usage-header (a response header carrying the units the request used, e.g. an LLM's tokens).
// Usage after the response (docs/usage.md): with usage(...) or usage-header, `cost` is the
// estimate and each admitted request is reconciled (Reservation) after chain.doFilter, once the
// response has been flushed, on the request's thread; a failed report goes to onReportError.
// The failure policy is the client's; a RateLimitException (bad input from the key function) is
// the application's bug and propagates as a ServletException.
// Thread-safety: one instance serves concurrent requests (it holds only immutable state).
package dev.ratelimit.client;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.function.BiFunction;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.function.ToLongFunction;
import javax.servlet.Filter;
import javax.servlet.FilterChain;
import javax.servlet.FilterConfig;
import javax.servlet.ServletException;
import javax.servlet.ServletRequest;
import javax.servlet.ServletResponse;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;

public final class RateLimitFilter implements Filter {
  private Limiter client;
  private String policy;
  private Function<HttpServletRequest, String> key;
  private ToLongFunction<HttpServletRequest> cost;
  private Predicate<HttpServletRequest> skip;
  private BiFunction<HttpServletRequest, HttpServletResponse, Long> usage;
  private Consumer<RuntimeException> onReportError = e -> {};

  /** For web.xml: configured by init(). */
  public RateLimitFilter() {}

  public RateLimitFilter(Limiter client, String policy, Function<HttpServletRequest, String> key,
                         ToLongFunction<HttpServletRequest> cost, Predicate<HttpServletRequest> skip) {
    this.client = client;
    this.policy = policy;
    this.key = key;
    this.cost = cost == null ? r -> 1 : cost;
    this.skip = skip == null ? r -> false : skip;
  }

  /** Reports each admitted request's usage after the response: `usage` reads it from the request
   *  and response (e.g. a header the servlet set); null keeps the estimate (cost). */
  public RateLimitFilter usage(BiFunction<HttpServletRequest, HttpServletResponse, Long> usage,
                               Consumer<RuntimeException> onReportError) {
    this.usage = usage;
    if (onReportError != null) this.onReportError = onReportError;
    return this;
  }

  @Override
  public void init(FilterConfig config) throws ServletException {
    if (client != null) return;
    String url = config.getInitParameter("ratelimitd-url");
    policy = config.getInitParameter("policy");
    if (url == null || policy == null) throw new ServletException("RateLimitFilter needs init-params ratelimitd-url and policy");
    FailurePolicy onFailure = "closed".equals(config.getInitParameter("on-failure")) ? FailurePolicy.CLOSED : FailurePolicy.OPEN;
    String t = config.getInitParameter("timeout-ms");
    client = new RatelimitdClient(url, onFailure, Duration.ofMillis(t == null ? 250 : Long.parseLong(t)), null);
    String header = config.getInitParameter("key-header");
    key = header == null ? HttpServletRequest::getRemoteAddr : r -> r.getHeader(header);
    String c = config.getInitParameter("cost");
    long fixed = c == null ? 1 : Long.parseLong(c);
    cost = r -> fixed;
    skip = r -> false;
    String usageHeader = config.getInitParameter("usage-header");
    if (usageHeader != null) usage = (rq, rs) -> rs.getHeader(usageHeader) == null ? null : Long.valueOf(rs.getHeader(usageHeader));
  }

  @Override
  public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain) throws IOException, ServletException {
    HttpServletRequest req = (HttpServletRequest) request;
    HttpServletResponse res = (HttpServletResponse) response;
    if (skip.test(req)) {
      chain.doFilter(request, response);
      return;
    }
    Headers.Answer answer;
    Reservation reservation = null;
    try {
      String k = key.apply(req);
      long c = cost.applyAsLong(req);
      Decision d = client.acquire(policy, k, c);
      answer = answer(client, policy, d);
      if (usage != null && d.allowed()) reservation = new Reservation(client, policy, k, c, d);
    } catch (RateLimitException e) {
      // The key comes from the request (key-header, the address): none, or one over the length
      // bound, is the client's bad input, answered 400 as ratelimitd answers it (issue 31
      // defect 6: it was a 500 with a stack trace). Anything else is the application's bug.
      if (!e.code().equals("invalid_key")) throw new ServletException("rate limiter: " + e.getMessage(), e);
      String name = e.getMessage().startsWith("key must not be empty") ? "missing_key" : "invalid_key";
      answer = new Headers.Answer(400, List.<String[]>of(new String[] {"Cache-Control", "no-store"}),
          "{\"error\":\"" + name + "\",\"message\":" + Json.quote(e.getMessage()) + "}");
    }
    for (String[] h : answer.headers()) res.setHeader(h[0], h[1]);
    if (answer.status() == 200) {
      chain.doFilter(request, response);
      if (reservation != null) reconcile(reservation, req, res);
      return;
    }
    byte[] body = answer.body().getBytes(StandardCharsets.UTF_8);
    res.setStatus(answer.status());
    res.setContentType("application/json");
    res.setContentLength(body.length);
    res.getOutputStream().write(body);
  }

  /** Reconciles an admitted request with its usage once its response is flushed; never throws. */
  private void reconcile(Reservation reservation, HttpServletRequest req, HttpServletResponse res) {
    try {
      Long used = usage.apply(req, res);
      if (used == null) return;
      try {
        res.flushBuffer();
      } catch (IOException e) {
        // The client left: the work was done all the same, so its usage is still reported.
      }
      reservation.reconcile(used);
    } catch (RuntimeException e) {
      onReportError.accept(e);
    }
  }

  /** The rendered answer for one decision of `policy` (shared with the Spring adapter). */
  public static Headers.Answer answer(Limiter client, String policy, Decision d) {
    java.util.Optional<PolicyInfo> known = client.describe(policy);
    boolean failure = d.reason().equals("failed_open") || d.reason().equals("failed_closed");
    if (known.isEmpty() && failure) {
      // ratelimitd has not answered once since the app started, so nothing says the policy's
      // quota and window: the failure policy still answers (issue 31 defect 1), without the
      // RateLimit-Policy and RateLimit fields it cannot fill in truthfully.
      Headers.Answer a = Headers.render(List.of(d), List.of(new PolicyInfo(policy, d.limit(), 0)));
      List<String[]> kept = new java.util.ArrayList<>();
      for (String[] h : a.headers()) {
        if (!h[0].equals("RateLimit-Policy") && !h[0].equals("RateLimit")) kept.add(h);
      }
      return new Headers.Answer(a.status(), kept, a.body());
    }
    PolicyInfo info = known.orElseThrow(
        () -> new RateLimitException("protocol", "no quota or window known for policy " + policy));
    if (d.limit() != 0) info = new PolicyInfo(info.name(), d.limit(), info.windowUs());
    return Headers.render(List.of(d), List.of(info));
  }

  @Override
  public void destroy() {}
}
