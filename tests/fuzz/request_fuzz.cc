// request_fuzz.cc — libFuzzer target for ratelimitd's untrusted-input parsers: JSON request
// bodies (every kind), the forward-auth query, X-Forwarded-For, the request-head screen and the
// fast parse of the common request. Built by scripts/fuzz with clang
// (-fsanitize=fuzzer,address,undefined); built by CMake with a corpus-replay main.
// Invariants checked beyond "no crash": an accepted request is within its bounds, a body the
// fast path (plain_key_policy) reads is read by Boost.JSON as the same two strings, and a
// request parse_common_request accepts is parsed by Beast (Http1Parser) into the identical
// Http1Request, with the same keep-alive and the same bytes consumed.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include <boost/asio/buffer.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include "client_ip.h"
#include "head_scan.h"
#include "http1_fast.h"
#include "http1_parser.h"
#include "request.h"

namespace {

using ratelimit::server::Http1Request;

bool same_request(const Http1Request& a, const Http1Request& b) {
  return a.method == b.method && a.version == b.version && a.target == b.target && a.body == b.body &&
         a.headers == b.headers && a.expect_continue == b.expect_continue &&
         a.transfer_encodings == b.transfer_encodings && a.transfer_encoding == b.transfer_encoding &&
         a.has_content_length == b.has_content_length && a.refusal == b.refusal;
}

// The fast parse against Beast under one pair of limits: when parse_common_request accepts the
// screened head of `in` (and its body), Beast, fed as http1_connection.cc feeds it (the head in
// one put(), then what follows, eagerly), must accept too with the identical outcome.
void check_fast_parse(std::string_view in, size_t head_length, size_t max_header_bytes, uint64_t max_body_bytes) {
  using namespace ratelimit::server;
  Http1Request fast;  // filled with another request's leftovers: the fast path must set every member
  fast.version = 10;
  fast.target = "stale";
  fast.body = "stale";
  fast.headers.add("Stale", "1");
  fast.expect_continue = true;
  fast.transfer_encodings = 1;
  fast.transfer_encoding = "chunked";
  fast.has_content_length = true;
  fast.refusal = "stale";
  FastParse result;
  if (!parse_common_request(in, head_length, max_header_bytes, max_body_bytes, fast, result)) return;
  Http1Request beast;
  Http1Parser parser(beast, max_header_bytes);
  parser.header_limit(static_cast<std::uint32_t>(max_header_bytes));
  parser.body_limit(max_body_bytes);
  boost::system::error_code ec;
  size_t used = parser.put(boost::asio::buffer(in.data(), head_length), ec);
  if (ec || used != head_length || !parser.is_header_done()) std::abort();
  parser.eager(true);
  while (!parser.is_done() && used < in.size()) {
    const size_t n = parser.put(boost::asio::buffer(in.data() + used, in.size() - used), ec);
    if (ec) std::abort();
    if (n == 0) break;
    used += n;
  }
  if (!parser.is_done() || used != result.consumed || parser.keep_alive() != result.keep_alive) std::abort();
  if (!same_request(fast, beast)) std::abort();
}

}  // namespace

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
    // Limits at, just past and well past the head and a range of bodies: the fast path must
    // decline at the edges or agree with Beast there.
    for (const size_t max_header : {scan.length, scan.length + 1, size_t{8192}}) {
      for (const uint64_t max_body : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{30}, uint64_t{31}, uint64_t{1000}, uint64_t{1} << 20}) {
        check_fast_parse(in, scan.length, max_header, max_body);
      }
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
