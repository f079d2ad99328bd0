// Policy.java — a policy RedisLimiter decides by, validated as src/core/policy.cc validates it
// (the function library trusts its arguments: docs/redis-functions.md "Policy arguments"), with
// its six library arguments encoded once. The bounds are read from policy_bounds.json, the
// copy in this jar of what include/ratelimit/policy.h says (held equal to the other clients'
// copies by RedisLimiterTest; tests/redis/policy_bounds_test.cc holds those to policy.h).
// Window algorithms: limit L per window W. Buckets: burst b, rate per second; `windowUs` is then
// the time to drain a full bucket (units.h time_to_drain_us), RateLimit-Policy's w.
// Invariant: a Policy exists only valid. Immutable.
package dev.ratelimit.client;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

public final class Policy {
  /** The library's algorithms, index = its algorithm argument (clients/conformance/algorithms.json
   *  less concurrency, which is ratelimitd's lease API). */
  public static final List<String> ALGORITHMS =
      List.of("fixed_window", "sliding_window_log", "sliding_window_counter", "token_bucket", "leaky_bucket");

  /** COUNT_DENIED: denied attempts count too. EVERY_HIT: fixed_window only, every hit counts
   *  (envoyproxy/ratelimit's counter; limit 0 allowed, cost 0 allowed). SHAPE: leaky_bucket
   *  delays instead of refusing. */
  public enum Option { COUNT_DENIED, EVERY_HIT, SHAPE }

  static final Map<String, Object> BOUNDS = loadBounds();
  static final long MAX_LIMIT = bound("max_limit");
  static final long MAX_EVERY_HIT_LIMIT = bound("max_every_hit_limit");
  static final long MAX_COST = bound("max_cost");
  static final long MAX_SLIDING_LOG_LIMIT = bound("max_sliding_log_limit");
  static final long MAX_KEY_BYTES = bound("max_key_bytes");
  private static final long MIN_WINDOW_US = bound("min_window_us"), MAX_WINDOW_US = bound("max_window_us");
  private static final double MIN_RATE = (Double) BOUNDS.get("min_rate"), MAX_RATE = (Double) BOUNDS.get("max_rate");
  private static final double UNIT = (Double) BOUNDS.get("unit");
  private static final double EXACT = (Double) BOUNDS.get("exact_integer_limit");
  private static final Pattern NAME = Pattern.compile((String) BOUNDS.get("policy_name_pattern"));

  private final String name, algorithm;
  private final long limit, windowUs;
  private final boolean everyHit;
  final List<String> args;  // algorithm index, limit, window_us, rate, shape, counting

  private Policy(String name, String algorithm, long limit, long windowUs, boolean everyHit, List<String> args) {
    this.name = name;
    this.algorithm = algorithm;
    this.limit = limit;
    this.windowUs = windowUs;
    this.everyHit = everyHit;
    this.args = args;
  }

  public String name() { return name; }

  public String algorithm() { return algorithm; }

  /** The capacity: the limit, or a bucket's burst (RateLimit-Policy's q). */
  public long limit() { return limit; }

  /** The window, or the time to drain a full bucket, in µs (RateLimit-Policy's w). */
  public long windowUs() { return windowUs; }

  public boolean everyHit() { return everyHit; }

  @Override
  public String toString() { return "Policy[" + name + " " + algorithm + " " + String.join(",", args) + "]"; }

