// client_ip.ts — the default key of the middleware: the client's address, believing
// X-Forwarded-For only as far as it was appended by trusted proxies — the same walk as
// ratelimitd's forward-auth (src/server/api/client_ip.cc), so the same request is the same key
// on either side.
// Why: a key taken from a header the client can write lets any client pick its own key (a new
// X-Forwarded-For each time, never limited). Only the part of the chain our proxies appended is
// believed, so the walk goes from the right (the hop nearest to us) and stops at the first
// address that is not a trusted proxy.
// Invariants (as ratelimitd's):
//   - the connecting peer is the first hop: if it is not trusted, the header is ignored and the
//     key is the peer (no trusted proxies, the default, trusts nobody);
//   - an element that is empty or not an address ends the walk at the last believed hop, so bad
//     input can only make the key coarser, never one the client chose;
//   - IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are matched and returned as IPv4.

import * as net from 'net';
import { RateLimitError } from './errors';

/** "192.0.2.1", "2001:db8::1", "[2001:db8::1]", with an optional port ("192.0.2.1:4711",
 *  "[2001:db8::1]:4711"), IPv4-mapped IPv6 as IPv4; null when it is none of these. */
export function parseAddress(text: string): string | null {
  let t = text.trim();
  if (t.startsWith('[')) {
    const close = t.indexOf(']');
    if (close < 0) return null;
    const after = t.slice(close + 1);
    if (after !== '' && !/^:[0-9]{1,5}$/.test(after)) return null;
    t = t.slice(1, close);
    if (net.isIPv6(t) === false) return null;
  } else if (/^[0-9.]+:[0-9]{1,5}$/.test(t)) {
    t = t.slice(0, t.indexOf(':'));
  }
  if (net.isIPv4(t)) return t;
  if (!net.isIPv6(t)) return null;
  const mapped = /^::ffff:([0-9.]+)$/i.exec(t);
  return mapped && net.isIPv4(mapped[1]) ? mapped[1] : t.toLowerCase();
}

/** Trusted proxies: IP addresses and CIDR blocks ("10.0.0.0/8", "192.0.2.7", "::1", "fd00::/8").
 *  Throws RateLimitError invalid_policy naming a bad entry (checked when the middleware is made). */
export class TrustedProxies {
  private readonly list = new net.BlockList();
  readonly empty: boolean;

  constructor(cidrs: readonly string[] = []) {
    if (!Array.isArray(cidrs)) throw new RateLimitError('invalid_policy', 'trustedProxies must be a list of addresses or CIDR blocks');
    for (const entry of cidrs) {
      const m = typeof entry === 'string' ? /^([^/]+)(?:\/([0-9]{1,3}))?$/.exec(entry) : null;
      const addr = m ? parseAddress(m[1]) : null;
      const family = addr === null ? null : net.isIPv4(addr) ? 'ipv4' : 'ipv6';
      const max = family === 'ipv4' ? 32 : 128;
      const prefix = m && m[2] !== undefined ? Number(m[2]) : max;
      if (addr === null || family === null || prefix > max || (m![1].includes(':') && family === 'ipv4' && m![2] !== undefined)) {
        throw new RateLimitError('invalid_policy', `trustedProxies: '${entry}' is not an IP address or CIDR block (e.g. 10.0.0.0/8, 192.0.2.7, ::1, fd00::/8)`);
      }
      this.list.addSubnet(addr, prefix, family);
    }
    this.empty = cidrs.length === 0;
  }

  contains(addr: string): boolean {
    return this.list.check(addr, net.isIPv4(addr) ? 'ipv4' : 'ipv6');
  }
}

/** The client address of a request from `peer` carrying X-Forwarded-For `header` (occurrences
 *  joined by ", "; undefined when absent). The peer itself when the header is not believed. */
export function clientAddress(peer: string, header: string | undefined, trusted: TrustedProxies): string {
  const first = parseAddress(peer);
  if (first === null) return peer;
  if (header === undefined || trusted.empty || !trusted.contains(first)) return first;
  let out = first;
  const elements = header.split(',');
  for (let i = elements.length - 1; i >= 0; i--) {
    const addr = parseAddress(elements[i]);
    if (addr === null) return out;
    out = addr;
    if (!trusted.contains(addr)) return out;
  }
  return out;
}
