// rls_json.h — the JSON form of RateLimitRequest and RateLimitResponse that envoyproxy/ratelimit's
// `POST /json` speaks: protobuf's proto3 JSON mapping (protojson) of Envoy's
// envoy.service.ratelimit.v3 messages.
//
// Why apart and pure: the body is untrusted input (fuzzed with the other parsers), and the
// rendering must match protojson field for field so a client written against
// envoyproxy/ratelimit parses ours unchanged.
// Parsing, as protojson.Unmarshal does: field names in lowerCamelCase or as in the proto
// ("hitsAddend" or "hits_addend"); unknown fields refused; null = the default; uint32/uint64 as
// a JSON number or a decimal string; `unit` as its enum name ("MINUTE") or number;
// `hits_addend` of a descriptor is a google.protobuf.UInt64Value (a number, a string or null).
// Bounds: body nesting depth 6, at most kMaxDescriptors descriptors (the service refuses more),
// 64 entries per descriptor.
// Rendering, as protojson.Marshal does (defaults omitted): {"overallCode":"OVER_LIMIT",
// "statuses":[{"code":"OVER_LIMIT","currentLimit":{"requestsPerUnit":1,"unit":"MINUTE",
// "name":"x"},"limitRemaining":3,"durationUntilReset":"42s"}],"responseHeadersToAdd":
// [{"key":"RateLimit-Limit","value":"1"}]}.
// Thread-safety: stateless functions.
#pragma once

#include <string>
#include <string_view>

#include "rls_service.h"

namespace ratelimit::rls {

// Parses `body` into `out` (cleared first). Errors (kInvalidArgument) say what and where:
// "descriptors[0].entries[1]: unknown field \"vlaue\"".
Status parse_rate_limit_request_json(std::string_view body, RateLimitRequest& out);

// Appends the JSON of `response` to `out`.
void append_rate_limit_response_json(const RateLimitResponse& response, std::string& out);

}  // namespace ratelimit::rls
