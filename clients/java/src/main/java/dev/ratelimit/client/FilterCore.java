// FilterCore.java — what the javax (RateLimitFilter) and Jakarta (JakartaRateLimitFilter) servlet
// filters share, free of either Servlet API: the configuration (in code, or from init-params),
// the decision and the answer for one request, and what happens after the response. Q and S are
// the API's request and response types; the filters only move headers, status, body and the
// request attribute between this and their container.
// Options (issue 31, as the Node and Python middleware): the header set and problem+json
// (HeaderSet, Headers), a custom refusal (Refusal), the decision as a request attribute
// (RateLimitInfo), the default key — the client address through trusted proxies only (ClientIp)
// — and skip-successful / skip-failed requests: the admitted unit given back after the response
// (Reservation.cancel) when the response's status says this outcome does not count.
// Rules: bad input from the request (no key, a key over the length bound) is 400 missing_key /
// invalid_key as ratelimitd answers it (issue 31 defect 6); any other RateLimitException is the
// application's bug and propagates; the failure policy is the Limiter's; bad options throw
// RateLimitException when the filter is configured, never per request. A policy_conflict
// decision (the key holds state of another definition of the policy's name, issue 31 defect 8)
// is the app's configuration error, not its user's: answered as the Limiter failing (its failure
// policy, counted in failures(), a RedisLimiter's onError told) and logged as an error naming the
// policy — never a 429 with the conflict's wait.
// Thread-safety: configured before it serves (the constructor, init, the filters' fluent
// methods); then read-only, one instance serving concurrent requests.
package dev.ratelimit.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Enumeration;
import java.util.List;
import java.util.Optional;
import java.util.function.BiFunction;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.function.ToLongFunction;

final class FilterCore<Q, S> {
  private static final System.Logger LOG = System.getLogger(FilterCore.class.getName());
  final Limiter client;
  final String policy;
  private final Function<Q, String> key;  // null: the client address (ClientIp)
  private final ToLongFunction<Q> cost;
  private final Predicate<Q> skip;
  private final Function<Q, String> peer;
  private final Function<Q, String> forwardedFor;
  private BiFunction<Q, S, Long> usage;
  private Consumer<RuntimeException> onReportError = e -> {};
  private HeaderSet headers = HeaderSet.IETF;
  private boolean problemJson;
  private Refusal<Q, S> refusal = new Refusal<>(429, null, null);
  private ClientIp.TrustedProxies trusted = new ClientIp.TrustedProxies(List.of());
  private boolean skipSuccessful, skipFailed;

  /** One request's outcome: the answer to send (200: go on), the reservation to settle after the
   *  response, the decision for the request attribute, and the refusal's handler (a refusal). */
  record Outcome<Q, S>(Headers.Answer answer, Reservation reservation, RateLimitInfo info, Refusal.Handler<Q, S> handler) {}

  /** What flushes the response (the API's flushBuffer). */
  interface Flush { void run() throws java.io.IOException; }

  /** `key` null: the client address of `peer` (the connection's) and `forwardedFor` (the
   *  request's X-Forwarded-For, occurrences joined, null when absent) through trustedProxies. */
  FilterCore(Limiter client, String policy, Function<Q, String> key, ToLongFunction<Q> cost, Predicate<Q> skip,
             Function<Q, String> peer, Function<Q, String> forwardedFor) {
    if (client == null || policy == null) {
      throw new RateLimitException("invalid_request", "the rate limit filter needs a limiter and a policy");
    }
    if (client.describe(policy).isEmpty() && client instanceof RedisLimiter) {
      throw new RateLimitException("unknown_policy", "the limiter has no policy '" + policy + "'");
    }
    this.client = client;
    this.policy = policy;
    this.key = key;
    this.cost = cost == null ? r -> 1 : cost;
    this.skip = skip == null ? r -> false : skip;
    this.peer = peer;
    this.forwardedFor = forwardedFor;
  }

