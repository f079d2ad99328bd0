// JakartaRateLimitFilter.java — RateLimitFilter for jakarta.servlet (Servlet 5/6: Spring Boot 3,
// Tomcat 10+, Jetty 11+): the same constructor, init-params (web.xml), answers and usage
// reconciliation, all FilterCore's; this class only moves them in and out of jakarta.servlet.
// Kept line for line with RateLimitFilter, whose header says what the filter does.
// Thread-safety: one instance serves concurrent requests (it holds only immutable state).
package dev.ratelimit.client;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.function.BiFunction;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.function.ToLongFunction;
import jakarta.servlet.Filter;
import jakarta.servlet.FilterChain;
import jakarta.servlet.FilterConfig;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletRequest;
import jakarta.servlet.ServletResponse;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;

public final class JakartaRateLimitFilter implements Filter {
  private FilterCore<HttpServletRequest, HttpServletResponse> core;

  /** For web.xml: configured by init(). */
  public JakartaRateLimitFilter() {}

  public JakartaRateLimitFilter(Limiter client, String policy, Function<HttpServletRequest, String> key,
                         ToLongFunction<HttpServletRequest> cost, Predicate<HttpServletRequest> skip) {
    core = new FilterCore<>(client, policy, key, cost, skip);
  }

  /** Reports each admitted request's usage after the response: `usage` reads it from the request
   *  and response (e.g. a header the servlet set); null keeps the estimate (cost). */
  public JakartaRateLimitFilter usage(BiFunction<HttpServletRequest, HttpServletResponse, Long> usage,
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
      throw new ServletException("JakartaRateLimitFilter: " + e.getMessage(), e);
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
