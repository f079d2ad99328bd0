// trusted_proxies.cc — IP addresses and trusted-proxy blocks (see trusted_proxies.h).
#include "trusted_proxies.h"

#include <arpa/inet.h>

#include <cstring>

#include "text.h"

namespace ratelimit::server {
namespace {

using text::trim_ows;

bool parse_plain(std::string_view text, IpAddress& out) {
  char buf[INET6_ADDRSTRLEN + 1];
  if (text.empty() || text.size() >= sizeof(buf)) return false;
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  out = IpAddress{};
  if (inet_pton(AF_INET, buf, out.bytes.data()) == 1) return true;
  if (inet_pton(AF_INET6, buf, out.bytes.data()) != 1) return false;
  static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(out.bytes.data(), kMapped, 12) == 0) {
    std::memmove(out.bytes.data(), out.bytes.data() + 12, 4);
    std::memset(out.bytes.data() + 4, 0, 12);
    return true;
  }
  out.v6 = true;
  return true;
}

bool all_digits(std::string_view s) {
  if (s.empty() || s.size() > 5) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

bool IpAddress::parse(std::string_view text, IpAddress& out) {
  if (!text.empty() && text.front() == '[') {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) return false;
    const std::string_view rest = text.substr(close + 1);
    if (!rest.empty() && !(rest.front() == ':' && all_digits(rest.substr(1)))) return false;
    return parse_plain(text.substr(1, close - 1), out) && out.v6;
  }
  const size_t colon = text.find(':');
  if (colon != std::string_view::npos && text.find(':', colon + 1) == std::string_view::npos) {
    // One colon: IPv4 with a port (an IPv6 literal has at least two).
    if (!all_digits(text.substr(colon + 1))) return false;
    return parse_plain(text.substr(0, colon), out) && !out.v6;
  }
  return parse_plain(text, out);
}

std::string IpAddress::to_string() const {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof(buf));
  return buf;
}

Result<TrustedProxies> TrustedProxies::parse(const std::vector<std::string>& cidrs) {
  TrustedProxies t;
  for (const std::string& entry : cidrs) {
    const std::string_view text = trim_ows(entry);
    const size_t slash = text.find('/');
    Block b;
    if (!parse_plain(text.substr(0, slash), b.base)) {
      return Status::invalid_argument("'" + entry + "' is not an IP address or CIDR block (e.g. 10.0.0.0/8, fd00::/8)");
    }
    const unsigned max = b.base.v6 ? 128 : 32;
    b.prefix = max;
    if (slash != std::string_view::npos) {
      const std::string_view len = text.substr(slash + 1);
      if (len.empty() || len.size() > 3 || !all_digits(len)) {
        return Status::invalid_argument("'" + entry + "': the prefix length must be a number");
      }
      unsigned n = 0;
      for (char c : len) n = n * 10 + static_cast<unsigned>(c - '0');
      if (n > max) {
        return Status::invalid_argument("'" + entry + "': the prefix length is at most " + std::to_string(max));
      }
      b.prefix = n;
    }
    // Host bits set ("10.1.2.3/8") are cleared rather than refused: the block is what counts.
    for (unsigned bit = b.prefix; bit < max; ++bit) {
      b.base.bytes[bit / 8] = static_cast<uint8_t>(b.base.bytes[bit / 8] & ~(0x80u >> (bit % 8)));
    }
    t.blocks_.push_back(b);
  }
  return t;
}

bool TrustedProxies::contains(const IpAddress& a) const {
  for (const Block& b : blocks_) {
    if (b.base.v6 != a.v6) continue;
    unsigned bit = 0;
    for (; bit + 8 <= b.prefix; bit += 8) {
      if (a.bytes[bit / 8] != b.base.bytes[bit / 8]) break;
    }
    if (bit + 8 <= b.prefix) continue;
    if (bit < b.prefix) {
      const auto mask = static_cast<uint8_t>(0xffu << (8 - (b.prefix - bit)));
      if ((a.bytes[bit / 8] & mask) != b.base.bytes[bit / 8]) continue;
    }
    return true;
  }
  return false;
}

}  // namespace ratelimit::server