  /** From init-params (web.xml): ratelimitd-url and policy required; key-header, on-failure,
   *  timeout-ms, cost, usage-header, headers, problem-json, status-code, message,
   *  trusted-proxies, skip-successful-requests, skip-failed-requests optional. `param` reads
   *  one, null when absent. */
  static <Q, S> FilterCore<Q, S> fromInitParams(Function<String, String> param, Function<Q, String> peer, Function<Q, String> forwardedFor,
                                                BiFunction<Q, String, String> requestHeader, BiFunction<S, String, String> responseHeader) {
    String url = param.apply("ratelimitd-url"), policy = param.apply("policy");
    if (url == null || policy == null) throw new RateLimitException("invalid_request", "the rate limit filter needs init-params ratelimitd-url and policy");
    FailurePolicy onFailure = "closed".equals(param.apply("on-failure")) ? FailurePolicy.CLOSED : FailurePolicy.OPEN;
    String t = param.apply("timeout-ms");
    RatelimitdClient client = new RatelimitdClient(url, onFailure, Duration.ofMillis(t == null ? 250 : Long.parseLong(t)), null);
    String header = param.apply("key-header");
    Function<Q, String> key = header == null ? null : r -> requestHeader.apply(r, header);
    String c = param.apply("cost");
    long fixed = c == null ? 1 : Long.parseLong(c);
    FilterCore<Q, S> core = new FilterCore<>(client, policy, key, r -> fixed, null, peer, forwardedFor);
    String usageHeader = param.apply("usage-header");
    if (usageHeader != null) {
      core.usage((rq, rs) -> {
        String v = responseHeader.apply(rs, usageHeader);
        return v == null ? null : Long.valueOf(v);
      }, null);
    }
    String set = param.apply("headers");
    core.render(set == null ? HeaderSet.IETF : HeaderSet.parse(set), flag(param, "problem-json"));
    String status = param.apply("status-code");
    if (status != null && !status.matches("[0-9]{1,3}")) {
      throw new RateLimitException("invalid_request", "init-param status-code must be a status 400-599, got '" + status + "'");
    }
    core.refusal(status == null ? 429 : Integer.parseInt(status), param.apply("message"));
    String proxies = param.apply("trusted-proxies");
    if (proxies != null) core.trustedProxies(proxyList(proxies));
    core.skipRequests(flag(param, "skip-successful-requests"), flag(param, "skip-failed-requests"));
    return core;
  }

  private static boolean flag(Function<String, String> param, String name) {
    String v = param.apply(name);
    if (v == null || v.equals("false")) return false;
    if (v.equals("true")) return true;
    throw new RateLimitException("invalid_request", "init-param " + name + " must be true or false, got '" + v + "'");
  }

  /** init-param trusted-proxies: addresses / CIDR blocks separated by commas or white space. */
  static List<String> proxyList(String param) {
    return Arrays.stream(param.split("[,\\s]+")).filter(s -> !s.isEmpty()).toList();
  }

  /** X-Forwarded-For's occurrences joined by ", " (one list, as proxies may split it); null when absent. */
  static String joined(Enumeration<String> values) {
    if (values == null || !values.hasMoreElements()) return null;
    List<String> all = new ArrayList<>();
    while (values.hasMoreElements()) all.add(values.nextElement());
    return String.join(", ", all);
  }

  void usage(BiFunction<Q, S, Long> usage, Consumer<RuntimeException> onReportError) {
    this.usage = usage;
    if (onReportError != null) this.onReportError = onReportError;
  }

  void render(HeaderSet set, boolean problemJson) {
    if (set == null) throw new RateLimitException("invalid_request", "the header set must be one of ietf, draft6, x-ratelimit, none");
    this.headers = set;
    this.problemJson = problemJson;
  }

  void refusal(int status, String message) { refusal = new Refusal<>(status, message, refusal.handler); }

  void onRefusal(Refusal.Handler<Q, S> handler) { refusal = new Refusal<>(refusal.status, refusal.message, handler); }

  void trustedProxies(List<String> cidrs) { trusted = new ClientIp.TrustedProxies(cidrs); }

  boolean skipsSuccessful() { return skipSuccessful; }

  boolean skipsFailed() { return skipFailed; }

  void skipRequests(boolean successful, boolean failed) {
    skipSuccessful = successful;
    skipFailed = failed;
  }

  /** The decision for `req` and its answer; null when the request is skipped. */
  Outcome<Q, S> decide(Q req) {
    if (skip.test(req)) return null;
    try {
      String k = key != null ? key.apply(req) : ClientIp.clientAddress(peer.apply(req), forwardedFor.apply(req), trusted);
      long c = cost.applyAsLong(req);
      Decision d = client.acquire(policy, k, c);
      if (d.reason().equals("policy_conflict")) d = conflictAsFailure(client, policy, d);
      boolean settle = usage != null || skipSuccessful || skipFailed;
      Reservation r = settle && d.allowed() ? new Reservation(client, policy, k, c, d) : null;
      Headers.Answer a = answer(client, policy, d, headers, problemJson);
      boolean refused = a.status() == 429;
      return new Outcome<>(refusal.apply(a), r, RateLimitInfo.of(policy, k, c, d), refused ? refusal.handler : null);
    } catch (RateLimitException e) {
      if (!e.code().equals("invalid_key")) throw e;
      String name = e.getMessage().startsWith("key must not be empty") ? "missing_key" : "invalid_key";
      return new Outcome<>(new Headers.Answer(400, List.<String[]>of(new String[] {"Cache-Control", "no-store"}),
          "{\"error\":\"" + name + "\",\"message\":" + Json.quote(e.getMessage()) + "}"), null, null, null);
    }
  }

