// RedisFailures.java — RedisLimiterTest's failure part, on real redis-servers RedisLimiterTest
// starts: Redis hanging (SIGSTOP) and gone, answered by the failure policy within the timeout
// (the client's own RespClient and an app's client alike; the library not re-sent), and rediss://
// with a password and a database on a TLS-only redis-server (openssl's private CA), refused
// AUTH and an untrusted CA answered by the failure policy. Helpers only; RedisLimiterTest.main runs them.
package dev.ratelimit.client;

import static dev.ratelimit.client.RateLimitFilterTest.check;
import static dev.ratelimit.client.RedisLimiterTest.*;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;


final class RedisFailures {
  private RedisFailures() {}

  static long timed(Runnable r) {
    long t0 = System.nanoTime();
    r.run();
    return (System.nanoTime() - t0) / 1_000_000;
  }

  /** Redis hanging (SIGSTOP), then gone: the failure policy answers within the timeout, on the
   *  limiter's own RespClient and on an app's client whose own timeout is a minute (issue 31
   *  defect 2); the library is not re-sent through the outage (defect 3). */
  static void outages(Process redis, String url) throws Exception {
    List<Exception> errors = Collections.synchronizedList(new ArrayList<>());
    Counting own = new Counting(new RespClient(url, Duration.ofMillis(250)));
    RespClient slow = new RespClient(url, Duration.ofSeconds(60));
    Policy api = Policy.window("api", "fixed_window", 10, Duration.ofMinutes(1));
    try (RedisLimiter closed = RedisLimiter.builder(own).policy(api).onFailure(FailurePolicy.CLOSED).timeout(Duration.ofMillis(250))
             .onError(errors::add).build();
         RedisLimiter open = RedisLimiter.builder(url).policy(api).onFailure(FailurePolicy.OPEN).timeout(Duration.ofMillis(250)).build();
         RedisLimiter appClient = RedisLimiter.builder(slow).policy(api).onFailure(FailurePolicy.CLOSED).timeout(Duration.ofMillis(250)).build()) {
      // Up before the outage (retried: on a loaded machine a first call, the library's load
      // included, may exceed 250 ms); what follows counts from here.
      for (RedisLimiter l : List.of(closed, open, appClient)) {
        check(RateLimitFilterTest.eventually(() -> l.acquire("api", "o", 1).reason().equals("within_limit")), "before the outage");
      }
      long f0 = closed.failures();
      int e0 = errors.size(), l0 = own.loads.get();
      signal(redis, "STOP");
      for (int i = 0; i < 3; i++) {
        Decision[] d = new Decision[1];
        long ms = timed(() -> d[0] = closed.acquire("api", "o", 1));
        System.out.println("Redis stopped: closed answered " + d[0].reason() + " in " + ms + " ms (timeout 250 ms)");
        // A hang guard, not a claim on speed: far below anything but the 250 ms bound answering.
        check(!d[0].allowed() && d[0].reason().equals("failed_closed") && d[0].retryAfterUs() == 1_000_000 && ms < 10_000,
            "Redis stopped, closed: " + d[0] + " in " + ms + " ms");
      }
      check(closed.failures() - f0 == 3 && errors.size() - e0 == 3, "failures counted and told: " + (closed.failures() - f0) + ", " + (errors.size() - e0));
      check(own.loads.get() == l0, "the library was sent " + (own.loads.get() - l0) + " times through the outage, want 0");
      Decision[] o = new Decision[1];
      long ms = timed(() -> o[0] = open.acquire("api", "o", 1));
      check(o[0].allowed() && o[0].reason().equals("failed_open") && ms < 10_000, "Redis stopped, open: " + o[0] + " in " + ms + " ms");
      Decision[] a = new Decision[1];
      ms = timed(() -> a[0] = appClient.acquire("api", "o", 1));
      System.out.println("Redis stopped: an app's client with a 60 s timeout answered " + a[0].reason() + " in " + ms + " ms");
      check(a[0].reason().equals("failed_closed") && ms < 10_000, "the app's client's call hangs, the limiter answers: " + a[0] + " in " + ms + " ms");
      signal(redis, "CONT");
      check(RateLimitFilterTest.eventually(() -> closed.acquire("api", "o", 1).allowed()), "Redis back: admitted again");
      RateLimitFilterTest.stop(redis);
      Decision gone = closed.acquire("api", "o", 1);
      check(gone.reason().equals("failed_closed"), "Redis gone, closed: " + gone);
      check(open.acquire("api", "o", 1).reason().equals("failed_open"), "Redis gone, open");
    } finally {
      slow.close();
    }
  }

