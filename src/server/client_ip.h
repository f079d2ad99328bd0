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
// Thread-safety: TrustedProxies is immutable after parse(); all functions are pure.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ratelimit/status.h"

namespace ratelimit::server {

// One IP address, IPv4 stored as IPv4 (also when it arrived IPv4-mapped).
struct IpAddress {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};  // IPv4: the first 4

  // Parses a literal address: "192.0.2.1", "2001:db8::1", "[2001:db8::1]", with an optional
  // port ("192.0.2.1:4711", "[2001:db8::1]:4711"). False when it is none of these.
  [[nodiscard]] static bool parse(std::string_view text, IpAddress& out);
  std::string to_string() const;

  friend bool operator==(const IpAddress&, const IpAddress&) = default;
};

class TrustedProxies {
 public:
  // Parses "10.0.0.0/8", "192.0.2.7" (= /32), "::1", "fd00::/8". Errors name the entry.
  static Result<TrustedProxies> parse(const std::vector<std::string>& cidrs);

  bool empty() const { return blocks_.empty(); }
  bool contains(const IpAddress& a) const;

  friend bool operator==(const TrustedProxies&, const TrustedProxies&) = default;

 private:
  struct Block {
    IpAddress base;
    unsigned prefix = 0;
    friend bool operator==(const Block&, const Block&) = default;
  };
  std::vector<Block> blocks_;
};

enum class ClientHeader : uint8_t {
  kXForwardedFor,  // X-Forwarded-For: client, proxy1, proxy2
  kForwarded,      // RFC 7239 Forwarded: for=client, for=proxy1
};

// The client address of a request that arrived from `peer` carrying `header` (the named
// header's value, all occurrences joined by ", "; nullptr when absent). Writes the address to
// `out` (reused buffer) — the peer itself when the headers are not believed.
void client_address(std::string_view peer, const std::string* header, ClientHeader kind,
                    const TrustedProxies& trusted, std::string& out);

}  // namespace ratelimit::server
