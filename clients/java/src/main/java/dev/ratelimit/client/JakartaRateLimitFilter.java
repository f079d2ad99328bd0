// JakartaRateLimitFilter.java — RateLimitFilter for jakarta.servlet (Servlet 5/6: Spring Boot 3,
// Tomcat 10+, Jetty 11+): the same constructor, options, init-params (web.xml), request
// attribute, answers and what happens after the response, all FilterCore's; this class only
// moves them in and out of jakarta.servlet. Kept line for line with RateLimitFilter, whose header
// says what the filter does.
// Thread-safety: configured before it serves; then one instance serves concurrent requests.
package dev.ratelimit.client;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
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
  /** The request attribute holding the filter's decision, a RateLimitInfo ("dev.ratelimit.decision"). */
  public static final String DECISION_ATTRIBUTE = RateLimitInfo.ATTRIBUTE;

  private FilterCore<HttpServletRequest, HttpServletResponse> core;

  /** For web.xml: configured by init(). */
  public JakartaRateLimitFilter() {}

  /** `key` null: the client address (see trustedProxies); `cost` null: 1; `skip` null: none. */
  public JakartaRateLimitFilter(Limiter client, String policy, Function<HttpServletRequest, String> key,
                         ToLongFunction<HttpServletRequest> cost, Predicate<HttpServletRequest> skip) {
    core = new FilterCore<>(client, policy, key, cost, skip, HttpServletRequest::getRemoteAddr, JakartaRateLimitFilter::forwardedFor);
  }

  private static String forwardedFor(HttpServletRequest r) { return FilterCore.joined(r.getHeaders("X-Forwarded-For")); }

  /** Reports each admitted request's usage after the response: `usage` reads it from the request
   *  and response (e.g. a header the servlet set); null keeps the estimate (cost). */
  public JakartaRateLimitFilter usage(BiFunction<HttpServletRequest, HttpServletResponse, Long> usage,
                               Consumer<RuntimeException> onReportError) {
    core.usage(usage, onReportError);
    return this;
  }

  /** The rate-limit fields sent (ratelimitd's `headers:`, default IETF) and a 429's body as
   *  application/problem+json (ratelimitd's `problem_json: true`). */
  public JakartaRateLimitFilter headers(HeaderSet set, boolean problemJson) {
    core.render(set, problemJson);
    return this;
  }

  /** A refusal's status (400-599, default 429) and, unless null, its text/plain body instead of
   *  ratelimitd's; the rate-limit headers and Retry-After are kept. */
  public JakartaRateLimitFilter refusal(int statusCode, String message) {
    core.refusal(statusCode, message);
    return this;
  }

  /** Answers refusals itself (a page, a redirect): the headers and refusal(...)'s status are set. */
  public JakartaRateLimitFilter onRefusal(Refusal.Handler<HttpServletRequest, HttpServletResponse> handler) {
    core.onRefusal(handler);
    return this;
  }

  /** Proxies whose X-Forwarded-For the default key believes: addresses or CIDR blocks
   *  ("10.0.0.0/8", "::1"), walked from the right as ratelimitd does (ClientIp). Default none. */
  public JakartaRateLimitFilter trustedProxies(String... cidrs) {
    core.trustedProxies(List.of(cidrs));
    return this;
  }

  /** Gives the unit of an admitted request back when its response's status is below 400 (only
   *  failures count, e.g. login attempts). */
  public JakartaRateLimitFilter skipSuccessfulRequests(boolean skip) {
    core.skipRequests(skip, core.skipsFailed());
    return this;
  }

  /** Gives the unit of an admitted request back when its response's status is 400 or above, or
   *  the chain threw (only successes count). */
  public JakartaRateLimitFilter skipFailedRequests(boolean skip) {
    core.skipRequests(core.skipsSuccessful(), skip);
    return this;
  }

  @Override
  public void init(FilterConfig config) throws ServletException {
    if (core != null) return;
    try {
      core = FilterCore.fromInitParams(config::getInitParameter, HttpServletRequest::getRemoteAddr, JakartaRateLimitFilter::forwardedFor,
          HttpServletRequest::getHeader, HttpServletResponse::getHeader);
    } catch (RuntimeException e) {
      throw new ServletException("JakartaRateLimitFilter: " + e.getMessage(), e);
    }
  }

  @Override
  public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain) throws IOException, ServletException {
    HttpServletRequest req = (HttpServletRequest) request;
    HttpServletResponse res = (HttpServletResponse) response;
    FilterCore.Outcome<HttpServletRequest, HttpServletResponse> o;
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
    if (o.info() != null) req.setAttribute(DECISION_ATTRIBUTE, o.info());
    if (o.answer().status() == 200) {
      try {
        chain.doFilter(request, response);
      } catch (IOException | ServletException | RuntimeException e) {
        core.abandoned(o);
        throw e;
      }
      core.after(o, req, res, res.getStatus(), res::flushBuffer);
      return;
    }
    res.setStatus(o.answer().status());
    if (o.handler() != null) {
      o.handler().handle(req, res, o.info());
      return;
    }
    byte[] body = o.answer().body().getBytes(StandardCharsets.UTF_8);
    res.setContentType(o.answer().contentType());
    res.setContentLength(body.length);
    res.getOutputStream().write(body);
  }

  /** The rendered answer for one decision of `policy` (shared with the Spring adapter). */
  public static Headers.Answer answer(Limiter client, String policy, Decision d) {
    return FilterCore.answer(client, policy, d);
  }

  /** The same with ratelimitd's `headers:` and `problem_json:` settings. */
  public static Headers.Answer answer(Limiter client, String policy, Decision d, HeaderSet set, boolean problemJson) {
    return FilterCore.answer(client, policy, d, set, problemJson);
  }

  @Override
  public void destroy() {}
}
