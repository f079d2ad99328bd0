// request_fuzz.cc — libFuzzer target for ratelimitd's untrusted-input parsers: JSON request
// bodies (both kinds), the forward-auth query and X-Forwarded-For. Built by scripts/fuzz with
// clang (-fsanitize=fuzzer,address,undefined); built by CMake with a corpus-replay main.
// Invariant checked beyond "no crash": an accepted request is within its bounds.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "client_ip.h"
#include "request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  using namespace ratelimit::server;
  const RequestBounds bounds{64, 1000};
  DecisionRequest r;
  RequestError e;
  for (BodyKind kind : {BodyKind::kDecision, BodyKind::kReset}) {
    if (parse_request_body(in, kind, bounds, r, e)) {
      if (r.key.empty() || r.key.size() > bounds.max_key_length) std::abort();
      if (r.cost < 1 || r.cost > bounds.max_cost) std::abort();
      if (r.policy_count < 1 || r.policy_count > ratelimit::kMaxPoliciesPerCall) std::abort();
    } else if (e.status != 400 || e.error.empty()) {
      std::abort();
    }
  }
  if (parse_forward_auth_query(in, r, e)) {
    if (r.policy_count < 1 || r.policy_count > ratelimit::kMaxPoliciesPerCall) std::abort();
  }
  // The client-address walk over hostile X-Forwarded-For / Forwarded values from a trusted peer.
  static const ratelimit::server::TrustedProxies trusted =
      *ratelimit::server::TrustedProxies::parse({"127.0.0.0/8", "::1", "10.0.0.0/8"});
  const std::string chain(in);
  std::string client;
  for (auto kind : {ratelimit::server::ClientHeader::kXForwardedFor, ratelimit::server::ClientHeader::kForwarded}) {
    ratelimit::server::client_address("127.0.0.1", &chain, kind, trusted, client);
    if (client.empty()) std::abort();
  }
  return 0;
}
