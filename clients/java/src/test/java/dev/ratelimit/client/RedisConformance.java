// RedisConformance.java — RedisLimiterTest's conformance part: clients/conformance/README.md's
// runner contract on the Java Redis back-end against the real redis-server RedisLimiterTest
// starts — every case of tests/vectors/<algorithm>.json step by step with test time (every field
// equal), all cases at once on one limiter (items of different cases share calls), and race.json
// with real threads (exactly the expected admissions). Helpers only; RedisLimiterTest.main runs it.
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


final class RedisConformance {
  private RedisConformance() {}

  /** The case's policy, named `name`, through the public constructors (their validation and
   *  argument encoding are what is tested). */
  static Policy policyOf(String name, String algorithm, Map<String, Object> policy, Map<String, Object> c) {
    List<Policy.Option> o = new ArrayList<>();
    if (Boolean.TRUE.equals(c.get("count_denied"))) o.add(Policy.Option.COUNT_DENIED);
    if (Boolean.TRUE.equals(c.get("every_hit"))) o.add(Policy.Option.EVERY_HIT);
    if ("shape".equals(policy.get("mode"))) o.add(Policy.Option.SHAPE);
    Policy.Option[] opts = o.toArray(new Policy.Option[0]);
    if (policy.containsKey("rate")) {
      return Policy.bucket(name, algorithm, (Double) policy.get("rate"), num(policy, "burst", 0), opts);
    }
    return Policy.window(name, algorithm, num(policy, "limit", 0), Duration.of(num(policy, "window_us", 0), ChronoUnit.MICROS), opts);
  }

  /** One step: its decision through `lim` (op acquire, peek or report, test time), compared
   *  field for field; a reset step resets. */
  static void step(RedisLimiter lim, String policy, String where, Map<String, Object> st, long capacity, List<String> failures) {
    String key = st.containsKey("key") ? (String) st.get("key") : "k";
    String op = st.containsKey("op") ? (String) st.get("op") : "acquire";
    if (op.equals("reset")) {
      lim.reset(policy, key);
      return;
    }
    int code = switch (op) {
      case "peek" -> RedisLimiter.PEEK;
      case "report" -> RedisLimiter.REPORT;
      default -> RedisLimiter.ACQUIRE;
    };
    Decision d = lim.decideAt(policy, key, num(st, "cost", 1), code, num(st, "t_us", -1));
    Map<String, Object> e = obj(st.get("expect"));
    boolean same = d.allowed() == Boolean.TRUE.equals(e.get("allowed")) && d.reason().equals(e.get("reason"))
        && d.remaining() == num(e, "remaining", -1) && d.resetAfterUs() == num(e, "reset_after_us", -1)
        && d.retryAfterUs() == num(e, "retry_after_us", -1) && d.delayUs() == num(e, "delay_us", -1) && d.limit() == capacity;
    if (!same) failures.add(where + ": expected " + e + " limit " + capacity + ", got " + d);
  }

  static long capacity(Map<String, Object> policy) {
    return num(policy, policy.containsKey("burst") ? "burst" : "limit", -1);
  }

  /** Every case of every vector file through `runCase`; the number of cases run. */
  interface CaseRunner { void run(String algorithm, int index, Map<String, Object> c) throws Exception; }

  static int eachCase(List<Map<String, Object>> files, CaseRunner r) throws Exception {
    int n = 0;
    for (Map<String, Object> f : files) {
      List<Object> cases = list(f.get("cases"));
      for (int i = 0; i < cases.size(); i++, n++) r.run((String) f.get("algorithm"), i, obj(cases.get(i)));
    }
    return n;
  }

  /** Runs one case's steps on `lim` under `policy`; a step with its own policy (a reload that
   *  redefined it) runs on a limiter of that definition over the same keys. */
  static void runCase(String url, String prefix, RedisLimiter lim, String policy, String algorithm, int index,
                      Map<String, Object> c, List<String> failures) {
    List<Object> steps = list(c.get("steps"));
    for (int i = 0; i < steps.size(); i++) {
      Map<String, Object> st = obj(steps.get(i));
      String where = algorithm + "/" + c.get("name") + " step " + i;
      if (st.containsKey("policy")) {
        Map<String, Object> p = obj(st.get("policy"));
        try (RedisLimiter other = builder(url, prefix).policy(policyOf(policy, algorithm, p, c)).build()) {
          step(other, policy, where, st, capacity(p), failures);
          check(other.failures() == 0, where + ": failures " + other.failures());
        }
      } else {
        step(lim, policy, where, st, capacity(obj(c.get("policy"))), failures);
      }
    }
  }

  /** The fixed window's year-long race windows are epoch-aligned: start 60 s clear of a boundary. */
  static void roomForRace(Map<String, Object> policy) throws InterruptedException {
    if (!policy.containsKey("window_us")) return;
    long w = num(policy, "window_us", 0) / 1000, into = System.currentTimeMillis() % w;
    if (w - into < 60_000) Thread.sleep(w - into + 1000);
  }

