// Headers.java — the one place this package turns decisions into an HTTP answer, exactly as
// ratelimitd renders them (src/http/render.cc, `headers: ietf`): 200 / 429 / 400 (cost over the
// capacity); RateLimit-Policy `"name";q=<quota>;w=<s>` and RateLimit `"name";r=<remaining>;t=<s>`
// per policy; on 429 Retry-After = max(1, ceil(retry_after s)) of the most restrictive decision
// and Cache-Control: no-store; the JSON body of the most restrictive decision (ms rounded up).
// Invariant: Retry-After equals the t of the denying item with the longest wait. Pure; thread-safe.
package dev.ratelimit.client;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

public final class Headers {
  private Headers() {}

  /** A rendered answer: status, headers in sending order, body. */
  public record Answer(int status, List<String[]> headers, String body) {}

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

  /** The answer for one or several policies' decisions (same order in both lists). */
  public static Answer render(List<Decision> ds, List<PolicyInfo> ps) {
    int k = mostRestrictive(ds);
    Decision d = ds.get(k);
    PolicyInfo p = ps.get(k);
    List<String> items = new ArrayList<>();
    for (PolicyInfo pi : ps) items.add(sfString(pi.name()) + ";q=" + pi.quota() + ";w=" + ceil(pi.windowUs(), 1_000_000));
    String policyField = String.join(", ", items);
    List<String[]> headers = new ArrayList<>();
    headers.add(new String[] {"RateLimit-Policy", policyField});
    if ("exceeds_capacity".equals(d.reason())) {
      headers.add(new String[] {"Cache-Control", "no-store"});
      String msg = "the request's cost exceeds the capacity (" + d.limit() + ") of policy '" + p.name() + "': it can never be admitted";
      return new Answer(400, headers, "{\"error\":\"cost_exceeds_capacity\",\"message\":" + Json.quote(msg)
          + ",\"policy\":" + Json.quote(p.name()) + ",\"limit\":" + d.limit() + "}");
    }
    items.clear();
    for (int i = 0; i < ps.size(); i++) {
      items.add(sfString(ps.get(i).name()) + ";r=" + ds.get(i).remaining() + ";t=" + resetSeconds(ds.get(i)));
    }
    headers.add(new String[] {"RateLimit", String.join(", ", items)});
    if (!d.allowed()) {
      headers.add(new String[] {"Retry-After", Long.toString(retryAfterSeconds(d))});
      headers.add(new String[] {"Cache-Control", "no-store"});
    }
    String body = "{\"allowed\":" + d.allowed() + ",\"policy\":" + Json.quote(p.name()) + ",\"limit\":" + d.limit()
        + ",\"remaining\":" + d.remaining() + ",\"reset_ms\":" + ceil(d.resetAfterUs(), 1000)
        + ",\"retry_after_ms\":" + (d.allowed() ? 0 : ceil(d.retryAfterUs(), 1000))
        + ",\"delay_ms\":" + ceil(d.delayUs(), 1000) + "}";
    return new Answer(d.allowed() ? 200 : 429, headers, body);
  }
}
