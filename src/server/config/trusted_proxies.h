// trusted_proxies.h — forward_auth.trusted_proxies as configured: IP addresses and the CIDR
// blocks of the proxies whose forwarding headers are believed (client_ip.h walks a proxy chain
// with it), and which header names that chain.
//
// Why here, in the configuration's room: it is a value the configuration parses and holds;
// the header walk that reads it is the API's (api/client_ip.h), so the configuration does not
// include an API header.
// Invariants: IPv4-mapped IPv6 addresses (::ffff:a.b.c.d) are parsed and stored as IPv4; a
// block's host bits are cleared.
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

// Which header names the proxy chain (forward_auth.client_header).
enum class ClientHeader : uint8_t {
  kXForwardedFor,  // X-Forwarded-For: client, proxy1, proxy2
  kForwarded,      // RFC 7239 Forwarded: for=client, for=proxy1
};

}  // namespace ratelimit::server
