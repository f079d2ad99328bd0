// rls_proto.h — Envoy's RateLimitRequest/RateLimitResponse messages (the generated code of
// proto/) to and from rls::RateLimitRequest/RateLimitResponse (src/rls), with nothing decided
// here: the request is taken as sent (RateLimitService checks its shape, so gRPC and POST /json
// refuse alike), the response rendered field by field.
// Thread-safety: stateless functions.
#pragma once

#include "envoy/service/ratelimit/v3/rls.pb.h"
#include "rls_service.h"

namespace ratelimit::grpc_api {

using PbRequest = ::envoy::service::ratelimit::v3::RateLimitRequest;
using PbResponse = ::envoy::service::ratelimit::v3::RateLimitResponse;

// `out` is cleared first; its strings and vectors keep their capacity (a reused Call).
void translate(const PbRequest& in, rls::RateLimitRequest& out);
void render(const rls::RateLimitResponse& in, PbResponse& out);

}  // namespace ratelimit::grpc_api
