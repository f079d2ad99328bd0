// ConcurrencyFilter.java — a Servlet filter (javax.servlet, Servlet 3.1+: Jetty 9, Tomcat 8.5/9;
// JakartaConcurrencyFilter is the same for jakarta.servlet) that holds a lease of a ratelimitd
// concurrency policy while the rest of the chain runs, as Netflix's concurrency-limits servlet
// filter does and as the Go, Node and Python clients' middleware (issue 30): acquire, run,
// release with the outcome — a handler slower than timeout releases "timeout", a status >= 500
// or an exception "dropped", else "ok", with the measured latency, which an adaptive policy
// learns its limit from. Refused: ratelimitd's 429 with Retry-After and its RateLimit fields.
// Built in code (the constructor and the fluent setters, before the filter serves) or from
// web.xml init-params:
//   ratelimitd-url (required), policy (required), key-header (default: the client address,
//   X-Forwarded-For believed only from trusted-proxies, as RateLimitFilter's),
//   on-failure (open|closed, default open), timeout-ms (ratelimitd's answer, default 250),
//   cost (default 1), priority-header (a request header whose value is the lease's priority
//   class), max-wait-ms (ratelimitd may hold the request for a unit; default: the policy's),
//   handler-timeout-ms (a handler running longer releases "timeout"; default 0: never),
//   trusted-proxies (addresses / CIDR blocks whose X-Forwarded-For the default key believes).
// The logic is ConcurrencyCore's; this class moves its answer in and out of javax.servlet. The
// lease is released when doFilter returns: an async request (startAsync) is released then too.
// Thread-safety: one instance serves concurrent requests (configured before it serves).
package dev.ratelimit.client;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
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

public final class ConcurrencyFilter implements Filter {
  private ConcurrencyCore<HttpServletRequest> core;

  /** For web.xml: configured by init(). */
  public ConcurrencyFilter() {}

  /** key null: the client's address (see trustedProxies); cost null: 1; skip null: none skipped. */
  public ConcurrencyFilter(RatelimitdClient client, String policy, Function<HttpServletRequest, String> key,
                           ToLongFunction<HttpServletRequest> cost, Predicate<HttpServletRequest> skip) {
    core = new ConcurrencyCore<>(client, policy, key, cost, skip, HttpServletRequest::getRemoteAddr, ConcurrencyFilter::forwardedFor,
        HttpServletRequest::getHeader);
  }

  private static String forwardedFor(HttpServletRequest r) { return FilterCore.joined(r.getHeaders("X-Forwarded-For")); }

  /** The proxies whose X-Forwarded-For the default key believes: addresses or CIDR blocks
   *  ("10.0.0.0/8", "::1"), walked from the right as ratelimitd does (ClientIp). Default none. */
  public ConcurrencyFilter trustedProxies(String... cidrs) {
    core.trustedProxies(List.of(cidrs));
    return this;
  }

  /** Sends the value of request header `name` as the lease's priority class. */
  public ConcurrencyFilter priorityHeader(String name) {
    core.priorityHeader(name);
    return this;
  }

  /** Lets ratelimitd hold a request up to `d` for a unit to free, within the policy's max_wait
   *  (zero: refuse at once; null, the default: the policy's max_wait). */
  public ConcurrencyFilter maxWait(Duration d) {
    core.maxWait(d);
    return this;
  }

  /** A handler running longer than `d` releases "timeout" (zero: never); it is not cut off. */
  public ConcurrencyFilter timeout(Duration d) {
    core.timeout(d);
    return this;
  }

  /** Where a release ratelimitd refused goes (default: a warning on System.Logger). */
  public ConcurrencyFilter onReleaseError(Consumer<RuntimeException> onReleaseError) {
    core.onReleaseError(onReleaseError);
    return this;
  }

  @Override
  public void init(FilterConfig config) throws ServletException {
    if (core != null) return;
    try {
      core = ConcurrencyCore.fromInitParams(config::getInitParameter, HttpServletRequest::getRemoteAddr, ConcurrencyFilter::forwardedFor,
          HttpServletRequest::getHeader);
    } catch (RuntimeException e) {
      throw new ServletException("ConcurrencyFilter: " + e.getMessage(), e);
    }
  }

  @Override
  public void doFilter(ServletRequest request, ServletResponse response, FilterChain chain) throws IOException, ServletException {
    HttpServletRequest req = (HttpServletRequest) request;
    HttpServletResponse res = (HttpServletResponse) response;
    ConcurrencyCore.Admission a;
    try {
      a = core.acquire(req);
    } catch (RateLimitException e) {
      throw new ServletException("concurrency limiter: " + e.getMessage(), e);
    }
    if (a == null) {
      chain.doFilter(request, response);
      return;
    }
    for (String[] h : a.answer().headers()) res.setHeader(h[0], h[1]);
    if (a.answer().status() != 200) {
      byte[] body = a.answer().body().getBytes(StandardCharsets.UTF_8);
      res.setStatus(a.answer().status());
      res.setContentType("application/json");
      res.setContentLength(body.length);
      res.getOutputStream().write(body);
      return;
    }
    long start = System.nanoTime();
    boolean threw = true;
    try {
      chain.doFilter(request, response);
      threw = false;
    } finally {
      core.release(a, res.getStatus(), threw, System.nanoTime() - start);
    }
  }

  @Override
  public void destroy() {}
}
