// LeaseApiTest.java — the Java client's lease API (RatelimitdClient's acquireLease, renewLease,
// releaseLease; issue 30) against a real ratelimitd (the project's build; memory store, then a
// Redis store): granted, refused with ratelimitd's numbers, renewed, released (twice: the second
// frees nothing), a cost over the capacity, ratelimitd's own 4xx codes, a wait for a unit
// (max_wait), priority classes, bad input refused before anything is sent, the same answers on
// the Redis store; then ratelimitd stopped — a release answers false and counts a failure, a
// renew answers by the failure policy, an acquire fails open or closed. Split from
// ConcurrencyFilterTest (the filter in Jetty), whose daemon and helpers it uses; run by
// scripts/ctest.sh as its own JVM.
// A plain main like the other tests (RateLimitFilterTest's process and check helpers): every
// check can fail and is counted; exit 1 if any did. Every process dies with this JVM.
package dev.ratelimit.client;

import static dev.ratelimit.client.ConcurrencyFilterTest.code;
import static dev.ratelimit.client.RateLimitFilterTest.check;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

public final class LeaseApiTest {
  static final String RUN = RateLimitFilterTest.RUN;

  public static void main(String[] args) throws Exception {
    Path dir = Files.createTempDirectory("rl-java-lease-api-");
    Process daemon = null, redis = null, redisDaemon = null;
    try {
      int dp = RateLimitFilterTest.freePort();
      daemon = ConcurrencyFilterTest.daemon(dir, dp, "{ type: memory }");
      String url = "http://127.0.0.1:" + dp;
      // Generous timeouts: hang guards on a loaded machine, not claims on speed.
      RatelimitdClient client = new RatelimitdClient(url, FailurePolicy.CLOSED, Duration.ofSeconds(30), null);

      // The lease API, with ratelimitd's numbers.
      String k = "lease-" + RUN;
      Lease a = client.acquireLease("db", k, 1), b = client.acquireLease("db", k, 1), c = client.acquireLease("db", k, 1);
      check(a.allowed() && "within_limit".equals(a.reason()) && a.id() != null && a.limit() == 2 && a.remaining() == 1
          && a.expires().equals(Duration.ofSeconds(30)) && a.rateLimitPolicy() != null && a.rateLimitPolicy().startsWith("\"db\";q=2")
          && "\"db\";r=1;t=30".equals(a.rateLimit()), "first lease " + a + " " + a.rateLimitPolicy() + " / " + a.rateLimit());
      check(b.allowed() && b.remaining() == 0 && b.id() != null && !b.id().equals(a.id()), "second lease " + b);
      check(!c.allowed() && "over_limit".equals(c.reason()) && c.id() == null && c.limit() == 2 && c.remaining() == 0
          && c.retryAfter().compareTo(Duration.ZERO) > 0 && c.retryAfter().compareTo(Duration.ofSeconds(30)) <= 0, "third lease refused " + c);
      check(client.renewLease(a) && a.expires().equals(Duration.ofSeconds(30)), "renew " + a);
      check(client.releaseLease(a, Outcome.ok(Duration.ofMillis(12))), "release a");
      check(!client.releaseLease(a, Outcome.NONE), "a second release of a frees nothing");
      check(!client.renewLease(a), "a released lease cannot be renewed");
      check(client.releaseLease(b, Outcome.ofMillis("dropped", 0.25)), "release b, dropped with a fractional latency");
      check(!client.releaseLease(c, Outcome.ok(Duration.ofMillis(1))), "a refusal has nothing to release");
      Lease again = client.acquireLease("db", k, 1);
      check(again.allowed() && again.remaining() == 1, "both units back after the releases: " + again);
      check(client.releaseLease(again, Outcome.NONE), "release with no outcome (no body)");
      Lease big = client.acquireLease("db", k, 3);
      check(!big.allowed() && "exceeds_capacity".equals(big.reason()) && big.limit() == 2, "cost 3 of 2: " + big);

      // ratelimitd's own 4xx codes, thrown with its code.
      check("unknown_policy".equals(code(() -> client.acquireLease("nope", k, 1))), "unknown policy");
      check("not_a_concurrency_policy".equals(code(() -> client.acquireLease("api", k, 1))), "a rate policy");
      check("unknown_priority".equals(code(() -> client.acquireLease("db", k, 1, new LeaseOptions("gold", null)))),
          "a priority on a policy without classes (the priority is sent)");
      Lease forged = new Lease(true, "within_limit", "not-a-lease-id", "db", k, 2, 1, Duration.ZERO, Duration.ZERO, null, null);
      check("invalid_lease_id".equals(code(() -> client.releaseLease(forged, Outcome.NONE))), "a forged id's release");
      check("invalid_lease_id".equals(code(() -> client.renewLease(forged))), "a forged id's renew");

      // Bad input: refused before sending. The client points at nothing and fails open, so a
      // request that went out would come back failed_open instead of throwing.
      RatelimitdClient nowhere = new RatelimitdClient("http://127.0.0.1:" + RateLimitFilterTest.freePort(), FailurePolicy.OPEN,
          Duration.ofSeconds(2), null);
      check("invalid_policy".equals(code(() -> nowhere.acquireLease("", k, 1))), "empty policy");
      check("invalid_key".equals(code(() -> nowhere.acquireLease("db", "", 1))), "empty key");
      check("invalid_cost".equals(code(() -> nowhere.acquireLease("db", k, 0))), "cost 0");
      check("invalid_max_wait".equals(code(() -> nowhere.acquireLease("db", k, 1, new LeaseOptions(null, Duration.ofMillis(-1))))),
          "negative max wait");
      check("invalid_outcome".equals(code(() -> new Outcome("fine", null))), "unknown outcome");
      check("invalid_latency".equals(code(() -> Outcome.ok(Duration.ofMillis(-1)))), "negative latency");
      check("invalid_latency".equals(code(() -> Outcome.ok(Duration.ofHours(2)))), "two-hour latency");
      check("invalid_latency".equals(code(() -> Outcome.ok(Duration.ofHours(1)))), "an hour's latency");
      check("invalid_latency".equals(code(() -> Outcome.ofMillis("ok", Double.NaN))), "NaN latency");
      check(nowhere.failures() == 0, "nothing was sent for bad input: failures " + nowhere.failures());

      // A wait for a unit (a policy with max_wait 10s): maxWait zero is refused at once, a wait
      // is granted on a release.
      String kw = "wait-" + RUN;
      Lease h1 = client.acquireLease("dbw", kw, 1), h2 = client.acquireLease("dbw", kw, 1);
      long tz = System.nanoTime();
      check(h1.allowed() && h2.allowed() && !client.acquireLease("dbw", kw, 1, new LeaseOptions(null, Duration.ZERO)).allowed()
          && System.nanoTime() - tz < TimeUnit.SECONDS.toNanos(5), "two held, maxWait zero: refused at once");
      long t0 = System.nanoTime();
      CompletableFuture<Lease> waiter = CompletableFuture.supplyAsync(
          () -> client.acquireLease("dbw", kw, 1, new LeaseOptions(null, Duration.ofSeconds(8))));
      Thread.sleep(300);
      check(!waiter.isDone(), "the waiter waits while both units are held");
      client.releaseLease(h1, Outcome.NONE);
      Lease waited = waiter.get(30, TimeUnit.SECONDS);
      check(waited.allowed() && System.nanoTime() - t0 >= TimeUnit.MILLISECONDS.toNanos(300), "granted after the release: " + waited);
      client.releaseLease(h2, Outcome.NONE);
      client.releaseLease(waited, Outcome.NONE);

      // Priority classes (classes: default; limit 2: sheddable keeps half, critical all).
      String kp = "pri-" + RUN;
      Lease s1 = client.acquireLease("pri", kp, 1, new LeaseOptions("sheddable", null));
      Lease s2 = client.acquireLease("pri", kp, 1, new LeaseOptions("sheddable", null));
      check(s1.allowed() && !s2.allowed(), "sheddable: one unit of 2 (" + s1 + ", " + s2 + ")");
      client.releaseLease(s1, Outcome.NONE);

      // Leases on the Redis store: the same answers, shared through Redis.
      int rp = RateLimitFilterTest.freePort(), rdp = RateLimitFilterTest.freePort();
      redis = RateLimitFilterTest.startRedis(dir, rp);
      redisDaemon = ConcurrencyFilterTest.daemon(dir, rdp, "{ type: redis, url: \"redis://127.0.0.1:" + rp
          + "/0\", key_prefix: \"rl:javalease-" + RUN + ":\", on_failure: closed, command_timeout: 30s }");
      RatelimitdClient viaRedis = new RatelimitdClient("http://127.0.0.1:" + rdp, FailurePolicy.CLOSED, Duration.ofSeconds(30), null);
      Lease r1 = viaRedis.acquireLease("db", k, 1), r2 = viaRedis.acquireLease("db", k, 1), r3 = viaRedis.acquireLease("db", k, 1);
      check(r1.allowed() && r2.allowed() && r2.remaining() == 0 && !r3.allowed() && r3.retryAfter().compareTo(Duration.ZERO) > 0,
          "Redis: " + r1 + " " + r2 + " " + r3);
      check(viaRedis.renewLease(r1) && viaRedis.releaseLease(r1, Outcome.ok(Duration.ofMillis(3)))
          && !viaRedis.releaseLease(r1, Outcome.NONE) && viaRedis.acquireLease("db", k, 1).allowed(), "Redis: renew, release, again");

      // ratelimitd stopped: the client's failure policy.
      RatelimitdClient open = new RatelimitdClient(url, FailurePolicy.OPEN, Duration.ofSeconds(5), null);
      Lease held = client.acquireLease("db", "held-" + RUN, 1);
      check(held.allowed() && held.id() != null, "held before the stop: " + held);
      RateLimitFilterTest.stop(daemon);
      daemon = null;
      long failures = client.failures();
      check(!client.releaseLease(held, Outcome.ok(Duration.ofMillis(5))) && client.failures() == failures + 1,
          "a release with ratelimitd down answers false and counts a failure");
      check(!client.renewLease(held) && open.renewLease(held), "renew with ratelimitd down: closed false, open true");
      Lease fo = open.acquireLease("db", "k", 1), fc = client.acquireLease("db", "k", 1);
      check(fo.allowed() && "failed_open".equals(fo.reason()) && fo.id() == null && !open.releaseLease(fo, Outcome.NONE),
          "failed open: " + fo);
      check(!fc.allowed() && "failed_closed".equals(fc.reason()) && fc.retryAfter().equals(Duration.ofSeconds(1)), "failed closed: " + fc);
    } finally {
      RateLimitFilterTest.stop(daemon);
      RateLimitFilterTest.stop(redisDaemon);
      RateLimitFilterTest.stop(redis);
    }
    int failed = RateLimitFilterTest.failed;
    System.out.println(failed == 0 ? "LeaseApiTest: all checks passed" : "LeaseApiTest: " + failed + " checks failed");
    System.exit(failed == 0 ? 0 : 1);
  }
}
