// Json.java — the flat JSON objects ratelimitd answers ({"allowed":true,"limit":10,...}) read into
// a map, and JSON string literals written as ratelimitd writes them; the JDK has no JSON API and
// the client takes no dependency for two objects. Not a general parser: values are strings,
// numbers, booleans or null; anything else is a RateLimitException("protocol").
package dev.ratelimit.client;

import java.util.HashMap;
import java.util.Map;

final class Json {
  private Json() {}

  static Map<String, Object> parseObject(String s) {
    Map<String, Object> out = new HashMap<>();
    int[] i = {skip(s, 0)};
    expect(s, i, '{');
    if (peek(s, i) == '}') { i[0]++; return out; }
    while (true) {
      String key = string(s, i);
      expect(s, i, ':');
      out.put(key, value(s, i));
      char c = peek(s, i);
      i[0]++;
      if (c == '}') return out;
      if (c != ',') throw bad(s);
    }
  }

  private static Object value(String s, int[] i) {
    char c = peek(s, i);
    if (c == '"') return string(s, i);
    int start = i[0];
    while (i[0] < s.length() && ",}] \n\t\r".indexOf(s.charAt(i[0])) < 0) i[0]++;
    String tok = s.substring(start, i[0]);
    switch (tok) {
      case "true": return Boolean.TRUE;
      case "false": return Boolean.FALSE;
      case "null": return null;
      default:
        try { return Double.parseDouble(tok); } catch (NumberFormatException e) { throw bad(s); }
    }
  }

  private static String string(String s, int[] i) {
    expect(s, i, '"');
    StringBuilder b = new StringBuilder();
    while (i[0] < s.length()) {
      char c = s.charAt(i[0]++);
      if (c == '"') return b.toString();
      if (c != '\\') { b.append(c); continue; }
      char e = s.charAt(i[0]++);
      switch (e) {
        case 'n': b.append('\n'); break;
        case 't': b.append('\t'); break;
        case 'r': b.append('\r'); break;
        case 'b': b.append('\b'); break;
        case 'f': b.append('\f'); break;
        case 'u': b.append((char) Integer.parseInt(s.substring(i[0], i[0] + 4), 16)); i[0] += 4; break;
        default: b.append(e);
      }
    }
    throw bad(s);
  }

  private static char peek(String s, int[] i) {
    i[0] = skip(s, i[0]);
    if (i[0] >= s.length()) throw bad(s);
    return s.charAt(i[0]);
  }

  private static void expect(String s, int[] i, char c) {
    if (peek(s, i) != c) throw bad(s);
    i[0]++;
  }

  private static int skip(String s, int i) {
    while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
    return i;
  }

  private static RateLimitException bad(String s) {
    return new RateLimitException("protocol", "ratelimitd answered something that is not a JSON object: "
        + s.substring(0, Math.min(200, s.length())));
  }

  /** A JSON string literal as ratelimitd writes it (append_json_string: control bytes as \\u00xx). */
  static String quote(String s) {
    StringBuilder b = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') b.append('\\').append(c);
      else if (c < 0x20 || c == 0x7f) b.append(String.format("\\u%04x", (int) c));
      else b.append(c);
    }
    return b.append('"').toString();
  }
}
