// JakartaConcurrencyFilter.java — ConcurrencyFilter for jakarta.servlet (Servlet 5/6: Spring Boot
// 3, Tomcat 10+, Jetty 11+): the same constructor, fluent setters, init-params (web.xml) and
// answers, all ConcurrencyCore's; this class only moves them in and out of jakarta.servlet.
// Kept line for line with ConcurrencyFilter (scripts/ctest.sh checks), whose header says what
// the filter does. Thread-safety: one instance serves concurrent requests (configured before).
package dev.ratelimit.client;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
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

public final class JakartaConcurrencyFilter implements Filter {
  private ConcurrencyCore<HttpServletRequest> core;

  /** For web.xml: configured by init(). */
  public JakartaConcurrencyFilter() {}

  /** key null: the client's address (see trustedProxies); cost null: 1; skip null: none skipped. */
  public JakartaConcurrencyFilter(RatelimitdClient client, String policy, Function<HttpServletRequest, String> key,
                           ToLongFunction<HttpServletRequest> cost, Predicate<HttpServletRequest> skip) {
    core = new ConcurrencyCore<>(client, policy, key, cost, skip, HttpServletRequest::getRemoteAddr, JakartaConcurrencyFilter::forwardedFor,
        HttpServletRequest::getHeader);
  }

  private static String forwardedFor(HttpServletRequest r) { return FilterCore.joined(r.getHeaders("X-Forwarded-For")); }

  /** The proxies whose X-Forwarded-For the default key believes: addresses or CIDR blocks
   *  ("10.0.0.0/8", "::1"), walked from the right as ratelimitd does (ClientIp). Default none. */
  public JakartaConcurrencyFilter trustedProxies(String... cidrs) {
    core.trustedProxies(List.of(cidrs));
    return this;
  }

  /** Sends the value of request header `name` as the lease's priority class. */
  public JakartaConcurrencyFilter priorityHeader(String name) {
    core.priorityHeader(name);
    return this;
  }

  /** Lets ratelimitd hold a request up to `d` for a unit to free, within the policy's max_wait
   *  (zero: refuse at once; null, the default: the policy's max_wait). */
  public JakartaConcurrencyFilter maxWait(Duration d) {
    core.maxWait(d);
    return this;
  }

  /** A handler running longer than `d` releases "timeout" (zero: never); it is not cut off. */
  public JakartaConcurrencyFilter timeout(Duration d) {
    core.timeout(d);
    return this;
  }

  /** Where a release ratelimitd refused goes (default: a warning on System.Logger). */
  public JakartaConcurrencyFilter onReleaseError(Consumer<RuntimeException> onReleaseError) {
    core.onReleaseError(onReleaseError);
    return this;
  }

  @Override
  public void init(FilterConfig config) throws ServletException {
    if (core != null) return;
    try {
      core = ConcurrencyCore.fromInitParams(config::getInitParameter, HttpServletRequest::getRemoteAddr, JakartaConcurrencyFilter::forwardedFor,
          HttpServletRequest::getHeader);
    } catch (RuntimeException e) {
      throw new ServletException("JakartaConcurrencyFilter: " + e.getMessage(), e);
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
