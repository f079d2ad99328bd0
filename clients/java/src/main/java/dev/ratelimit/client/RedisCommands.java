// RedisCommands.java — the little of a Redis client that RedisLimiter uses: one command, its
// reply. RespClient implements it on plain sockets (this package's own RESP2 client); an app's
// Jedis or Lettuce plugs in through a few lines (README "Your own Redis client"), so the
// limiter shares that client's pool, TLS and auth.
// Replies as plain Java values: Long (integers), byte[] or String (bulk and simple strings),
// List<Object> (arrays), null. An error reply must be thrown as RedisError with Redis' text
// ("ERR Function not found ...": the limiter reloads the library on it; "... already exists"
// on FUNCTION LOAD is success): an adapter catches its client's error-reply exception and
// rethrows it so. Any other exception is an outage to the limiter: its failure policy answers.
// Thread-safety: an implementation must accept calls from several threads at once (RedisLimiter
// sends up to maxInFlight calls concurrently); each call should give up within the limiter's
// timeout (the limiter answers by its failure policy at that bound either way).
package dev.ratelimit.client;

public interface RedisCommands {
  /** Runs one command: args[0] is its name ("FCALL"), the rest its arguments, as bytes. */
  Object execute(byte[]... args) throws Exception;
}