  static void run(Path dir, String... cmd) throws Exception {
    Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true)
        .redirectOutput(dir.resolve("openssl.log").toFile()).start();
    if (!p.waitFor(30, TimeUnit.SECONDS) || p.exitValue() != 0) throw new IllegalStateException(String.join(" ", cmd) + " failed");
  }

  /** rediss:// with a password and a database: a redis-server on TLS only (a private CA, a server
   *  certificate for 127.0.0.1) and requirepass; the Process, to stop. */
  static Process tls(Path dir) throws Exception {
    Path d = Files.createDirectories(dir.resolve("tls"));
    run(d, "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "ca.key",
        "-out", "ca.crt", "-days", "2", "-subj", "/CN=ratelimit java test CA");
    run(d, "openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "server.key",
        "-out", "server.csr", "-subj", "/CN=localhost");
    Files.writeString(d.resolve("server.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n");
    run(d, "openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
        "-out", "server.crt", "-days", "2", "-extfile", "server.ext");
    int port = RateLimitFilterTest.freePort();
    Process redis = RateLimitFilterTest.start(new ProcessBuilder("redis-server", "--bind", "127.0.0.1", "--port", "0",
        "--tls-port", "" + port, "--tls-cert-file", d.resolve("server.crt").toString(), "--tls-key-file", d.resolve("server.key").toString(),
        "--tls-ca-cert-file", d.resolve("ca.crt").toString(), "--tls-auth-clients", "no", "--requirepass", "s3cret",
        "--save", "", "--appendonly", "no", "--dir", d.toString()).redirectErrorStream(true).redirectOutput(d.resolve("redis.log").toFile()));
    RateLimitFilterTest.waitPort(port, redis, "redis-server (TLS)");

    java.security.KeyStore trust = java.security.KeyStore.getInstance("PKCS12");
    trust.load(null, null);
    try (var in = Files.newInputStream(d.resolve("ca.crt"))) {
      trust.setCertificateEntry("ca", java.security.cert.CertificateFactory.getInstance("X.509").generateCertificate(in));
    }
    var tmf = javax.net.ssl.TrustManagerFactory.getInstance(javax.net.ssl.TrustManagerFactory.getDefaultAlgorithm());
    tmf.init(trust);
    javax.net.ssl.SSLContext ctx = javax.net.ssl.SSLContext.getInstance("TLS");
    ctx.init(null, tmf.getTrustManagers(), null);

    String url = "rediss://:s3cret@127.0.0.1:" + port + "/2";
    Policy two = Policy.window("api", "sliding_window_log", 2, Duration.ofMinutes(1));
    try (RedisLimiter lim = RedisLimiter.builder(url).tls(ctx).timeout(Duration.ofSeconds(30)).onFailure(FailurePolicy.CLOSED)
        .policy(two).build()) {
      String got = "";
      for (int i = 0; i < 3; i++) got += lim.acquire("api", "tls", 1).reason() + " ";
      check(got.equals("within_limit within_limit over_limit ") && lim.failures() == 0, "rediss:// with a password: " + got);
      try (RespClient db2 = new RespClient(url, Duration.ofSeconds(30), ctx);
           RespClient db0 = new RespClient("rediss://:s3cret@127.0.0.1:" + port + "/0", Duration.ofSeconds(30), ctx)) {
        check(Long.valueOf(1).equals(db2.execute("EXISTS", "rl:{tls}:api")) && Long.valueOf(0).equals(db0.execute("EXISTS", "rl:{tls}:api")),
            "the state is in database 2");
      }
    }
    // Refused: a wrong password, and a CA the JVM does not trust: the failure policy, counted.
    List<RedisLimiter.Builder> refusing = List.of(RedisLimiter.builder("rediss://:wrong@127.0.0.1:" + port + "/2").tls(ctx),
        RedisLimiter.builder(url));
    List<String> why = List.of("WRONGPASS", "PKIX");
    for (int i = 0; i < 2; i++) {
      RedisLimiter.Builder b = refusing.get(i);
      List<Exception> errs = Collections.synchronizedList(new ArrayList<>());
      try (RedisLimiter lim = b.timeout(Duration.ofSeconds(30)).onFailure(FailurePolicy.CLOSED).onError(errs::add).policy(two).build()) {
        Decision refused = lim.acquire("api", "tls", 1);
        check(refused.reason().equals("failed_closed") && lim.failures() == 1 && errs.size() == 1
            && String.valueOf(errs.get(0)).contains(why.get(i)), "refused TLS or AUTH: " + refused + ", failures " + lim.failures() + ", errors " + errs);
      }
    }
    return redis;
  }
}
