// rlqs_client.h — the test side of Envoy's Rate Limit Quota Service, shared by the RLQS tests on
// the real ratelimitd: a stream (StreamRateLimitQuotas) and an "Envoy" on it that reports one
// bucket each second as Envoy's quota filter does (time_elapsed 0 in its first report, then whole
// seconds; allowed what its assignment let through, denied the rest of its demand), and what
// Envoy applies of an answer (applied_rate).
//
// Why: rlqs_e2e_test and rlqs_sim_compare_test speak to the server as one Envoy fleet would; one
// client keeps them speaking alike.
// Invariants: every stream carries a deadline (120 s by default), so no wait is unbounded; the
// checks of Envoy's constraints are gtest expectations (a violation fails the calling test).
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"

namespace ratelimit::rlqs_test {

namespace rlqs_pb = ::envoy::service::rate_limit_quota::v3;
using rlqs_pb::RateLimitQuotaResponse;
using rlqs_pb::RateLimitQuotaService;
using rlqs_pb::RateLimitQuotaUsageReports;
using Pairs = std::vector<std::pair<std::string, std::string>>;

// What Envoy's quota filter applies of an action (the list, from Envoy's source): a
// token bucket with tokens_per_fill set, whole-second fill_interval >= 1 s, or a blanket rule;
// a TTL of whole seconds >= 1 s. Returns the rate it enforces (rps), -1 for ALLOW_ALL.
inline double applied_rate(const RateLimitQuotaResponse::BucketAction& a) {
  EXPECT_TRUE(a.has_quota_assignment_action()) << a.DebugString();
  const auto& q = a.quota_assignment_action();
  EXPECT_TRUE(q.has_assignment_time_to_live());
  EXPECT_GE(q.assignment_time_to_live().seconds(), 1);
  EXPECT_EQ(q.assignment_time_to_live().nanos(), 0);
  const auto& s = q.rate_limit_strategy();
  if (s.has_blanket_rule()) return s.blanket_rule() == ::envoy::type::v3::RateLimitStrategy::ALLOW_ALL ? -1 : 0;
  EXPECT_TRUE(s.has_token_bucket()) << "Envoy applies only token_bucket or a blanket rule: " << a.DebugString();
  const auto& tb = s.token_bucket();
  EXPECT_TRUE(tb.has_tokens_per_fill());
  EXPECT_GT(tb.tokens_per_fill().value(), 0U);
  EXPECT_GT(tb.max_tokens(), 0U);
  EXPECT_GE(tb.fill_interval().seconds(), 1);
  EXPECT_EQ(tb.fill_interval().nanos(), 0);
  if (tb.fill_interval().seconds() < 1) return 0;
  return static_cast<double>(tb.tokens_per_fill().value()) / static_cast<double>(tb.fill_interval().seconds());
}

inline void set_bucket(rlqs_pb::BucketId* id, const Pairs& pairs) {
  for (const auto& [k, v] : pairs) (*id->mutable_bucket())[k] = v;
}

// One StreamRateLimitQuotas call, bounded by a deadline.
struct QuotaStream {
  std::unique_ptr<RateLimitQuotaService::Stub> stub;
  ::grpc::ClientContext ctx;
  std::unique_ptr<::grpc::ClientReaderWriter<RateLimitQuotaUsageReports, RateLimitQuotaResponse>> stream;

  explicit QuotaStream(const std::shared_ptr<::grpc::Channel>& channel, int deadline_s = 120) {
    stub = RateLimitQuotaService::NewStub(channel);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(deadline_s));
    stream = stub->StreamRateLimitQuotas(&ctx);
  }
  // Ends the call from our side; the server's status.
  ::grpc::Status close() {
    stream->WritesDone();
    return stream->Finish();
  }
};

// One Envoy: one stream, one bucket, a demand in rps; it lets through what its assignment allows
// in each one-second interval and reports allowed + denied.
struct Envoy : QuotaStream {
  Pairs bucket;
  double demand = 0;
  double rate = -1;  // the rate assigned (-1: none yet)
  bool first = true;

  Envoy(const std::shared_ptr<::grpc::Channel>& channel, Pairs b, double d)
      : QuotaStream(channel), bucket(std::move(b)), demand(d) {}

  // Sends the report of the last interval and reads the answer; false when the stream failed.
  bool report() {
    RateLimitQuotaUsageReports r;
    if (first) r.set_domain("envoy");
    auto& usage = (*r.mutable_bucket_quota_usages())[1];
    set_bucket(usage.mutable_bucket_id(), bucket);
    if (!first) {
      const double allowed = rate < 0 ? demand : std::min(demand, rate);
      usage.set_num_requests_allowed(static_cast<uint64_t>(std::llround(allowed)));
      usage.set_num_requests_denied(static_cast<uint64_t>(std::llround(demand - allowed)));
      usage.mutable_time_elapsed()->set_seconds(1);
    }
    first = false;
    RateLimitQuotaResponse resp;
    if (!stream->Write(r) || !stream->Read(&resp)) return false;
    EXPECT_EQ(resp.bucket_action_size(), 1);
    if (resp.bucket_action_size() != 1) return false;
    EXPECT_EQ(resp.bucket_action(0).bucket_id().bucket_size(), static_cast<int>(bucket.size()));
    rate = applied_rate(resp.bucket_action(0));
    return true;
  }
};

inline bool near(double got, double want) { return std::abs(got - want) <= 0.1 * want; }

}  // namespace ratelimit::rlqs_test
