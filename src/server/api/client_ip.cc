// client_ip.cc — the client address of a proxy chain (see client_ip.h).
#include "client_ip.h"
#include "text.h"

namespace ratelimit::server {
namespace {

using text::trim_ows;

// The address one element of the chain names: the X-Forwarded-For element itself, or the
// `for=` parameter of a Forwarded element (quotes removed). Empty when there is none.
std::string_view element_address(std::string_view element, ClientHeader kind) {
  element = trim_ows(element);
  if (kind == ClientHeader::kXForwardedFor) return element;
  while (!element.empty()) {
    const size_t semi = element.find(';');
    std::string_view pair = trim_ows(element.substr(0, semi));
    element = semi == std::string_view::npos ? std::string_view{} : element.substr(semi + 1);
    const size_t eq = pair.find('=');
    if (eq != 3) continue;
    const std::string_view name = pair.substr(0, 3);
    if ((name[0] | 0x20) != 'f' || (name[1] | 0x20) != 'o' || (name[2] | 0x20) != 'r') continue;
    std::string_view v = pair.substr(4);
    if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
    return v;
  }
  return {};
}

}  // namespace

void client_address(std::string_view peer, const std::string* header, ClientHeader kind,
                    const TrustedProxies& trusted, std::string& out) {
  IpAddress addr;
  if (header == nullptr || trusted.empty() || !IpAddress::parse(peer, addr) || !trusted.contains(addr)) {
    out.assign(peer);
    return;
  }
  out = addr.to_string();  // the last believed hop so far
  std::string_view rest = *header;
  while (true) {
    // The right-most element not yet examined (commas inside quotes do not split).
    size_t cut = std::string_view::npos;
    bool quoted = false;
    for (size_t i = rest.size(); i-- > 0;) {
      if (rest[i] == '"') quoted = !quoted;
      if (rest[i] == ',' && !quoted) {
        cut = i;
        break;
      }
    }
    const std::string_view element = cut == std::string_view::npos ? rest : rest.substr(cut + 1);
    if (!IpAddress::parse(element_address(element, kind), addr)) return;  // malformed: stop here
    out = addr.to_string();
    if (!trusted.contains(addr) || cut == std::string_view::npos) return;
    rest = rest.substr(0, cut);
  }
}

}  // namespace ratelimit::server
