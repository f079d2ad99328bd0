// Json.java — the JSON objects ratelimitd answers ({"allowed":true,"limit":10,...}) and the
// package's policy_bounds.json read into maps, and JSON string literals written as ratelimitd
// writes them; the JDK has no JSON API and the client takes no dependency for a few objects.
// Values: String, Double (every number), Boolean, null, Map (objects), List (arrays); anything
// malformed is a RateLimitException("protocol"). Not streaming, not for large documents.
package dev.ratelimit.client;

import java.util.Map;

final class Json {
  private Json() {}

  @SuppressWarnings("unchecked")
  static Map<String, Object> parseObject(String s) {
    if (parse(s) instanceof Map<?, ?> m) return (Map<String, Object>) m;
    throw bad(s);
  }

  /** Any JSON value (the conformance vectors' nested files too). */
  static Object parse(String s) {
    int[] i = {0};
    Object v = value(s, i);
    if (skip(s, i[0]) != s.length()) throw bad(s);
    return v;
  }

  private static Object value(String s, int[] i) {
    char c = peek(s, i);
    if (c == '"') return string(s, i);
    if (c == '{') {
      Map<String, Object> out = new java.util.LinkedHashMap<>();
      i[0]++;
      if (peek(s, i) == '}') { i[0]++; return out; }
      while (true) {
        String key = string(s, i);
        expect(s, i, ':');
        out.put(key, value(s, i));
        char d = peek(s, i);
        i[0]++;
        if (d == '}') return out;
        if (d != ',') throw bad(s);
      }
    }
    if (c == '[') {
      java.util.List<Object> out = new java.util.ArrayList<>();
      i[0]++;
      if (peek(s, i) == ']') { i[0]++; return out; }
      while (true) {
        out.add(value(s, i));
        char d = peek(s, i);
        i[0]++;
        if (d == ']') return out;
        if (d != ',') throw bad(s);
      }
    }
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
    return new RateLimitException("protocol", "not the JSON expected: "
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
