// RateLimitFilter.java — a Servlet filter (javax.servlet, Servlet 3.1+: Jetty 9, Tomcat 8.5/9;
// JakartaRateLimitFilter is the same for jakarta.servlet): every request it sees is decided by a
// Limiter (RatelimitdClient, or RedisLimiter on Redis directly); admitted ones go on with
// RateLimit-Policy and RateLimit set, denied ones are answered here with ratelimitd's 429 (400
// for a cost over the capacity, or a missing or too long key), rendered by Headers. Built in
// code (the constructor, any Limiter, then the fluent options below) or from web.xml
// init-params (ratelimitd):
//   ratelimitd-url (required), policy (required), key-header (default: the client address),
//   on-failure (open|closed, default open), timeout-ms (default 250), cost (default 1),
//   usage-header (a response header carrying the units the request used, e.g. an LLM's tokens),
//   headers (ietf|draft6|x-ratelimit|none, default ietf), problem-json (true|false),
//   status-code (of a refusal, 400-599, default 429), message (a refusal's text/plain body),
//   trusted-proxies (addresses / CIDR blocks whose X-Forwarded-For the default key believes,
//   comma- or space-separated; default none: the peer), skip-successful-requests and
//   skip-failed-requests (true|false: the admitted unit given back after a response < 400 /
//   >= 400).
// The decision is the request attribute DECISION_ATTRIBUTE (a RateLimitInfo), for the servlet and
// a refusal handler. Usage after the response (docs/usage.md): with usage(...) or usage-header,
// `cost` is the estimate and each admitted request is reconciled (Reservation) after
// chain.doFilter, once the response has been flushed, on the request's thread; a failed report
// goes to onReportError (as a failed refund of the skip options).
// The logic is FilterCore's, shared with the Jakarta filter; this class moves its answer in and
// out of javax.servlet. A RateLimitException other than a bad key (the application's bug)
// propagates as a ServletException; a bad option throws when the filter is configured.
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
import javax.servlet.Filter;
import javax.servlet.FilterChain;
import javax.servlet.FilterConfig;
import javax.servlet.ServletException;
import javax.servlet.ServletRequest;
import javax.servlet.ServletResponse;
import javax.servlet.http.HttpServletRequest;
import javax.servlet.http.HttpServletResponse;

public final class RateLimitFilter implements Filter {
  /** The request attribute holding the filter's decision, a RateLimitInfo ("dev.ratelimit.decision"). */
  public static final String DECISION_ATTRIBUTE = RateLimitInfo.ATTRIBUTE;

  private FilterCore<HttpServletRequest, HttpServletResponse> core;

  /** For web.xml: configured by init(). */
  public RateLimitFilter() {}

  /** `key` null: the client address (see trustedProxies); `cost` null: 1; `skip` null: none. */
  public RateLimitFilter(Limiter client, String policy, Function<HttpServletRequest, String> key,
                         ToLongFunction<HttpServletRequest> cost, Predicate<HttpServletRequest> skip) {
    core = new FilterCore<>(client, policy, key, cost, skip, HttpServletRequest::getRemoteAddr, RateLimitFilter::forwardedFor);
  }

  private static String forwardedFor(HttpServletRequest r) { return FilterCore.joined(r.getHeaders("X-Forwarded-For")); }

  /** Reports each admitted request's usage after the response: `usage` reads it from the request
   *  and response (e.g. a header the servlet set); null keeps the estimate (cost). */
  public RateLimitFilter usage(BiFunction<HttpServletRequest, HttpServletResponse, Long> usage,
                               Consumer<RuntimeException> onReportError) {
    core.usage(usage, onReportError);
    return this;
  }

  /** The rate-limit fields sent (ratelimitd's `headers:`, default IETF) and a 429's body as
   *  application/problem+json (ratelimitd's `problem_json: true`). */
  public RateLimitFilter headers(HeaderSet set, boolean problemJson) {
    core.render(set, problemJson);
    return this;
  }

  /** A refusal's status (400-599, default 429) and, unless null, its text/plain body instead of
   *  ratelimitd's; the rate-limit headers and Retry-After are kept. */
  public RateLimitFilter refusal(int statusCode, String message) {
    core.refusal(statusCode, message);
    return this;
  }

  /** Answers refusals itself (a page, a redirect): the headers and refusal(...)'s status are set. */
  public RateLimitFilter onRefusal(Refusal.Handler<HttpServletRequest, HttpServletResponse> handler) {
    core.onRefusal(handler);
    return this;
  }

  /** Proxies whose X-Forwarded-For the default key believes: addresses or CIDR blocks
   *  ("10.0.0.0/8", "::1"), walked from the right as ratelimitd does (ClientIp). Default none. */
  public RateLimitFilter trustedProxies(String... cidrs) {
    core.trustedProxies(List.of(cidrs));
    return this;
  }

  /** Gives the unit of an admitted request back when its response's status is below 400 (only
   *  failures count, e.g. login attempts). */
  public RateLimitFilter skipSuccessfulRequests(boolean skip) {
    core.skipRequests(skip, core.skipsFailed());
    return this;
  }

  /** Gives the unit of an admitted request back when its response's status is 400 or above, or
   *  the chain threw (only successes count). */
  public RateLimitFilter skipFailedRequests(boolean skip) {
    core.skipRequests(core.skipsSuccessful(), skip);
    return this;
  }

  @Override
  public void init(FilterConfig config) throws ServletException {
    if (core != null) return;
    try {
      core = FilterCore.fromInitParams(config::getInitParameter, HttpServletRequest::getRemoteAddr, RateLimitFilter::forwardedFor,
          HttpServletRequest::getHeader, HttpServletResponse::getHeader);
    } catch (RuntimeException e) {
      throw new ServletException("RateLimitFilter: " + e.getMessage(), e);
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
