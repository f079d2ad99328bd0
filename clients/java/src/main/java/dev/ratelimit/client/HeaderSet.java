// HeaderSet.java — which rate-limit fields an answer carries, as ratelimitd's `headers:` setting
// (src/http/render.cc): IETF (the default) RateLimit-Policy + RateLimit per policy; DRAFT6
// RateLimit-Limit / -Remaining / -Reset of the most restrictive decision; X_RATELIMIT the same
// values as X-RateLimit-*; NONE no rate-limit fields (a 429 keeps Retry-After and Cache-Control).
// Why an enum: the filter's init-param and the code API take the same four names, and a typo
// must fail when the filter is made, not answer every request without headers.
package dev.ratelimit.client;

import java.util.Arrays;
import java.util.stream.Collectors;

public enum HeaderSet {
  IETF("ietf", null), DRAFT6("draft6", "RateLimit-"), X_RATELIMIT("x-ratelimit", "X-RateLimit-"), NONE("none", null);

  private final String text;
  private final String triplePrefix;  // the draft-06 triple's names' prefix, null without a triple

  HeaderSet(String text, String triplePrefix) {
    this.text = text;
    this.triplePrefix = triplePrefix;
  }

  /** ratelimitd's spelling: ietf, draft6, x-ratelimit, none. */
  @Override
  public String toString() { return text; }

  /** The -Limit, -Remaining and -Reset field names, or null (IETF, NONE). */
  String[] triple() {
    return triplePrefix == null ? null : new String[] {triplePrefix + "Limit", triplePrefix + "Remaining", triplePrefix + "Reset"};
  }

  /** ratelimitd's name of a set; RateLimitException invalid_request naming the four otherwise. */
  public static HeaderSet parse(String text) {
    for (HeaderSet s : values()) {
      if (s.text.equals(text)) return s;
    }
    throw new RateLimitException("invalid_request", "headers must be one of "
        + Arrays.stream(values()).map(HeaderSet::toString).collect(Collectors.joining(", ")) + ", got '" + text + "'");
  }
}
