"""client_ip.py — the middleware's default key: the client's address, believing X-Forwarded-For
only as far as trusted proxies appended it — the walk of ratelimitd's forward-auth
(src/server/api/client_ip.cc) and of the Node client (client_ip.ts), so one request is one key
on every side.
Why: a key taken from a header the client writes lets a client choose its own key (a new
X-Forwarded-For each time, never limited). Only the part of the chain our proxies appended is
believed: the walk goes from the right (the hop nearest to us) and stops at the first address
that is not a trusted proxy.
Invariants (as ratelimitd's): the connecting peer is the first hop — if it is not trusted the
header is ignored (no trusted proxies, the default, trusts nobody); an element that is empty or
not an address ends the walk at the last believed hop, so bad input can only make the key
coarser, never one the client chose; IPv4-mapped IPv6 (::ffff:a.b.c.d) is IPv4."""
import ipaddress
import re
from typing import Iterable, Optional, Union

from .errors import RateLimitError

_Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
_PORT = re.compile(r"^:[0-9]{1,5}$")
_V4_PORT = re.compile(r"^[0-9.]+:[0-9]{1,5}$")


def _ip(text: str) -> Optional[_Address]:
    try:
        a = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(a, ipaddress.IPv6Address) and (a.scope_id is not None):
        return None
    if isinstance(a, ipaddress.IPv6Address) and a.ipv4_mapped is not None:
        return a.ipv4_mapped
    return a


def parse_address(text: str) -> Optional[str]:
    """"192.0.2.1", "2001:db8::1", "[2001:db8::1]", with an optional port ("192.0.2.1:4711",
    "[2001:db8::1]:4711"), IPv4-mapped IPv6 as IPv4; None when it is none of these."""
    t = text.strip()
    if t.startswith("["):
        close = t.find("]")
        if close < 0 or (t[close + 1:] and not _PORT.match(t[close + 1:])):
            return None
        a = _ip(t[1:close])
        return None if a is None or (a.version == 4 and "." not in t[1:close]) else str(a)
    if _V4_PORT.match(t):
        t = t[:t.index(":")]
    a = _ip(t)
    return None if a is None else str(a)


class TrustedProxies:
    """IP addresses and CIDR blocks ("10.0.0.0/8", "192.0.2.7", "::1", "fd00::/8"); raises
    RateLimitError invalid_policy naming a bad entry (checked when the middleware is made)."""

    def __init__(self, cidrs: Iterable[str] = ()):
        if isinstance(cidrs, str):
            raise RateLimitError("invalid_policy", "trusted_proxies must be a list of addresses or CIDR blocks, not a string")
        self.networks = []
        for entry in cidrs:
            try:
                if not isinstance(entry, str):
                    raise ValueError(entry)
                self.networks.append(ipaddress.ip_network(entry, strict=False))  # host bits ignored, as ratelimitd
            except ValueError:
                raise RateLimitError("invalid_policy", f"trusted_proxies: {entry!r} is not an IP address or CIDR block "
                                     "(e.g. 10.0.0.0/8, 192.0.2.7, ::1, fd00::/8)") from None

    def __bool__(self) -> bool:
        return bool(self.networks)

    def __contains__(self, addr: str) -> bool:
        a = ipaddress.ip_address(addr)
        return any(a.version == n.version and a in n for n in self.networks)


def client_address(peer: str, header: Optional[str], trusted: TrustedProxies) -> str:
    """The client address of a request from `peer` carrying X-Forwarded-For `header` (several
    occurrences joined by ", "; None when absent): the peer itself when the header is not believed."""
    first = parse_address(peer)
    if first is None:
        return peer
    if header is None or not trusted or first not in trusted:
        return first
    out = first
    for element in reversed(header.split(",")):
        addr = parse_address(element)
        if addr is None:
            return out
        out = addr
        if addr not in trusted:
            return out
    return out
