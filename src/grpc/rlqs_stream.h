// rlqs_stream.h — one StreamRateLimitQuotas call (envoy.service.rate_limit_quota.v3) as
// messages: each RateLimitQuotaUsageReports in, at most one RateLimitQuotaResponse out, with
// nothing decided here — rlqs::QuotaService divides and assigns; this file translates Envoy's
// messages (proto/envoy/service/rate_limit_quota/v3/rlqs.proto) and renders its answers as
// Envoy's quota filter applies them: a token_bucket or a blanket rule, fill_interval and
// assignment_time_to_live in whole seconds (fair_share.h says why).
//
// The stream's rules: the first message must name its domain (else INVALID_ARGUMENT ends the
// call); later messages' domain is ignored (the protocol says they share the first's). Each
// bucket of a message is answered with one BucketAction carrying its bucket_id as sent; a bucket
// QuotaService ignores (bad bucket_id or counts) gets none; a message with no bucket to answer
// gets no response (the protocol requires at least one action). A message that is not a
// RateLimitQuotaUsageReports ends the call with INTERNAL (as unary calls).
// Thread-safety: an RlqsStream belongs to its call (the connection's thread); QuotaService is
// thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "quota_service.h"
#include "ratelimit/status.h"

namespace ratelimit::grpc_api {

struct RlqsStream {
  uint64_t client = 0;   // QuotaService::new_client(), one per stream
  std::string domain;    // from the first message
  bool named = false;    // the first message (with its domain) arrived
  std::vector<rlqs::BucketReport> reports;  // reused across messages
  std::vector<rlqs::BucketAnswer> answers;

  void reset(uint64_t client_id) {
    client = client_id;
    domain.clear();
    named = false;
  }
};

// Handles one message of the stream: `reply` receives the serialized RateLimitQuotaResponse
// (cleared first; empty when there is nothing to send). A non-OK status ends the call with it.
[[nodiscard]] Status answer_rlqs(rlqs::QuotaService& service, RlqsStream& stream, std::string_view message,
                                 std::string& reply);

}  // namespace ratelimit::grpc_api
