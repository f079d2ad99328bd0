// FilterCore.java — what the javax (RateLimitFilter) and Jakarta (JakartaRateLimitFilter) servlet
// filters share, free of either Servlet API: the configuration (in code, or from init-params),
// the decision and the answer for one request, and the reconciliation of its usage after the
// response. Q and S are the API's request and response types; the filters only move headers,
// status and body between this and their container.
// Rules: bad input from the request (no key, a key over the length bound) is 400 missing_key /
// invalid_key as ratelimitd answers it (issue 31 defect 6); any other RateLimitException is the
// application's bug and propagates; the failure policy is the Limiter's.
// Thread-safety: immutable once configured; one instance serves concurrent requests.
package dev.ratelimit.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.function.BiFunction;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.function.ToLongFunction;

final class FilterCore<Q, S> {
  final Limiter client;
  final String policy;
  private final Function<Q, String> key;
  private final ToLongFunction<Q> cost;
  private final Predicate<Q> skip;
  private BiFunction<Q, S, Long> usage;
  private Consumer<RuntimeException> onReportError = e -> {};

  /** One request's outcome: the answer to send (200: go on), and the reservation to reconcile. */
  record Outcome(Headers.Answer answer, Reservation reservation) {}

  /** What flushes the response (the API's flushBuffer). */
  interface Flush { void run() throws java.io.IOException; }

  FilterCore(Limiter client, String policy, Function<Q, String> key, ToLongFunction<Q> cost, Predicate<Q> skip) {
    if (client == null || policy == null || key == null) {
      throw new RateLimitException("invalid_request", "the rate limit filter needs a limiter, a policy and a key function");
    }
    if (client.describe(policy).isEmpty() && client instanceof RedisLimiter) {
      throw new RateLimitException("unknown_policy", "the limiter has no policy '" + policy + "'");
    }
    this.client = client;
    this.policy = policy;
    this.key = key;
    this.cost = cost == null ? r -> 1 : cost;
    this.skip = skip == null ? r -> false : skip;
  }

  /** From init-params (web.xml): ratelimitd-url and policy required; key-header, on-failure,
   *  timeout-ms, cost, usage-header optional. `param` reads one, null when absent. */
  static <Q, S> FilterCore<Q, S> fromInitParams(Function<String, String> param, Function<Q, String> remoteAddr,
                                                BiFunction<Q, String, String> requestHeader, BiFunction<S, String, String> responseHeader) {
    String url = param.apply("ratelimitd-url"), policy = param.apply("policy");
    if (url == null || policy == null) throw new RateLimitException("invalid_request", "the rate limit filter needs init-params ratelimitd-url and policy");
    FailurePolicy onFailure = "closed".equals(param.apply("on-failure")) ? FailurePolicy.CLOSED : FailurePolicy.OPEN;
    String t = param.apply("timeout-ms");
    RatelimitdClient client = new RatelimitdClient(url, onFailure, Duration.ofMillis(t == null ? 250 : Long.parseLong(t)), null);
    String header = param.apply("key-header");
    Function<Q, String> key = header == null ? remoteAddr : r -> requestHeader.apply(r, header);
    String c = param.apply("cost");
    long fixed = c == null ? 1 : Long.parseLong(c);
    FilterCore<Q, S> core = new FilterCore<>(client, policy, key, r -> fixed, null);
    String usageHeader = param.apply("usage-header");
    if (usageHeader != null) {
      core.usage((rq, rs) -> {
        String v = responseHeader.apply(rs, usageHeader);
        return v == null ? null : Long.valueOf(v);
      }, null);
    }
    return core;
  }

  void usage(BiFunction<Q, S, Long> usage, Consumer<RuntimeException> onReportError) {
    this.usage = usage;
    if (onReportError != null) this.onReportError = onReportError;
  }

  /** The decision for `req` and its answer; null when the request is skipped. */
  Outcome decide(Q req) {
    if (skip.test(req)) return null;
    try {
      String k = key.apply(req);
      long c = cost.applyAsLong(req);
      Decision d = client.acquire(policy, k, c);
      Reservation r = usage != null && d.allowed() ? new Reservation(client, policy, k, c, d) : null;
      return new Outcome(answer(client, policy, d), r);
    } catch (RateLimitException e) {
      if (!e.code().equals("invalid_key")) throw e;
      String name = e.getMessage().startsWith("key must not be empty") ? "missing_key" : "invalid_key";
      return new Outcome(new Headers.Answer(400, List.<String[]>of(new String[] {"Cache-Control", "no-store"}),
          "{\"error\":\"" + name + "\",\"message\":" + Json.quote(e.getMessage()) + "}"), null);
    }
  }

  /** Reconciles an admitted request with its usage once its response is flushed; never throws. */
  void reconcile(Outcome o, Q req, S res, Flush flush) {
    if (o.reservation() == null) return;
    try {
      Long used = usage.apply(req, res);
      if (used == null) return;
      try {
        flush.run();
      } catch (java.io.IOException e) {
        // The client left: the work was done all the same, so its usage is still reported.
      }
      o.reservation().reconcile(used);
    } catch (RuntimeException e) {
      onReportError.accept(e);
    }
  }

  /** The rendered answer for one decision of `policy`. */
  static Headers.Answer answer(Limiter client, String policy, Decision d) {
    Optional<PolicyInfo> known = client.describe(policy);
    boolean failure = d.reason().equals("failed_open") || d.reason().equals("failed_closed");
    if (known.isEmpty() && failure) {
      // ratelimitd has not answered once since the app started, so nothing says the policy's
      // quota and window: the failure policy still answers (issue 31 defect 1), without the
      // RateLimit-Policy and RateLimit fields it cannot fill in truthfully.
      Headers.Answer a = Headers.render(List.of(d), List.of(new PolicyInfo(policy, d.limit(), 0)));
      List<String[]> kept = new ArrayList<>();
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
}
