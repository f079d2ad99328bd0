// RatelimitdClient.java — decisions from a running ratelimitd over java.net.http: acquire (POST
// /v1/acquire), peek (/v1/peek), report (/v1/report: usage known after the fact, docs/usage.md),
// reset (/v1/reset, admin token); concurrency leases (acquireLease, releaseLease, renewLease:
// Leases.java). Its policies, its store (RedisLimiter is the other back-end:
// the function library on Redis directly).
// What comes back: the JSON body (ms figures rounded up by ratelimitd; back as µs they render to
// the same whole seconds) and RateLimit-Policy, from which each policy's quota and window are
// learned (`headers: ietf`, the default). 400 unknown_policy / invalid_key / invalid_cost throw
// RateLimitException with that code; cost_exceeds_capacity is a Decision; no answer within the
// timeout, a refused connection or a 5xx decide by the failure policy, counted in failures().
// Thread-safety: every method may be called from any thread (java.net.http.HttpClient is).
package dev.ratelimit.client;

import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public final class RatelimitdClient implements Limiter {
  private static final Pattern POLICY_ITEM = Pattern.compile("\"((?:[^\"\\\\]|\\\\.)*)\";q=(\\d+);w=(\\d+)");
  private final URI base;
  private final FailurePolicy onFailure;
  private final Duration timeout;
  private final String adminToken;
  private final HttpClient http;
  private final Map<String, PolicyInfo> infos = new ConcurrentHashMap<>();
  private final AtomicLong failures = new AtomicLong();

  /** url like "http://127.0.0.1:8080"; adminToken may be null (reset then needs none). */
  public RatelimitdClient(String url, FailurePolicy onFailure, Duration timeout, String adminToken) {
    if (url == null || !(url.startsWith("http://") || url.startsWith("https://"))) {
      throw new RateLimitException("invalid_request", "url must be http:// or https://, got " + url);
    }
    this.base = URI.create(url.replaceAll("/+$", ""));
    this.onFailure = onFailure;
    this.timeout = timeout;
    this.adminToken = adminToken;
    this.http = HttpClient.newBuilder().connectTimeout(timeout).version(HttpClient.Version.HTTP_1_1).build();
  }

  public RatelimitdClient(String url) { this(url, FailurePolicy.OPEN, Duration.ofMillis(250), null); }

  @Override
  public Decision acquire(String policy, String key, long cost) { return decide("/v1/acquire", policy, key, cost); }

  @Override
  public Decision peek(String policy, String key, long cost) { return decide("/v1/peek", policy, key, cost); }

  /** Records usage known after the fact (POST /v1/report): cost units even past the limit (the
   *  key is then in debt: acquires get 429 until the algorithm repays it), or, negative, a refund;
   *  0 records nothing. ratelimitd checks the range (limits.max_cost) and refuses a concurrency
   *  policy (400). Always allowed, with what is left now. */
  @Override
  public Decision report(String policy, String key, long cost) { return decide("/v1/report", policy, key, cost); }

  public void reset(String policy, String key) {
    try {
      HttpResponse<String> r = post("/v1/reset", "{\"key\":" + Json.quote(key) + ",\"policy\":" + Json.quote(policy) + "}", true);
      if (r.statusCode() != 200) throw errorOf(r.statusCode(), r.body());
    } catch (IOException e) {
      throw new RateLimitException("unavailable", "ratelimitd: " + e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new RateLimitException("unavailable", "interrupted");
    }
  }

  /** The quota and window of a policy, known once ratelimitd has answered for it. */
  @Override
  public Optional<PolicyInfo> describe(String policy) { return Optional.ofNullable(infos.get(policy)); }

  /** Decisions the failure policy answered. */
  @Override
  public long failures() { return failures.get(); }

  private HttpResponse<String> post(String path, String body, boolean admin) throws IOException, InterruptedException {
    HttpRequest.Builder b = HttpRequest.newBuilder(base.resolve(path)).timeout(timeout)
        .header("Content-Type", "application/json").POST(HttpRequest.BodyPublishers.ofString(body));
    if (admin && adminToken != null) b.header("Authorization", "Bearer " + adminToken);
    return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  private Decision decide(String path, String policy, String key, long cost) {
    if (key == null || key.isEmpty()) throw new RateLimitException("invalid_key", "key must not be empty");
    if (policy == null) throw new RateLimitException("unknown_policy", "policy must not be null");
    HttpResponse<String> r;
    try {
      r = post(path, "{\"key\":" + Json.quote(key) + ",\"policy\":" + Json.quote(policy) + ",\"cost\":" + cost + "}", false);
      if (r.statusCode() >= 500) throw new IOException("ratelimitd answered " + r.statusCode() + ": " + r.body());
    } catch (IOException e) {
      failures.incrementAndGet();
      PolicyInfo info = infos.get(policy);
      return Decision.failure(onFailure, info == null ? 0 : info.quota());
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      failures.incrementAndGet();
      return Decision.failure(onFailure, 0);
    }
    return read(r.statusCode(), r.headers().firstValue("RateLimit-Policy").orElse(""), r.body());
  }

  /** Takes `cost` units of concurrency policy `policy` for `key` (POST /v1/leases; Leases.java
   *  says what comes back, and when this throws). */
  public Lease acquireLease(String policy, String key, long cost, LeaseOptions options) {
    return Leases.acquire(this, policy, key, cost, options);
  }

  public Lease acquireLease(String policy, String key, long cost) { return acquireLease(policy, key, cost, LeaseOptions.NONE); }

  /** Gives a lease back with its work's outcome (DELETE /v1/leases/{id}): true when it was held;
   *  false for a refusal, an id-less grant, a lease already gone, or an unreachable ratelimitd
   *  (never an exception for that: the lease lapses at its TTL). */
  public boolean releaseLease(Lease lease, Outcome outcome) { return Leases.release(this, lease, outcome); }

  /** Extends a lease to its policy's lease_ttl from now (POST /v1/leases/{id}/renew), updating
   *  lease.expires(); false when it is no longer held. */
  public boolean renewLease(Lease lease) { return Leases.renew(this, lease); }

  /** One request for Leases: `body` JSON or null (none); ratelimitd may take `extra` (its wait)
   *  beyond the timeout. */
  HttpResponse<String> send(String method, String path, String body, Duration extra) throws IOException, InterruptedException {
    HttpRequest.Builder b = HttpRequest.newBuilder(base.resolve(path)).timeout(timeout.plus(extra));
    if (body != null) b.header("Content-Type", "application/json");
    return http.send(b.method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body)).build(),
        HttpResponse.BodyHandlers.ofString());
  }

  FailurePolicy onFailure() { return onFailure; }

  void countFailure() { failures.incrementAndGet(); }

  /** A policy_conflict decision answered as a failure (FilterCore), counted in failures(). */
  Decision conflictAsFailure(Decision d) {
    countFailure();
    return Decision.failure(onFailure, d.limit());
  }

  /** One of ratelimitd's answers as a Decision (learning the policies' quota and window). */
  Decision read(int status, String policyField, String body) {
    Matcher m = POLICY_ITEM.matcher(policyField);
    while (m.find()) {
      String name = m.group(1).replaceAll("\\\\(.)", "$1");
      infos.put(name, new PolicyInfo(name, Long.parseLong(m.group(2)), Long.parseLong(m.group(3)) * 1_000_000));
    }
    Map<String, Object> o = Json.parseObject(body);
    if (status == 400 && "cost_exceeds_capacity".equals(o.get("error"))) {
      return new Decision(false, "exceeds_capacity", num(o, "limit"), 0, 0, 0, 0);
    }
    if (status == 409 && "policy_conflict".equals(o.get("error"))) {  // another definition holds the key
      long waitUs = num(o, "retry_after_ms") * 1000;
      return new Decision(false, "policy_conflict", 0, 0, waitUs, waitUs, 0);
    }
    if (status != 200 && status != 429) throw errorOf(status, body);
    boolean allowed = Boolean.TRUE.equals(o.get("allowed"));
    return new Decision(allowed, allowed ? "within_limit" : "over_limit", num(o, "limit"), num(o, "remaining"),
        num(o, "reset_ms") * 1000, num(o, "retry_after_ms") * 1000, num(o, "delay_ms") * 1000);
  }

  private static long num(Map<String, Object> o, String k) {
    Object v = o.get(k);
    if (!(v instanceof Double)) throw new RateLimitException("protocol", "ratelimitd's answer lacks " + k);
    return ((Double) v).longValue();
  }

  private static RateLimitException errorOf(int status, String body) {
    String code = "protocol", message = body;
    try {
      Map<String, Object> o = Json.parseObject(body);
      Object e = o.get("error");
      if (e instanceof String s) code = switch (s) {
        case "unknown_policy", "invalid_key", "invalid_cost" -> s;
        default -> "invalid_request";
      };
      if (o.get("message") instanceof String s) message = s;
    } catch (RateLimitException ignored) {
      // not JSON: keep the text
    }
    return new RateLimitException(code, "ratelimitd answered " + status + ": " + message);
  }
}
