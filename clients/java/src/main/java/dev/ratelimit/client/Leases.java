// Leases.java — concurrency leases through ratelimitd (docs/throttling.md), behind
// RatelimitdClient.acquireLease / releaseLease / renewLease, as the Go client's leases.go:
// POST /v1/leases takes `cost` units of a concurrency policy, DELETE /v1/leases/{id} gives them
// back with the work's Outcome (an adaptive limit learns from it), POST /v1/leases/{id}/renew
// extends one. The HTTP, JSON and failure accounting are RatelimitdClient's (send, countFailure).
// Rules:
//  - input ratelimitd would refuse (empty policy or key, cost < 1, a negative maxWait; an
//    Outcome checks its own) is RateLimitException before anything is sent;
//  - ratelimitd's own 4xx (unknown_policy, not_a_concurrency_policy, unknown_priority,
//    invalid_lease_id, ...) is RateLimitException with ratelimitd's code; cost_exceeds_capacity
//    is a refused Lease; an answer that is not the JSON expected is code protocol;
//  - no answer within the client's timeout (plus maxWait, which ratelimitd may spend waiting), a
//    refused connection or a 5xx is the client's failure policy, counted in failures(): OPEN
//    grants a Lease without an id, CLOSED refuses (failed_closed, retry after 1 s);
//  - release never throws for an unreachable ratelimitd (false: the lease lapses at its TTL), so
//    a finally can call it; renew answers true under OPEN, false under CLOSED.
// Thread-safety: stateless; every method may be called from any thread.
package dev.ratelimit.client;

import java.io.IOException;
import java.math.BigDecimal;
import java.net.URLEncoder;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;

final class Leases {
  private Leases() {}

  /** The failure policy's lease: OPEN grants one without an id, CLOSED refuses for 1 s. */
  static Lease failure(RatelimitdClient c, String policy, String key) {
    return c.onFailure() == FailurePolicy.OPEN
        ? new Lease(true, "failed_open", null, policy, key, 0, 0, Duration.ZERO, Duration.ZERO, null, null)
        : new Lease(false, "failed_closed", null, policy, key, 0, 0, Duration.ZERO, Duration.ofSeconds(1), null, null);
  }

  static Lease acquire(RatelimitdClient c, String policy, String key, long cost, LeaseOptions o) {
    if (policy == null || policy.isEmpty()) throw new RateLimitException("invalid_policy", "policy must not be empty");
    if (key == null || key.isEmpty()) throw new RateLimitException("invalid_key", "key must not be empty");
    if (cost < 1) throw new RateLimitException("invalid_cost", "cost must be at least 1, got " + cost);
    if (o == null) o = LeaseOptions.NONE;
    Duration maxWait = o.maxWait();
    if (maxWait != null && maxWait.isNegative()) throw new RateLimitException("invalid_max_wait", "maxWait must not be negative, got " + maxWait);
    StringBuilder body = new StringBuilder("{\"key\":").append(Json.quote(key)).append(",\"policy\":").append(Json.quote(policy))
        .append(",\"cost\":").append(cost);
    if (o.priority() != null && !o.priority().isEmpty()) body.append(",\"priority\":").append(Json.quote(o.priority()));
    if (maxWait != null) body.append(",\"max_wait_ms\":").append(maxWait.isZero() ? 0 : Math.max(1, maxWait.toMillis()));
    HttpResponse<String> r = call(c, "POST", "/v1/leases", body.append('}').toString(), maxWait == null ? Duration.ZERO : maxWait);
    if (r == null) return failure(c, policy, key);
    int status = r.statusCode();
    Map<String, Object> m = Json.parseObject(r.body());
    String rlp = r.headers().firstValue("RateLimit-Policy").orElse(null), rl = r.headers().firstValue("RateLimit").orElse(null);
    if (status == 409 && "policy_conflict".equals(m.get("error"))) {  // another definition holds the key
      return new Lease(false, "policy_conflict", null, policy, key, 0, 0, Duration.ZERO,
          Duration.ofMillis(num(m, "retry_after_ms")), rlp, rl);
    }
    long limit = num(m, "limit");
    if (status == 400 && "cost_exceeds_capacity".equals(m.get("error"))) {
      return new Lease(false, "exceeds_capacity", null, policy, key, limit, 0, Duration.ZERO, Duration.ZERO, rlp, rl);
    }
    if (status != 200 && status != 429) throw error(status, m);
    long remaining = num(m, "remaining");
    if (status == 429) {
      return new Lease(false, "over_limit", null, policy, key, limit, remaining, Duration.ZERO,
          Duration.ofMillis(num(m, "retry_after_ms")), rlp, rl);
    }
    Object id = m.get("lease_id");
    String reason = m.get("reason") instanceof String s ? s : "within_limit";
    if (id == null && m.containsKey("lease_id")) {
      // ratelimitd's store failed open: admitted, with nothing to release or renew.
      return new Lease(true, reason, null, policy, key, limit, remaining, Duration.ZERO, Duration.ZERO, rlp, rl);
    }
    if (!(id instanceof String s) || s.isEmpty()) throw new RateLimitException("protocol", "a granted lease without a lease_id: " + r.body());
    return new Lease(true, reason, s, policy, key, limit, remaining, Duration.ofMillis(num(m, "expires_ms")), Duration.ZERO, rlp, rl);
  }