  /** A window policy (fixed_window, sliding_window_log, sliding_window_counter): `limit` per `window`. */
  public static Policy window(String name, String algorithm, long limit, Duration window, Option... options) {
    EnumSet<Option> o = options(options);
    int index = algorithmIndex(name, algorithm);
    if (index >= 3) throw invalid("policy '" + name + "': " + algorithm + " takes a rate and a burst (Policy.bucket)");
    if (o.contains(Option.SHAPE)) throw invalid("policy '" + name + "': SHAPE is for leaky_bucket");
    boolean everyHit = o.contains(Option.EVERY_HIT);
    if (everyHit && index != 0) throw invalid("policy '" + name + "': EVERY_HIT is for fixed_window");
    long lo = everyHit ? 0 : 1, hi = everyHit ? MAX_EVERY_HIT_LIMIT : MAX_LIMIT;
    if (limit < lo || limit > hi) throw invalid("limit must be an integer between " + lo + " and " + hi + ", got " + limit);
    long w;
    try {
      w = window.toNanos() / 1000;
    } catch (ArithmeticException e) {
      w = Long.MAX_VALUE;
    }
    if (w < MIN_WINDOW_US || w > MAX_WINDOW_US || window.toNanos() % 1000 != 0) {
      throw invalid("window must be whole µs between 1ms and 366d, got " + window);
    }
    if (index == 1 && limit > MAX_SLIDING_LOG_LIMIT) {
      throw invalid("policy '" + name + "': sliding_window_log keeps one entry per admitted request, so its limit is capped at "
          + MAX_SLIDING_LOG_LIMIT + " (got " + limit + "); use sliding_window_counter for larger limits");
    }
    if (index == 2 && (double) (limit + 1) * (double) w > EXACT) {
      throw invalid("policy '" + name + "': limit x window overflows exact arithmetic ((limit + 1) * window_us must be <= 2^53)");
    }
    String counting = everyHit ? "2" : o.contains(Option.COUNT_DENIED) ? "1" : "0";
    return new Policy(name, algorithm, limit, w, everyHit,
        List.of(Integer.toString(index), Long.toString(limit), Long.toString(w), "0", "0", counting));
  }

  private static final Pattern RATE = Pattern.compile("^([1-9][0-9]{0,15})/(?:(second|minute|hour|day)|([1-9][0-9]{0,8})(s|m|h|d))$");
  private static final Map<String, Long> RATE_UNIT_S =
      Map.of("second", 1L, "minute", 60L, "hour", 3600L, "day", 86400L, "s", 1L, "m", 60L, "h", 3600L, "d", 86400L);

  /** The shorthand of the Node and Python clients: "10/minute" (second, hour, day too) or
   *  "100/30s" (a count per a whole number of s, m, h or d) → a sliding_window_counter policy
   *  (the window algorithm whose memory does not grow with the limit and whose boundary burst is
   *  bounded, unlike a fixed window's). Strict: no spaces, plurals or "per"; anything else throws
   *  RateLimitException invalid_policy naming the accepted forms, so a typo fails at build. */
  public static Policy parseRate(String name, String rate) {
    java.util.regex.Matcher m = rate == null ? null : RATE.matcher(rate);
    if (m == null || !m.matches()) {
      throw invalid("policy '" + name + "': bad rate " + (rate == null ? "null" : Json.quote(rate))
          + ": expected \"<count>/<second|minute|hour|day>\" or \"<count>/<n><s|m|h|d>\", e.g. \"10/minute\" or \"100/30s\"");
    }
    long seconds = m.group(2) != null ? RATE_UNIT_S.get(m.group(2)) : Long.parseLong(m.group(3)) * RATE_UNIT_S.get(m.group(4));
    return window(name, "sliding_window_counter", Long.parseLong(m.group(1)), Duration.ofSeconds(seconds));
  }

