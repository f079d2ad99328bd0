// RedisError.java — an error reply from Redis ("ERR ...", "NOSCRIPT ..."): Redis answered, and
// refused. Its message is Redis' text, as RedisCommands requires.
package dev.ratelimit.client;

public final class RedisError extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public RedisError(String message) { super(message); }
}
