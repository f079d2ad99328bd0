// ClientIp.java — the filter's default key: the client's address, believing X-Forwarded-For only
// as far as trusted proxies appended it — the walk of ratelimitd's forward-auth
// (src/server/api/client_ip.cc) and of the Node and Python clients (client_ip.ts,
// client_ip.py), so one request is one key on every side.
// Why: a key taken from a header the client writes lets a client choose its own key (a new
// X-Forwarded-For each time, never limited). Only the part of the chain our proxies appended is
// believed: the walk goes from the right (the hop nearest to us) and stops at the first address
// that is not a trusted proxy.
// Invariants (as ratelimitd's): the connecting peer is the first hop — if it is not trusted the
// header is ignored (no trusted proxies, the default, trusts nobody); an element that is empty or
// not an address ends the walk at the last believed hop, so bad input can only make the key
// coarser, never one the client chose; IPv4-mapped IPv6 (::ffff:a.b.c.d) is IPv4. Addresses are
// parsed as inet_pton parses them (strict dotted quads, no host names: nothing is looked up) and
// written as inet_ntop writes them (IPv6 lower case, the longest run of zero groups as "::"), so
// "0:0:0:0:0:0:0:1" from a container is the key "::1", as ratelimitd's.
// Thread-safety: pure functions; a TrustedProxies is immutable.
package dev.ratelimit.client;

import java.util.ArrayList;
import java.util.List;
import java.util.regex.Pattern;

public final class ClientIp {
  private ClientIp() {}

  private static final Pattern PORT = Pattern.compile("^:[0-9]{1,5}$");
  private static final Pattern V4_PORT = Pattern.compile("^[0-9.]+:[0-9]{1,5}$");
  private static final Pattern HEX_GROUP = Pattern.compile("^[0-9a-fA-F]{1,4}$");
  private static final Pattern V4 = Pattern.compile("^(0|[1-9][0-9]{0,2})(\\.(0|[1-9][0-9]{0,2})){3}$");

  /** "192.0.2.1", "2001:db8::1", "[2001:db8::1]", with an optional port ("192.0.2.1:4711",
   *  "[2001:db8::1]:4711"), IPv4-mapped IPv6 as IPv4, written as inet_ntop writes it; null when it
   *  is none of these. */
  public static String parseAddress(String text) {
    byte[] a = bytes(text);
    return a == null ? null : format(a);
  }

  /** 4 or 16 bytes (a mapped IPv6 address as its 4), or null. */
  static byte[] bytes(String text) {
    if (text == null) return null;
    String t = text.strip();
    if (t.startsWith("[")) {
      int close = t.indexOf(']');
      if (close < 0) return null;
      String after = t.substring(close + 1);
      if (!after.isEmpty() && !PORT.matcher(after).matches()) return null;
      byte[] a = plain(t.substring(1, close));
      return a == null || a.length != 16 ? null : a;
    }
    if (V4_PORT.matcher(t).matches()) t = t.substring(0, t.indexOf(':'));
    return plain(t);
  }

  private static byte[] plain(String t) {
    byte[] v4 = ipv4(t);
    if (v4 != null) return v4;
    byte[] v6 = ipv6(t);
    if (v6 == null) return null;
    for (int i = 0; i < 12; i++) {
      if (v6[i] != (i < 10 ? 0 : (byte) 0xff)) return v6;
    }
    return java.util.Arrays.copyOfRange(v6, 12, 16);
  }

  private static byte[] ipv4(String t) {
    if (!V4.matcher(t).matches()) return null;
    String[] parts = t.split("\\.");
    byte[] out = new byte[4];
    for (int i = 0; i < 4; i++) {
      int v = Integer.parseInt(parts[i]);
      if (v > 255) return null;
      out[i] = (byte) v;
    }
    return out;
  }

  /** inet_pton(AF_INET6): groups of 1-4 hex digits, one "::" at most, a dotted quad at the end. */
  private static byte[] ipv6(String t) {
    if (t.isEmpty() || t.length() > 45) return null;
    int gap = t.indexOf("::");
    if (gap >= 0 && t.indexOf("::", gap + 1) >= 0) return null;
    List<Integer> head = gap < 0 ? groups(t, true) : groups(t.substring(0, gap), false);
    List<Integer> tail = gap < 0 ? new ArrayList<>() : groups(t.substring(gap + 2), true);
    if (head == null || tail == null) return null;
    int n = head.size() + tail.size();
    if (gap < 0 ? n != 8 : n > 7) return null;
    byte[] out = new byte[16];
    for (int i = 0; i < head.size(); i++) put(out, i, head.get(i));
    for (int i = 0; i < tail.size(); i++) put(out, 8 - tail.size() + i, tail.get(i));
    return out;
  }

  private static void put(byte[] out, int group, int v) {
    out[2 * group] = (byte) (v >> 8);
    out[2 * group + 1] = (byte) v;
  }