  /** The runner contract (clients/conformance/README.md). */
  static void conformance(String url) throws Exception {
    Path vectors = env("RATELIMIT_VECTORS_DIR"), conf = env("RATELIMIT_CONFORMANCE_DIR");
    List<String> table = new ArrayList<>(), notPorted = new ArrayList<>();
    for (Object a : list(obj(Json.parse(Files.readString(conf.resolve("algorithms.json")))).get("algorithms"))) {
      (obj(a).get("kind").equals("rate") ? table : notPorted).add((String) obj(a).get("name"));
    }
    // Same order: an algorithm's index is its argument to the library.
    check(Policy.ALGORITHMS.equals(table), "the client's algorithms " + Policy.ALGORITHMS + " are the library's rate rows " + table);
    check(notPorted.equals(List.of("concurrency")), "algorithms this client does not port: " + notPorted);
    List<Map<String, Object>> files = new ArrayList<>();
    int fileCases = 0;
    for (String a : table) {
      files.add(obj(Json.parse(Files.readString(vectors.resolve(a + ".json")))));
      fileCases += list(files.get(files.size() - 1).get("cases")).size();
    }

    // Step by step: a limiter per case, steps in order.
    List<String> failures = new ArrayList<>();
    int ran = eachCase(files, (alg, i, c) -> {
      String prefix = "conf:" + RUN + ":java-seq:" + alg + ":" + i + ":";
      try (RedisLimiter lim = builder(url, prefix).policy(policyOf("p", alg, obj(c.get("policy")), c)).build()) {
        runCase(url, prefix, lim, "p", alg, i, c, failures);
        check(lim.failures() == 0, alg + "/" + i + ": failures " + lim.failures());
      }
    });
    check(ran == fileCases && ran >= 40, "cases run step by step: " + ran + " of " + fileCases);
    check(failures.isEmpty(), "vectors step by step:\n  " + String.join("\n  ", failures));

    // All at once: one limiter, a policy per case, every case on its own thread, so decisions
    // of different cases share calls (counted).
    String prefix = "conf:" + RUN + ":java-par:";
    RespClient resp = new RespClient(url, Duration.ofSeconds(30));
    Counting counting = new Counting(resp);
    RedisLimiter.Builder b = RedisLimiter.builder(counting).keyPrefix(prefix).onFailure(FailurePolicy.CLOSED).timeout(Duration.ofSeconds(30));
    eachCase(files, (alg, i, c) -> b.policy(policyOf("c_" + alg + "_" + i, alg, obj(c.get("policy")), c)));
    List<String> parFailures = Collections.synchronizedList(new ArrayList<>());
    AtomicInteger decisions = new AtomicInteger();
    try (RedisLimiter all = b.build()) {
      List<Callable<Void>> tasks = new ArrayList<>();
      eachCase(files, (alg, i, c) -> tasks.add(() -> {
        decisions.addAndGet(list(c.get("steps")).size());
        runCase(url, prefix, all, "c_" + alg + "_" + i, alg, i, c, parFailures);
        return null;
      }));
      AtomicInteger next = new AtomicInteger();
      inFlight(tasks.size(), tasks.size(), () -> tasks.get(next.getAndIncrement()).call());
      check(all.failures() == 0, "all at once: failures " + all.failures());
    }
    resp.close();
    check(parFailures.isEmpty(), "vectors all at once:\n  " + String.join("\n  ", parFailures));
    System.out.println("all cases at once: " + decisions.get() + " steps in " + counting.calls.get() + " FCALLs (of the shared limiter)");

    // The race: 200 acquires, 50 in flight, Redis' clock, the normal path (batching included).
    Map<String, Object> race = obj(Json.parse(Files.readString(conf.resolve("race.json"))));
    for (Object o : list(race.get("cases"))) {
      Map<String, Object> rc = obj(o);
      String alg = (String) rc.get("algorithm");
      try (RedisLimiter lim = RedisLimiter.builder(url).keyPrefix("conf:" + RUN + ":java-race:").timeout(Duration.ofSeconds(30))
          .policy(policyOf("p", alg, obj(rc.get("policy")), rc)).build()) {
        roomForRace(obj(rc.get("policy")));
        List<Decision> ds = inFlight((int) num(race, "requests", 0), (int) num(race, "concurrency", 0), () -> lim.acquire("p", alg, 1));
        long admitted = ds.stream().filter(Decision::allowed).count();
        check(admitted == num(rc, "expect_admitted", -1) && lim.failures() == 0
            && ds.stream().allMatch(d -> d.allowed() || d.reason().equals("over_limit")),
            "race " + alg + ": " + admitted + " admitted, failures " + lim.failures());
      }
    }
  }
}
