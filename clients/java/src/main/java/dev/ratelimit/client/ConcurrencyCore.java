// ConcurrencyCore.java — what the javax (ConcurrencyFilter) and Jakarta (JakartaConcurrencyFilter)
// concurrency filters share, free of either Servlet API, as the Go client's concurrency.go: the
// configuration (in code, or from init-params), the lease taken before the handler and its
// answer, and the release after it with the outcome. Q is the API's request type.
// Rules:
//  - acquired before the handler: refused → ratelimitd's 429 (Retry-After, Cache-Control, its
//    RateLimit-Policy and RateLimit fields, the JSON body Headers renders for a rate denial; 400
//    for a cost over the capacity); the failure policy is the client's (failed_open runs the
//    handler without a lease, failed_closed is 429 with Retry-After: 1), and so does a refusal
//    for policy_conflict (another definition of the policy's name holds the key, issue 31: the
//    app's configuration error, counted in failures() and logged naming the policy, never a 429
//    with the conflict's wait);
//  - the default key is the client address through trusted proxies only (ClientIp), as the rate
//    filter's (FilterCore), so one request is one key for both filters;
//  - bad input from the request (no key, a key too long, a cost below 1, a priority class the
//    policy does not have) is 400 with ratelimitd's code; any other RateLimitException is the
//    application's bug and propagates;
//  - released exactly once, after the handler, with: "timeout" when it ran longer than timeout
//    (it is not cut off), "dropped" when it threw or its status is >= 500, else "ok"; each with
//    the measured latency (none at an hour or more, ratelimitd's bound). A release that throws
//    (ratelimitd refusing it) goes to onReleaseError; an unreachable ratelimitd does not throw.
// Thread-safety: configured before the filter serves (the constructor and the fluent setters of
// the filters, or init); then only read, and one instance serves concurrent requests.
package dev.ratelimit.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BiFunction;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.function.ToLongFunction;

final class ConcurrencyCore<Q> {
  private static final System.Logger LOG = System.getLogger(ConcurrencyCore.class.getName());
  final RatelimitdClient client;
  final String policy;
  private final Function<Q, String> key;  // null: the client address (ClientIp)
  private final ToLongFunction<Q> cost;
  private final Predicate<Q> skip;
  private final Function<Q, String> peer;
  private final Function<Q, String> forwardedFor;
  private final BiFunction<Q, String, String> requestHeader;
  private volatile ClientIp.TrustedProxies trusted = new ClientIp.TrustedProxies(List.of());
  private volatile String priorityHeader;
  private volatile Duration maxWait;  // null: the policy's max_wait
  private volatile Duration timeout = Duration.ZERO;
  private volatile Consumer<RuntimeException> onReleaseError =
      e -> LOG.log(System.Logger.Level.WARNING, "ratelimitd refused a lease release", e);

  /** One request's admission: the lease (null: refused, or bad input) and the answer (200: run
   *  the handler with these headers set; else send it as it is). */
  record Admission(Lease lease, Headers.Answer answer) {}

  /** `key` null: the client address of `peer` (the connection's) and `forwardedFor` (the
   *  request's X-Forwarded-For, occurrences joined, null when absent) through trustedProxies. */
  ConcurrencyCore(RatelimitdClient client, String policy, Function<Q, String> key, ToLongFunction<Q> cost,
                  Predicate<Q> skip, Function<Q, String> peer, Function<Q, String> forwardedFor,
                  BiFunction<Q, String, String> requestHeader) {
    if (client == null || policy == null || policy.isEmpty()) {
      throw new RateLimitException("invalid_request", "the concurrency filter needs a RatelimitdClient and a policy");
    }
    this.client = client;
    this.policy = policy;
    this.key = key;
    this.cost = cost == null ? r -> 1 : cost;
    this.skip = skip == null ? r -> false : skip;
    this.peer = peer;
    this.forwardedFor = forwardedFor;
    this.requestHeader = requestHeader;
  }

  /** From init-params (web.xml): ratelimitd-url and policy required; key-header, on-failure,
   *  timeout-ms, cost, priority-header, max-wait-ms, handler-timeout-ms, trusted-proxies
   *  optional. */
  static <Q> ConcurrencyCore<Q> fromInitParams(Function<String, String> param, Function<Q, String> peer,
                                               Function<Q, String> forwardedFor, BiFunction<Q, String, String> requestHeader) {
    String url = param.apply("ratelimitd-url"), policy = param.apply("policy");
    if (url == null || policy == null) {
      throw new RateLimitException("invalid_request", "the concurrency filter needs init-params ratelimitd-url and policy");
    }
    String f = param.apply("on-failure");
    if (f != null && !f.equals("open") && !f.equals("closed")) {
      throw new RateLimitException("invalid_request", "on-failure must be open or closed, got " + f);
    }
    FailurePolicy onFailure = "closed".equals(f) ? FailurePolicy.CLOSED : FailurePolicy.OPEN;
    RatelimitdClient client = new RatelimitdClient(url, onFailure, millis(param, "timeout-ms", 250), null);
    String header = param.apply("key-header");
    Function<Q, String> key = header == null ? null : r -> requestHeader.apply(r, header);
    String c = param.apply("cost");
    long fixed = c == null ? 1 : Long.parseLong(c);
    if (fixed < 1) throw new RateLimitException("invalid_cost", "init-param cost must be at least 1, got " + fixed);
    ConcurrencyCore<Q> core = new ConcurrencyCore<>(client, policy, key, r -> fixed, null, peer, forwardedFor, requestHeader);
    core.priorityHeader(param.apply("priority-header"));
    String proxies = param.apply("trusted-proxies");
    if (proxies != null) core.trustedProxies(FilterCore.proxyList(proxies));
    if (param.apply("max-wait-ms") != null) core.maxWait(millis(param, "max-wait-ms", 0));
    core.timeout(millis(param, "handler-timeout-ms", 0));
    return core;
  }