  /** The 16-bit groups of "a:b:c" (a last part "1.2.3.4" is two when `last`: the address's
   *  end); empty for ""; null if bad. */
  private static List<Integer> groups(String s, boolean last) {
    List<Integer> out = new ArrayList<>();
    if (s.isEmpty()) return out;
    String[] parts = s.split(":", -1);
    for (int i = 0; i < parts.length; i++) {
      String p = parts[i];
      if (last && i == parts.length - 1 && p.indexOf('.') >= 0) {
        byte[] v4 = ipv4(p);
        if (v4 == null) return null;
        out.add((v4[0] & 0xff) << 8 | (v4[1] & 0xff));
        out.add((v4[2] & 0xff) << 8 | (v4[3] & 0xff));
      } else {
        if (!HEX_GROUP.matcher(p).matches()) return null;
        out.add(Integer.parseInt(p, 16));
      }
    }
    return out;
  }

  /** inet_ntop: dotted quad; IPv6 lower-case hex, the first longest run of 2+ zero groups as
   *  "::", and (glibc) ::a.b.c.d for the IPv4-compatible forms. */
  static String format(byte[] a) {
    if (a.length == 4) return (a[0] & 0xff) + "." + (a[1] & 0xff) + "." + (a[2] & 0xff) + "." + (a[3] & 0xff);
    int[] w = new int[8];
    for (int i = 0; i < 8; i++) w[i] = (a[2 * i] & 0xff) << 8 | (a[2 * i + 1] & 0xff);
    int best = -1, bestLen = 0;
    for (int i = 0; i < 8;) {
      if (w[i] != 0) { i++; continue; }
      int j = i;
      while (j < 8 && w[j] == 0) j++;
      if (j - i > bestLen) { best = i; bestLen = j - i; }
      i = j;
    }
    if (bestLen < 2) best = -1;
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < 8; i++) {
      if (i == best) {
        b.append(i == 0 ? "::" : ":");
        i += bestLen - 1;
        continue;
      }
      if (i == 6 && best == 0 && (bestLen == 6 || (bestLen == 5 && w[5] == 0xffff))) {
        return b.append(a[12] & 0xff).append('.').append(a[13] & 0xff).append('.').append(a[14] & 0xff).append('.').append(a[15] & 0xff).toString();
      }
      b.append(Integer.toHexString(w[i]));
      if (i < 7) b.append(':');
    }
    return b.toString();
  }

  /** Trusted proxies: IP addresses and CIDR blocks ("10.0.0.0/8", "192.0.2.7", "::1", "fd00::/8");
   *  host bits of a block are ignored, as ratelimitd's. Immutable. */
  public static final class TrustedProxies {
    private final List<byte[]> bases = new ArrayList<>();
    private final List<Integer> prefixes = new ArrayList<>();

    /** Throws RateLimitException invalid_request naming a bad entry. */
    public TrustedProxies(List<String> cidrs) {
      for (String entry : cidrs) {
        String e = entry == null ? "" : entry.strip();
        int slash = e.indexOf('/');
        String addr = slash < 0 ? e : e.substring(0, slash);
        byte[] base = addr.startsWith("[") ? null : plain(addr);
        int max = base == null ? 0 : base.length * 8;
        int prefix = max;
        if (base != null && slash >= 0) {
          String len = e.substring(slash + 1);
          prefix = len.matches("[0-9]{1,3}") ? Integer.parseInt(len) : -1;
          if (addr.contains(":") && base.length == 4) prefix = -1;  // ::ffff:a.b.c.d/n: which family's n?
        }
        if (base == null || prefix < 0 || prefix > max) {
          throw new RateLimitException("invalid_request", "trusted proxies: '" + entry
              + "' is not an IP address or CIDR block (e.g. 10.0.0.0/8, 192.0.2.7, ::1, fd00::/8)");
        }
        bases.add(base);
        prefixes.add(prefix);
      }
    }

    public boolean isEmpty() { return bases.isEmpty(); }

    boolean contains(byte[] a) {
      for (int i = 0; i < bases.size(); i++) {
        byte[] b = bases.get(i);
        if (b.length != a.length) continue;
        int p = prefixes.get(i), bit = 0;
        while (bit + 8 <= p && a[bit / 8] == b[bit / 8]) bit += 8;
        if (bit + 8 <= p) continue;
        if (bit < p) {
          int mask = (0xff << (8 - (p - bit))) & 0xff;
          if (((a[bit / 8] ^ b[bit / 8]) & mask) != 0) continue;
        }
        return true;
      }
      return false;
    }
  }

  /** The client address of a request from `peer` carrying X-Forwarded-For `header` (occurrences
   *  joined by ", "; null when absent). The peer itself when the header is not believed. */
  public static String clientAddress(String peer, String header, TrustedProxies trusted) {
    byte[] first = bytes(peer);
    if (first == null) return peer;
    if (header == null || trusted.isEmpty() || !trusted.contains(first)) return format(first);
    String out = format(first);
    String[] elements = header.split(",", -1);
    for (int i = elements.length - 1; i >= 0; i--) {
      byte[] a = bytes(elements[i]);
      if (a == null) return out;
      out = format(a);
      if (!trusted.contains(a)) return out;
    }
    return out;
  }
}
