// client_ip.go — the middleware's default key: the client's address, believing X-Forwarded-For
// only as far as trusted proxies appended it — the walk of ratelimitd's forward-auth
// (src/server/api/client_ip.cc) and of the Node and Python clients (client_ip.ts,
// client_ip.py), so one request is one key on every side.
// Why: a key taken from a header the client writes lets a client choose its own key (a new
// X-Forwarded-For each time, never limited). Only the part of the chain our proxies appended is
// believed: the walk goes from the right (the hop nearest to us) and stops at the first address
// that is not a trusted proxy.
// Invariants (as ratelimitd's): the connecting peer is the first hop — if it is not trusted the
// header is ignored (no trusted proxies, the default, trusts nobody); an element that is empty or
// not an address ends the walk at the last believed hop, so bad input can only make the key
// coarser, never one the client chose; IPv4-mapped IPv6 (::ffff:a.b.c.d) is IPv4; addresses are
// returned in their canonical text (2001:db8::1), as ratelimitd writes them.
// Thread-safety: a TrustedProxies is read-only once made.
package ratelimit

import (
	"net/http"
	"net/netip"
	"regexp"
	"strings"
)

var (
	bracketPort = regexp.MustCompile(`^:[0-9]{1,5}$`)
	v4Port      = regexp.MustCompile(`^[0-9.]+:[0-9]{1,5}$`)
)

func ipOf(text string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(text)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// ParseAddress reads "192.0.2.1", "2001:db8::1", "[2001:db8::1]", with an optional port
// ("192.0.2.1:4711", "[2001:db8::1]:4711"); IPv4-mapped IPv6 is IPv4. ok false when it is none.
func ParseAddress(text string) (addr string, ok bool) {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "[") {
		end := strings.IndexByte(t, ']')
		if end < 0 || (t[end+1:] != "" && !bracketPort.MatchString(t[end+1:])) || !strings.Contains(t[1:end], ":") {
			return "", false
		}
		t = t[1:end]
	} else if v4Port.MatchString(t) {
		t = t[:strings.IndexByte(t, ':')]
	}
	a, ok := ipOf(t)
	if !ok {
		return "", false
	}
	return a.String(), true
}

// TrustedProxies are the proxies whose X-Forwarded-For the default key believes.
type TrustedProxies struct {
	prefixes []netip.Prefix
}

// NewTrustedProxies reads IP addresses and CIDR blocks ("10.0.0.0/8", "192.0.2.7", "::1",
// "fd00::/8"; host bits are ignored, as ratelimitd does). The error is an *Error invalid_policy
// naming the bad entry.
func NewTrustedProxies(cidrs []string) (TrustedProxies, error) {
	var t TrustedProxies
	for _, entry := range cidrs {
		p, err := netip.ParsePrefix(entry)
		if err != nil {
			a, ok := ipOf(entry)
			if !ok {
				return TrustedProxies{}, invalid("TrustedProxies: %q is not an IP address or CIDR block (e.g. 10.0.0.0/8, 192.0.2.7, ::1, fd00::/8)", entry)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		} else if p.Addr().Zone() != "" {
			return TrustedProxies{}, invalid("TrustedProxies: %q has a zone; give the address alone", entry)
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		t.prefixes = append(t.prefixes, p.Masked())
	}
	return t, nil
}

// Contains says whether addr (as ParseAddress returns it) is a trusted proxy.
func (t TrustedProxies) Contains(addr string) bool {
	a, ok := ipOf(addr)
	if !ok {
		return false
	}
	for _, p := range t.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ClientAddress is the client address of a request from peer carrying X-Forwarded-For header
// (several occurrences joined by ", "; hasHeader false when absent): the peer itself when the
// header is not believed.
func ClientAddress(peer, header string, hasHeader bool, trusted TrustedProxies) string {
	first, ok := ParseAddress(peer)
	if !ok {
		return peer
	}
	if !hasHeader || len(trusted.prefixes) == 0 || !trusted.Contains(first) {
		return first
	}
	out := first
	elements := strings.Split(header, ",")
	for i := len(elements) - 1; i >= 0; i-- {
		addr, ok := ParseAddress(elements[i])
		if !ok {
			return out
		}
		out = addr
		if !trusted.Contains(addr) {
			return out
		}
	}
	return out
}

// ClientKey is the default key of a request: its client address through trusted
// (r.RemoteAddr is the peer; X-Forwarded-For the chain).
func ClientKey(r *http.Request, trusted TrustedProxies) string {
	xff, has := r.Header["X-Forwarded-For"]
	return ClientAddress(r.RemoteAddr, strings.Join(xff, ", "), has, trusted)
}
