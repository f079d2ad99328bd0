// RateLimitException.java — input to fix, as ratelimitd names it: code unknown_policy,
// invalid_key, invalid_cost, invalid_request; or protocol (an unreadable answer). An
// IllegalArgumentException, the JDK's idiom for bad arguments.
package dev.ratelimit.client;

public final class RateLimitException extends IllegalArgumentException {
  private static final long serialVersionUID = 1L;
  private final String code;

  public RateLimitException(String code, String message) {
    super(message);
    this.code = code;
  }

  public String code() { return code; }
}
