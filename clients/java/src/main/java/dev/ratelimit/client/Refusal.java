// Refusal.java — what the filter answers a request the limiter denied (a 429), when the app wants
// other than ratelimitd's answer (express-rate-limit's statusCode / message / handler, issue 31):
// a status 400-599 (e.g. 503), a text/plain message instead of ratelimitd's JSON, or a handler
// that writes the answer itself. The rate-limit headers and Retry-After are set in every case;
// a 400 (cost over the capacity, a bad key) is never a refusal and stays ratelimitd's.
// Public for its Handler only: the filters' refusal(...) and onRefusal(...) make it.
// Invariant: a Refusal exists only valid (status checked when the filter is configured).
// Immutable; thread-safe.
package dev.ratelimit.client;

import java.io.IOException;
import java.util.ArrayList;

public final class Refusal<Q, S> {
  /** Writes a refusal itself (a page, a redirect): the headers and the status are already set. */
  @FunctionalInterface
  public interface Handler<Q, S> {
    void handle(Q request, S response, RateLimitInfo info) throws IOException;
  }

  final int status;
  final String message;
  final Handler<Q, S> handler;

  Refusal(int status, String message, Handler<Q, S> handler) {
    if (status < 400 || status > 599) {
      throw new RateLimitException("invalid_request", "the refusal's status code must be 400-599, got " + status);
    }
    this.status = status;
    this.message = message;
    this.handler = handler;
  }

  /** `a`, ratelimitd's answer, as this refusal sends it when it is a denial (429). */
  Headers.Answer apply(Headers.Answer a) {
    if (a.status() != 429) return a;
    if (message == null) return new Headers.Answer(status, a.headers(), a.body(), a.contentType());
    return new Headers.Answer(status, new ArrayList<>(a.headers()), message, "text/plain; charset=utf-8");
  }
}