  static boolean release(RatelimitdClient c, Lease lease, Outcome out) {
    if (lease == null) throw new RateLimitException("invalid_request", "no lease to release");
    if (out == null) out = Outcome.NONE;
    if (!lease.allowed() || lease.id() == null) return false;
    String body = null;  // no body without an outcome or a latency
    if (out.outcome() != null || !out.latency().isZero()) {
      StringBuilder b = new StringBuilder("{");
      if (out.outcome() != null) b.append("\"outcome\":").append(Json.quote(out.outcome()));
      if (!out.latency().isZero()) {
        if (b.length() > 1) b.append(',');
        // Plain decimal ms (never 1.0E-4): ratelimitd reads latency_ms as a JSON number.
        b.append("\"latency_ms\":").append(BigDecimal.valueOf(out.latency().toNanos(), 6).toPlainString());
      }
      body = b.append('}').toString();
    }
    HttpResponse<String> r = call(c, "DELETE", path(lease, ""), body, Duration.ZERO);
    if (r == null) return false;
    Map<String, Object> m = Json.parseObject(r.body());
    if (r.statusCode() == 409 && "policy_conflict".equals(m.get("error"))) return false;  // another definition's state
    if (r.statusCode() != 200) throw error(r.statusCode(), m);
    return Boolean.TRUE.equals(m.get("released"));
  }

  static boolean renew(RatelimitdClient c, Lease lease) {
    if (lease == null) throw new RateLimitException("invalid_request", "no lease to renew");
    if (!lease.allowed() || lease.id() == null) return lease.allowed();
    HttpResponse<String> r = call(c, "POST", path(lease, "/renew"), null, Duration.ZERO);
    if (r == null) return c.onFailure() == FailurePolicy.OPEN;
    Map<String, Object> m = Json.parseObject(r.body());
    if (r.statusCode() == 404 && "lease_not_held".equals(m.get("error"))) return false;
    if (r.statusCode() == 409 && "policy_conflict".equals(m.get("error"))) return false;  // another definition's state
    if (r.statusCode() != 200) throw error(r.statusCode(), m);
    if (m.get("expires_ms") instanceof Double d) lease.expires(Duration.ofMillis(d.longValue()));
    return Boolean.TRUE.equals(m.get("renewed"));
  }

  /** ratelimitd's answer below 500; null (counted as a failure) when it could not answer. */
  private static HttpResponse<String> call(RatelimitdClient c, String method, String path, String body, Duration extra) {
    try {
      HttpResponse<String> r = c.send(method, path, body, extra);
      if (r.statusCode() < 500) return r;
    } catch (IOException e) {
      // unreachable or too slow: the failure policy answers
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    c.countFailure();
    return null;
  }

  private static String path(Lease lease, String tail) {
    return "/v1/leases/" + URLEncoder.encode(lease.id(), StandardCharsets.UTF_8).replace("+", "%20") + tail;
  }

  private static long num(Map<String, Object> m, String k) {
    return m.get(k) instanceof Double d ? d.longValue() : 0;
  }

  private static RateLimitException error(int status, Map<String, Object> m) {
    String code = m.get("error") instanceof String s ? s : "protocol";
    String message = m.get("message") instanceof String s ? s : m.toString();
    return new RateLimitException(code, "ratelimitd answered " + status + ": " + message);
  }
}