  /** A bucket policy (token_bucket, leaky_bucket): `rate` units per second, at most `burst` at once. */
  public static Policy bucket(String name, String algorithm, double rate, long burst, Option... options) {
    EnumSet<Option> o = options(options);
    int index = algorithmIndex(name, algorithm);
    if (index < 3) throw invalid("policy '" + name + "': " + algorithm + " takes a limit and a window (Policy.window)");
    if (o.contains(Option.EVERY_HIT)) throw invalid("policy '" + name + "': EVERY_HIT is for fixed_window");
    if (o.contains(Option.SHAPE) && index != 4) throw invalid("policy '" + name + "': SHAPE is for leaky_bucket");
    if (burst < 1 || burst > MAX_LIMIT) throw invalid("burst must be an integer between 1 and " + MAX_LIMIT + ", got " + burst);
    if (!Double.isFinite(rate) || rate < MIN_RATE || rate > MAX_RATE) {
      throw invalid("policy '" + name + "': rate must be a finite number of units per second between 1e-06 and 1e9, got " + rate);
    }
    if (2.0 * burst * UNIT / rate > EXACT) throw invalid("policy '" + name + "': burst / rate is too long (over 140 years to refill)");
    long w = timeToDrainUs(burst * (long) UNIT, rate);
    // Double.toString parses back to the same double (the library's tonumber reads 1.0E-6 too).
    return new Policy(name, algorithm, burst, w, false, List.of(Integer.toString(index), Long.toString(burst), Long.toString(w),
        Double.toString(rate), o.contains(Option.SHAPE) ? "1" : "0", o.contains(Option.COUNT_DENIED) ? "1" : "0"));
  }

  /** units.h time_to_drain_us: the least t with floor(t · rate) ≥ need, in IEEE doubles. */
  static long timeToDrainUs(long need, double rate) {
    if (need <= 0) return 0;
    double q = (double) need / rate;
    long t = (long) q;
    if ((double) t < q) t++;
    while (t > 0 && (long) ((double) (t - 1) * rate) >= need) t--;
    while ((long) ((double) t * rate) < need) t++;
    return t;
  }

  /** A key of 1 … 512 bytes (UTF-8) and a cost of 1 … 10⁹ (0 too when every hit counts). */
  void validateRequest(String key, long cost) {
    validateKey(key);
    long lo = everyHit ? 0 : 1;
    if (cost < lo || cost > MAX_COST) {
      throw new RateLimitException("invalid_cost", "cost must be an integer between " + lo + " and " + MAX_COST + ", got " + cost);
    }
  }

  /** A report's cost: −10⁹ (a refund) … 10⁹, 0 included (ratelimitd's validate_report_cost). */
  void validateReport(String key, long cost) {
    validateKey(key);
    if (cost < -MAX_COST || cost > MAX_COST) {
      throw new RateLimitException("invalid_cost", "cost of a report must be an integer between " + -MAX_COST + " and " + MAX_COST + ", got " + cost);
    }
  }

  static void validateKey(String key) {
    if (key == null || key.isEmpty()) throw new RateLimitException("invalid_key", "key must not be empty");
    // At most 3 UTF-8 bytes per char (a surrogate pair: 4 for 2), so short keys need no encoding.
    long n = key.length() * 3L <= MAX_KEY_BYTES ? key.length() : key.getBytes(StandardCharsets.UTF_8).length;
    if (n > MAX_KEY_BYTES) throw new RateLimitException("invalid_key", "key is " + n + " bytes; the maximum is " + MAX_KEY_BYTES);
  }

  private static int algorithmIndex(String name, String algorithm) {
    if (name == null || !NAME.matcher(name).matches()) {
      throw invalid("policy name must be 1-64 characters of [A-Za-z0-9_.:-], got " + name);
    }
    int index = ALGORITHMS.indexOf(algorithm);
    if (index < 0) throw invalid("policy '" + name + "': unknown algorithm " + algorithm + " (expected " + String.join(", ", ALGORITHMS) + ")");
    return index;
  }

  private static EnumSet<Option> options(Option[] options) {
    EnumSet<Option> o = EnumSet.noneOf(Option.class);
    for (Option x : options) o.add(x);
    return o;
  }

  private static RateLimitException invalid(String message) { return new RateLimitException("invalid_policy", message); }

  private static long bound(String k) { return ((Double) BOUNDS.get(k)).longValue(); }

  private static Map<String, Object> loadBounds() {
    try (InputStream in = Policy.class.getResourceAsStream("policy_bounds.json")) {
      if (in == null) throw new IllegalStateException("policy_bounds.json is missing from the jar");
      return Json.parseObject(new String(in.readAllBytes(), StandardCharsets.UTF_8));
    } catch (IOException e) {
      throw new IllegalStateException("policy_bounds.json: " + e, e);
    }
  }
}
