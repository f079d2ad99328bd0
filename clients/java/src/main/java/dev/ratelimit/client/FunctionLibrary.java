// FunctionLibrary.java — the Redis function library RedisLimiter speaks (docs/redis-functions.md
// "Versioning"): its text and version, where to find it, and making sure Redis has it.
// Where the text comes from, first found wins: the `library` option (the text, a file, or a
// directory holding one ratelimit_<version>.lua; or FunctionLibrary.version(v) for one already
// loaded), RATELIMIT_REDIS_LIBRARY, the copy bundled in the jar (dev/ratelimit/client/library/,
// put there by the Maven build from a ratelimit build: pom.xml's ratelimit.library.dir),
// /usr/share/ratelimit/redis and /usr/local/share/ratelimit/redis (a ratelimit install).
// On connect: FUNCTION LOAD (a new version loads beside the others; "already exists" is fine);
// if Redis refuses (an ACL, a replica) or there is no text, FUNCTION LIST must show this version;
// else RateLimitException("library_missing") names the versions Redis has and the fix. A
// connection error propagates: an outage, which the failure policy answers. Immutable.
package dev.ratelimit.client;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public final class FunctionLibrary {
  private static final Pattern HEADER = Pattern.compile("^#!lua name=ratelimit_([0-9a-f]{12})\n");
  private static final Pattern VERSION = Pattern.compile("^[0-9a-f]{12}$");
  private static final String[] INSTALLED = {"/usr/share/ratelimit/redis", "/usr/local/share/ratelimit/redis"};
  private final String version;
  private final String text;

  private FunctionLibrary(String version, String text) {
    this.version = version;
    this.text = text;
  }

  /** 12 hex digits: the library's name is ratelimit_<version>, its functions rl<version>_…. */
  public String version() { return version; }

  /** FUNCTION LOAD-able text, or null when only the version is known. */
  public String text() { return text; }

  /** A library already loaded in Redis, known by its version only (checked, never loaded). */
  public static FunctionLibrary version(String version) {
    if (version == null || !VERSION.matcher(version).matches()) {
      throw missing("a library version is 12 lower-case hex digits, got " + version);
    }
    return new FunctionLibrary(version, null);
  }

  /** The library's text ("#!lua name=ratelimit_…"). */
  public static FunctionLibrary ofText(String text) {
    Matcher m = HEADER.matcher(text);
    if (!m.find()) throw missing("not a ratelimit function library (its first line must be '#!lua name=ratelimit_<12 hex digits>')");
    return new FunctionLibrary(m.group(1), text);
  }

  /** A file, or a directory holding exactly one ratelimit_<version>.lua. */
  public static FunctionLibrary ofPath(Path p) {
    try {
      if (Files.isDirectory(p)) {
        List<Path> found = new ArrayList<>();
        try (DirectoryStream<Path> d = Files.newDirectoryStream(p, "ratelimit_*.lua")) {
          for (Path f : d) if (f.getFileName().toString().matches("ratelimit_[0-9a-f]{12}\\.lua")) found.add(f);
        }
        if (found.size() != 1) throw missing(p + " holds " + found.size() + " ratelimit_<version>.lua files, expected exactly one");
        p = found.get(0);
      }
      return ofText(Files.readString(p, StandardCharsets.UTF_8));
    } catch (IOException e) {
      throw missing("cannot read the function library at " + p + ": " + e.getMessage());
    }
  }

  /** `option`: the text, or a path; null: RATELIMIT_REDIS_LIBRARY, the jar's copy, the install. */
  public static FunctionLibrary find(String option) {
    if (option != null) return option.startsWith("#!lua") ? ofText(option) : ofPath(Path.of(option));
    String env = System.getenv("RATELIMIT_REDIS_LIBRARY");
    if (env != null && !env.isEmpty()) return ofPath(Path.of(env));
    FunctionLibrary bundled = bundled();
    if (bundled != null) return bundled;
    for (String d : INSTALLED) if (Files.isDirectory(Path.of(d))) return ofPath(Path.of(d));
    throw missing("no ratelimit function library: pass one (the file share/ratelimit/redis/ratelimit_<version>.lua of a "
        + "ratelimit build or install), set RATELIMIT_REDIS_LIBRARY, or use a jar built from a ratelimit build (it bundles one)");
  }

  /** The jar's copy: library/VERSION names library/ratelimit_<version>.lua. */
  static FunctionLibrary bundled() {
    try (InputStream v = FunctionLibrary.class.getResourceAsStream("library/VERSION")) {
      if (v == null) return null;
      String version = new String(v.readAllBytes(), StandardCharsets.US_ASCII).trim();
      try (InputStream t = FunctionLibrary.class.getResourceAsStream("library/ratelimit_" + version + ".lua")) {
        if (t == null) throw missing("the jar's library/VERSION says " + version + " but holds no ratelimit_" + version + ".lua");
        return ofText(new String(t.readAllBytes(), StandardCharsets.UTF_8));
      }
    } catch (IOException e) {
      throw missing("cannot read the jar's function library: " + e.getMessage());
    }
  }

  /** Loads this library (when it has the text) or checks that Redis has it. */
  void ensure(RedisCommands redis) throws Exception {
    String loadError = "";
    if (text != null) {
      try {
        redis.execute(bytes("FUNCTION"), bytes("LOAD"), bytes(text));
        return;
      } catch (RedisError e) {  // Redis refused it: the listing says whether that matters
        if (String.valueOf(e.getMessage()).contains("already exists")) return;
        loadError = " (FUNCTION LOAD failed: " + e.getMessage() + ")";
      }
    }
    List<String> names = listed(redis.execute(bytes("FUNCTION"), bytes("LIST"), bytes("LIBRARYNAME"), bytes("ratelimit_*")));
    if (!names.contains("ratelimit_" + version)) {
      throw missing("Redis does not have the ratelimit function library version " + version + " that this client speaks" + loadError
          + "; it has " + (names.isEmpty() ? "no ratelimit library" : String.join(", ", names))
          + ". Load this client's copy (redis-cli -x FUNCTION LOAD < ratelimit_" + version + ".lua), or give the client the text "
          + "so it loads it itself; other versions may stay loaded beside it.");
    }
  }

  /** The library names of a FUNCTION LIST reply (RESP2: [[library_name, name, …], …]). */
  private static List<String> listed(Object reply) {
    List<String> names = new ArrayList<>();
    if (!(reply instanceof List<?> libs)) return names;
    for (Object lib : libs) {
      if (!(lib instanceof List<?> fields)) continue;
      for (int i = 0; i + 1 < fields.size(); i += 2) {
        if ("library_name".equals(text(fields.get(i)))) names.add(text(fields.get(i + 1)));
      }
    }
    return names;
  }

  static String text(Object o) { return o instanceof byte[] b ? new String(b, StandardCharsets.UTF_8) : String.valueOf(o); }

  static byte[] bytes(String s) { return s.getBytes(StandardCharsets.UTF_8); }

  private static RateLimitException missing(String message) { return new RateLimitException("library_missing", message); }
}
