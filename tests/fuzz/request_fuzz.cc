// request_fuzz.cc — libFuzzer target for ratelimitd's untrusted-input parsers: JSON request
// bodies (every kind), the forward-auth query, X-Forwarded-For and the request-head screen. Built by scripts/fuzz with
// clang (-fsanitize=fuzzer,address,undefined); built by CMake with a corpus-replay main.
// Invariants checked beyond "no crash": an accepted request is within its bounds, and a body the
// fast path (plain_key_policy) reads is read by Boost.JSON as the same two strings.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "client_ip.h"
#include "head_scan.h"
#include "request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  using namespace ratelimit::server;
  const RequestBounds bounds{64, 1000};
  DecisionRequest r;
  RequestError e;
  for (BodyKind kind : {BodyKind::kDecision, BodyKind::kReset, BodyKind::kReport}) {
    if (parse_request_body(in, kind, bounds, r, e)) {
      if (r.key.empty() || r.key.size() > bounds.max_key_length) std::abort();
      // A report's cost may be negative (a refund) or 0, never beyond the bound either way.
      const int64_t least = kind == BodyKind::kReport ? -bounds.max_cost : 1;
      if (r.cost < least || r.cost > bounds.max_cost) std::abort();
      if (r.policy_count < 1 || r.policy_count > ratelimit::kMaxPoliciesPerCall) std::abort();
    } else if (e.status != 400 || e.error.empty()) {
      std::abort();
    }
  }
  std::string_view plain_key, plain_policy;
  if (plain_key_policy(in, plain_key, plain_policy)) {
    boost::system::error_code ec;
    const boost::json::value v = boost::json::parse(in, ec);
    if (ec || !v.is_object() || v.get_object().size() != 2) std::abort();
    const boost::json::value* k = v.get_object().if_contains("key");
    const boost::json::value* p = v.get_object().if_contains("policy");
    if (k == nullptr || p == nullptr || !k->is_string() || !p->is_string()) std::abort();
    if (std::string_view(k->get_string()) != plain_key || std::string_view(p->get_string()) != plain_policy) std::abort();
  }
  if (parse_forward_auth_query(in, r, e)) {
    if (r.policy_count < 1 || r.policy_count > ratelimit::kMaxPoliciesPerCall) std::abort();
  }
  // The head screen: a complete head ends with CRLF CRLF within the input and holds no bare
  // LF, no obs-fold, no control character; the verdict does not change as more bytes arrive.
  const HeadScan scan = scan_request_head(in);
  if (scan.state == HeadScan::State::kComplete) {
    if (scan.length < 4 || scan.length > in.size() || in.substr(scan.length - 4, 4) != "\r\n\r\n") std::abort();
    for (size_t i = 0; i + 4 < scan.length; ++i) {
      const auto c = static_cast<unsigned char>(in[i]);
      if (c == 0 || c == 0x7f || (c < 0x20 && c != '\t' && c != '\r' && c != '\n')) std::abort();
      if (c == '\n' && (i == 0 || in[i - 1] != '\r')) std::abort();
      if (c == '\n' && (in[i + 1] == ' ' || in[i + 1] == '\t')) std::abort();
    }
  }
  if (size > 0) {
    const HeadScan prefix = scan_request_head(in.substr(0, size - 1));
    if (prefix.state == HeadScan::State::kMalformed && scan.state != HeadScan::State::kMalformed) std::abort();
    if (prefix.state == HeadScan::State::kComplete && (scan.state != HeadScan::State::kComplete || scan.length != prefix.length)) std::abort();
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
