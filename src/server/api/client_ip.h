// client_ip.h — who the client of a forward-auth request is: the trusted-proxy list
// (forward_auth.trusted_proxies, CIDR blocks) and the walk over X-Forwarded-For or RFC 7239
// Forwarded that picks the client address out of a proxy chain.
//
// Why: a forward-auth key taken from a header the client can write lets any client pick its
// own key (send a new X-Forwarded-For each time, never be limited). Only the part of the
// chain appended by proxies we trust can be believed, so the walk goes from the right (the
// hop nearest to us) and stops at the first address that is not a trusted proxy.
// Invariants:
//   - the connecting peer is the first hop: if it is not trusted, the headers are ignored and
//     the key is the peer, whatever they say (an empty list trusts nobody: safe by default);
//   - an element that is empty or not an address ends the walk at the last believed hop
//     (a trusted proxy's address), so malformed input can only make the key coarser, never
//     one the client chose;
//   - IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are matched and returned as IPv4.
// Thread-safety: a pure function (TrustedProxies, config/trusted_proxies.h, is immutable).
#pragma once

#include <string>
#include <string_view>

#include "trusted_proxies.h"

namespace ratelimit::server {

// The client address of a request that arrived from `peer` carrying `header` (the named
// header's value, all occurrences joined by ", "; nullptr when absent). Writes the address to
// `out` (reused buffer) — the peer itself when the headers are not believed.
void client_address(std::string_view peer, const std::string* header, ClientHeader kind,
                    const TrustedProxies& trusted, std::string& out);

}  // namespace ratelimit::server