  /** What a policy_conflict decision reports: the policy and how long the other definition's
   *  state lives. */
  static RateLimitException conflictError(String policy, Decision d) {
    return new RateLimitException("policy_conflict", "policy '" + policy + "': the key holds live state of another definition "
        + "of this name (another algorithm, window or counting mode) for " + ((d.retryAfterUs() + 999) / 1000) + " ms more; "
        + "a configuration error of the app, answered by the failure policy: give a changed definition a new name");
  }

  /** A policy_conflict decision answered as `client` answers a failure, logged as an error; a
   *  Limiter of the app's own answers OPEN (both back-ends' default). */
  static Decision conflictAsFailure(Limiter client, String policy, Decision d) {
    LOG.log(System.Logger.Level.ERROR, conflictError(policy, d).getMessage());
    if (client instanceof RedisLimiter r) return r.conflictAsFailure(policy, d);
    if (client instanceof RatelimitdClient r) return r.conflictAsFailure(d);
    return Decision.failure(FailurePolicy.OPEN, d.limit());
  }

  /** After an admitted request's response, whose status is `status`: its unit given back when the
   *  skip options say this outcome does not count, else its usage reconciled (usage(...)), once
   *  the response is flushed. Never throws: a failure goes to onReportError. */
  void after(Outcome<Q, S> o, Q req, S res, int status, Flush flush) {
    if (o.reservation() == null) return;
    try {
      if (status >= 400 ? skipFailed : skipSuccessful) {
        flush(flush);
        o.reservation().cancel();
        return;
      }
      if (usage == null) return;
      Long used = usage.apply(req, res);
      if (used == null) return;
      flush(flush);
      o.reservation().reconcile(used);
    } catch (RuntimeException e) {
      onReportError.accept(e);
    }
  }

  /** The chain threw (the container answers an error): with skip-failed-requests, the unit is
   *  given back; the usage is not reported (the work's end is unknown). Never throws. */
  void abandoned(Outcome<Q, S> o) {
    if (o.reservation() == null || !skipFailed) return;
    try {
      o.reservation().cancel();
    } catch (RuntimeException e) {
      onReportError.accept(e);
    }
  }

  private static void flush(Flush flush) {
    try {
      flush.run();
    } catch (java.io.IOException e) {
      // The client left: the work was done all the same, so what it counts is still settled.
    }
  }

  /** The rendered answer for one decision of `policy`, as ratelimitd's default (`headers: ietf`). */
  static Headers.Answer answer(Limiter client, String policy, Decision d) { return answer(client, policy, d, HeaderSet.IETF, false); }

  /** The rendered answer for one decision of `policy` with ratelimitd's `headers:` and `problem_json:`. */
  static Headers.Answer answer(Limiter client, String policy, Decision d, HeaderSet set, boolean problemJson) {
    Optional<PolicyInfo> known = client.describe(policy);
    boolean failure = d.reason().equals("failed_open") || d.reason().equals("failed_closed");
    if (known.isEmpty() && failure) {
      // ratelimitd has not answered once since the app started, so nothing says the policy's
      // quota and window: the failure policy still answers (issue 31 defect 1), without the
      // rate-limit fields it cannot fill in truthfully (Retry-After and Cache-Control only).
      Headers.Answer a = Headers.render(List.of(d), List.of(new PolicyInfo(policy, d.limit(), 0)), set, problemJson);
      List<String[]> kept = new ArrayList<>();
      for (String[] h : a.headers()) {
        if (h[0].equals("Retry-After") || h[0].equals("Cache-Control")) kept.add(h);
      }
      return new Headers.Answer(a.status(), kept, a.body(), a.contentType());
    }
    if (known.isEmpty() && set != HeaderSet.IETF) {
      // Only IETF's RateLimit-Policy shows the window; the other sets are the decision's alone
      // (a ratelimitd run with `headers: draft6` never sends the window to learn).
      return Headers.render(List.of(d), List.of(new PolicyInfo(policy, d.limit(), 0)), set, problemJson);
    }
    PolicyInfo info = known.orElseThrow(
        () -> new RateLimitException("protocol", "no quota or window known for policy " + policy));
    if (d.limit() != 0) info = new PolicyInfo(info.name(), d.limit(), info.windowUs());
    return Headers.render(List.of(d), List.of(info), set, problemJson);
  }
}