  private static Duration millis(Function<String, String> param, String name, long fallback) {
    String v = param.apply(name);
    long ms = v == null ? fallback : Long.parseLong(v);
    if (ms < 0) throw new RateLimitException("invalid_request", "init-param " + name + " must not be negative, got " + ms);
    return Duration.ofMillis(ms);
  }

  /** The proxies (addresses / CIDR blocks) whose X-Forwarded-For the default key believes. */
  void trustedProxies(List<String> cidrs) { trusted = new ClientIp.TrustedProxies(cidrs); }

  /** The request header whose value is sent as the lease's priority class (null: none). */
  void priorityHeader(String name) { priorityHeader = name == null || name.isEmpty() ? null : name; }

  /** How long ratelimitd may hold a request waiting for a unit (zero: answer at once; null: the
   *  policy's max_wait). */
  void maxWait(Duration d) {
    if (d != null && d.isNegative()) throw new RateLimitException("invalid_request", "maxWait must be zero or more, got " + d);
    maxWait = d;
  }

  /** A handler running longer than this releases "timeout" (zero: never). */
  void timeout(Duration d) {
    if (d == null || d.isNegative()) throw new RateLimitException("invalid_request", "timeout must be zero or more, got " + d);
    timeout = d;
  }

  void onReleaseError(Consumer<RuntimeException> c) {
    if (c != null) onReleaseError = c;
  }

  /** The lease for `req` and its answer; null when the request is skipped. */
  Admission acquire(Q req) {
    if (skip.test(req)) return null;
    try {
      String k = key != null ? key.apply(req) : ClientIp.clientAddress(peer.apply(req), forwardedFor.apply(req), trusted);
      if (k == null || k.isEmpty()) return new Admission(null, bad("missing_key", "key must not be empty: the request has none"));
      String h = priorityHeader;
      LeaseOptions o = new LeaseOptions(h == null ? null : requestHeader.apply(req, h), maxWait);
      Lease lease = client.acquireLease(policy, k, cost.applyAsLong(req), o);
      if ("policy_conflict".equals(lease.reason())) {
        long waitUs = lease.retryAfter().toNanos() / 1000;
        LOG.log(System.Logger.Level.ERROR, FilterCore.conflictError(policy, new Decision(false, lease.reason(), 0, 0, waitUs, waitUs, 0)).getMessage());
        client.countFailure();
        lease = Leases.failure(client, policy, k);
      }
      return new Admission(lease, answer(lease));
    } catch (RateLimitException e) {
      return switch (e.code()) {
        case "invalid_key", "invalid_cost", "unknown_priority", "invalid_priority" -> new Admission(null, bad(e.code(), e.getMessage()));
        default -> throw e;
      };
    }
  }

  private static Headers.Answer bad(String code, String message) {
    return new Headers.Answer(400, List.<String[]>of(new String[] {"Cache-Control", "no-store"}),
        "{\"error\":" + Json.quote(code) + ",\"message\":" + Json.quote(message) + "}");
  }

  /** The answer for a lease: 200 with ratelimitd's fields, or its refusal rendered as a rate
   *  denial is, with ratelimitd's own RateLimit-Policy and RateLimit fields. */
  static Headers.Answer answer(Lease lease) {
    List<String[]> hs = new ArrayList<>();
    if (lease.rateLimitPolicy() != null) hs.add(new String[] {"RateLimit-Policy", lease.rateLimitPolicy()});
    if (lease.allowed()) {
      if (lease.rateLimit() != null) hs.add(new String[] {"RateLimit", lease.rateLimit()});
      return new Headers.Answer(200, hs, "");
    }
    long retryUs = lease.retryAfter().toNanos() / 1000;
    Decision d = new Decision(false, lease.reason(), lease.limit(), lease.remaining(), retryUs, retryUs, 0);
    Headers.Answer a = Headers.render(List.of(d), List.of(new PolicyInfo(lease.policy(), lease.limit(), 0)));
    for (String[] h : a.headers()) {
      if (!h[0].equals("RateLimit-Policy") && !h[0].equals("RateLimit")) hs.add(h);  // ratelimitd's own instead
    }
    if (a.status() == 429 && lease.rateLimit() != null) hs.add(new String[] {"RateLimit", lease.rateLimit()});
    return new Headers.Answer(a.status(), hs, a.body());
  }

  /** The outcome of a handler that ran `ranNanos`, answered `status`, or threw. */
  static Outcome outcomeOf(int status, boolean threw, long ranNanos, Duration timeout) {
    Duration ran = Duration.ofNanos(Math.max(0, ranNanos));
    Duration latency = ran.compareTo(Outcome.MAX_LATENCY) >= 0 ? Duration.ZERO : ran;
    if (!timeout.isZero() && ran.compareTo(timeout) > 0) return Outcome.timeout(latency);
    if (threw || status >= 500) return Outcome.dropped(latency);
    return Outcome.ok(latency);
  }

  /** Releases the admission's lease after the handler; never throws. */
  void release(Admission a, int status, boolean threw, long ranNanos) {
    if (a.lease() == null) return;
    try {
      client.releaseLease(a.lease(), outcomeOf(status, threw, ranNanos, timeout));
    } catch (RuntimeException e) {
      onReleaseError.accept(e);
    }
  }
}
