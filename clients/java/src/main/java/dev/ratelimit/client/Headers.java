// Headers.java — the one place this package turns decisions into an HTTP answer, exactly as
// ratelimitd renders them (src/http/render.cc, `headers: ietf`): 200 / 429 / 400 (cost over the
// capacity); RateLimit-Policy `"name";q=<quota>;w=<s>` and RateLimit `"name";r=<remaining>;t=<s>`
// per policy; on 429 Retry-After = max(1, ceil(retry_after s)) of the most restrictive decision
// and Cache-Control: no-store; the JSON body of the most restrictive decision (ms rounded up).
// Header sets (ratelimitd's `headers:`, HeaderSet): IETF as above; DRAFT6 / X_RATELIMIT the
// -Limit, -Remaining, -Reset triple of the most restrictive decision; NONE no rate-limit fields.
// problemJson (ratelimitd's `problem_json: true`): a 429's body is an RFC 9457 problem
// (application/problem+json) with ratelimitd's type, title and violated-policies, then the
// decision's members; no "status" member (render.cc says why).
// Invariant: Retry-After equals the t of the denying item with the longest wait (and -Reset).
// Pure; thread-safe.
package dev.ratelimit.client;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

public final class Headers {
  private Headers() {}

  static final String QUOTA_EXCEEDED = "https://iana.org/assignments/http-problem-types#quota-exceeded";
  static final String REDUCED_CAPACITY = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity";

  /** A rendered answer: status, headers in sending order, body and its Content-Type. */
  public record Answer(int status, List<String[]> headers, String body, String contentType) {
    /** A JSON answer (every answer but a problem and a custom refusal's text). */
    public Answer(int status, List<String[]> headers, String body) { this(status, headers, body, "application/json"); }
  }

  static long ceil(long us, long unit) { return us <= 0 ? 0 : (us - 1) / unit + 1; }

  static long retryAfterSeconds(Decision d) { return Math.max(1, ceil(d.retryAfterUs(), 1_000_000)); }

  static long resetSeconds(Decision d) {
    return d.allowed() ? ceil(d.resetAfterUs(), 1_000_000) : retryAfterSeconds(d);
  }

  /** An sf-string: '"' and '\' escaped, bytes outside printable ASCII as '?'. */
  public static String sfString(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (byte x : s.getBytes(StandardCharsets.UTF_8)) {
      int c = x & 0xff;
      if (c == '"' || c == '\\') b.append('\\').append((char) c);
      else if (c >= 0x20 && c <= 0x7e) b.append((char) c);
      else b.append('?');
    }
    return b.append('"').toString();
  }

  // algo::most_restrictive: highest (denied, exceeds capacity, retry_after, -remaining), first of equals.
  static int mostRestrictive(List<Decision> ds) {
    int best = 0;
    for (int i = 1; i < ds.size(); i++) {
      long[] a = rank(ds.get(i)), b = rank(ds.get(best));
      for (int j = 0; j < 4; j++) {
        if (a[j] != b[j]) {
          if (a[j] > b[j]) best = i;
          break;
        }
      }
    }
    return best;
  }

  private static long[] rank(Decision d) {
    return new long[] {d.allowed() ? 0 : 1, "exceeds_capacity".equals(d.reason()) ? 1 : 0, d.retryAfterUs(), -d.remaining()};
  }

  /** The answer for one or several policies' decisions (same order in both lists), as ratelimitd
   *  renders it by default (`headers: ietf`, no problem+json). */
  public static Answer render(List<Decision> ds, List<PolicyInfo> ps) { return render(ds, ps, HeaderSet.IETF, false); }

  /** The same with ratelimitd's `headers: <set>` and `problem_json: <problemJson>`. */
  public static Answer render(List<Decision> ds, List<PolicyInfo> ps, HeaderSet set, boolean problemJson) {
    int k = mostRestrictive(ds);
    Decision d = ds.get(k);
    PolicyInfo p = ps.get(k);
    String[] triple = set.triple();
    List<String> items = new ArrayList<>();
    for (PolicyInfo pi : ps) items.add(sfString(pi.name()) + ";q=" + pi.quota() + ";w=" + ceil(pi.windowUs(), 1_000_000));
    String policyField = String.join(", ", items);
    List<String[]> headers = new ArrayList<>();
    if (set == HeaderSet.IETF) headers.add(new String[] {"RateLimit-Policy", policyField});
    if ("exceeds_capacity".equals(d.reason())) {
      // The capacity is what the client must learn: the quota fields only.
      if (triple != null) headers.add(new String[] {triple[0], Long.toString(d.limit())});
      headers.add(new String[] {"Cache-Control", "no-store"});
      String msg = "the request's cost exceeds the capacity (" + d.limit() + ") of policy '" + p.name() + "': it can never be admitted";
      return new Answer(400, headers, "{\"error\":\"cost_exceeds_capacity\",\"message\":" + Json.quote(msg)
          + ",\"policy\":" + Json.quote(p.name()) + ",\"limit\":" + d.limit() + "}");
    }
    if (set == HeaderSet.IETF) {
      items.clear();
      for (int i = 0; i < ps.size(); i++) {
        items.add(sfString(ps.get(i).name()) + ";r=" + ds.get(i).remaining() + ";t=" + resetSeconds(ds.get(i)));
      }
      headers.add(new String[] {"RateLimit", String.join(", ", items)});
    } else if (triple != null) {
      headers.add(new String[] {triple[0], Long.toString(d.limit())});
      headers.add(new String[] {triple[1], Long.toString(d.remaining())});
      headers.add(new String[] {triple[2], Long.toString(resetSeconds(d))});
    }
    if (!d.allowed()) {
      headers.add(new String[] {"Retry-After", Long.toString(retryAfterSeconds(d))});
      headers.add(new String[] {"Cache-Control", "no-store"});
    }
    String members = "\"allowed\":" + d.allowed() + ",\"policy\":" + Json.quote(p.name()) + ",\"limit\":" + d.limit()
        + ",\"remaining\":" + d.remaining() + ",\"reset_ms\":" + ceil(d.resetAfterUs(), 1000)
        + ",\"retry_after_ms\":" + (d.allowed() ? 0 : ceil(d.retryAfterUs(), 1000))
        + ",\"delay_ms\":" + ceil(d.delayUs(), 1000) + "}";
    if (!d.allowed() && problemJson) {
      boolean store = "failed_closed".equals(d.reason());
      List<String> violated = new ArrayList<>();
      for (int i = 0; i < ps.size(); i++) {
        if (!ds.get(i).allowed()) violated.add(Json.quote(ps.get(i).name()));
      }
      String problem = "{\"type\":" + Json.quote(store ? REDUCED_CAPACITY : QUOTA_EXCEEDED) + ",\"title\":"
          + Json.quote(store ? "Request cannot be satisfied due to temporary server capacity constraints"
                             : "Request cannot be satisfied as assigned quota has been exceeded")
          + ",\"violated-policies\":[" + String.join(",", violated) + "],";
      return new Answer(429, headers, problem + members, "application/problem+json");
    }
    return new Answer(d.allowed() ? 200 : 429, headers, "{" + members);
  }
}
