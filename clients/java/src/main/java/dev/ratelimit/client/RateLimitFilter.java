// RateLimitFilter.java — a Servlet filter (javax.servlet, Servlet 3.1+: Jetty 9, Tomcat 8.5/9;
// JakartaRateLimitFilter is the same for jakarta.servlet): every request it sees is decided by a
// Limiter (RatelimitdClient, or RedisLimiter on Redis directly); admitted ones go on with
// RateLimit-Policy and RateLimit set, denied ones are answered here with ratelimitd's 429 (400
// for a cost over the capacity, or a missing or too long key), rendered by Headers. Built in
// code (the constructor, any Limiter) or from web.xml init-params (ratelimitd):
//   ratelimitd-url (required), policy (required), key-header (default: the client address),
//   on-failure (open|closed, default open), timeout-ms (default 250), cost (default 1),
//   usage-header (a response header carrying the units the request used, e.g. an LLM's tokens).
// Usage after the response (docs/usage.md): with usage(...) or usage-header, `cost` is the
// estimate and each admitted request is reconciled (Reservation) after chain.doFilter, once the
// response has been flushed, on the request's thread; a failed report goes to onReportError.
// The logic is FilterCore's, shared with the Jakarta filter; this class moves its answer in and
// out of javax.servlet. A RateLimitException other than a bad key (the application's bug)
// propagates as a ServletException.
// Thread-safety: one instance serves concurrent requests (it holds only immutable state).
package dev.ratelimit.client;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
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
  private FilterCore<HttpServletRequest, HttpServletResponse> core;

  /** For web.xml: configured by init(). */
  public RateLimitFilter() {}

  public RateLimitFilter(Limiter client, String policy, Function<HttpServletRequest, String> key,
                         ToLongFunction<HttpServletRequest> cost, Predicate<HttpServletRequest> skip) {
    core = new FilterCore<>(client, policy, key, cost, skip);
  }

  /** Reports each admitted request's usage after the response: `usage` reads it from the request
   *  and response (e.g. a header the servlet set); null keeps the estimate (cost). */
  public RateLimitFilter usage(BiFunction<HttpServletRequest, HttpServletResponse, Long> usage,
                               Consumer<RuntimeException> onReportError) {
    core.usage(usage, onReportError);
    return this;
  }

  @Override
  public void init(FilterConfig config) throws ServletException {
    if (core != null) return;
    try {
      core = FilterCore.fromInitParams(config::getInitParameter, HttpServletRequest::getRemoteAddr,
          HttpServletRequest::getHeader, HttpServletResponse::getHeader);
    } catch (RuntimeException e) {
      throw new ServletException("RateLimitFilter: " + e.getMessage(), e);
    }
  }

  @Override
  public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain) throws IOException, ServletException {
    HttpServletRequest req = (HttpServletRequest) request;
    HttpServletResponse res = (HttpServletResponse) response;
    FilterCore.Outcome o;
    try {
      o = core.decide(req);
    } catch (RateLimitException e) {
      throw new ServletException("rate limiter: " + e.getMessage(), e);
    }
    if (o == null) {
      chain.doFilter(request, response);
      return;
    }
    for (String[] h : o.answer().headers()) res.setHeader(h[0], h[1]);
    if (o.answer().status() == 200) {
      chain.doFilter(request, response);
      core.reconcile(o, req, res, res::flushBuffer);
      return;
    }
    byte[] body = o.answer().body().getBytes(StandardCharsets.UTF_8);
    res.setStatus(o.answer().status());
    res.setContentType("application/json");
    res.setContentLength(body.length);
    res.getOutputStream().write(body);
  }

  /** The rendered answer for one decision of `policy` (shared with the Spring adapter). */
  public static Headers.Answer answer(Limiter client, String policy, Decision d) {
    return FilterCore.answer(client, policy, d);
  }

  @Override
  public void destroy() {}
}
