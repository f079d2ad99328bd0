// rlqs_stream.cc — Envoy's RLQS messages to and from rlqs::QuotaService (see rlqs_stream.h).
#include "rlqs_stream.h"

#include <algorithm>

#include "envoy/service/rate_limit_quota/v3/rlqs.pb.h"

namespace ratelimit::grpc_api {
namespace {

namespace pb = ::envoy::service::rate_limit_quota::v3;
using ::envoy::type::v3::RateLimitStrategy;
using fair_share::Assignment;

constexpr int64_t kUsPerS = 1'000'000;

// A Duration as microseconds; -1 when negative or malformed (QuotaService refuses it).
int64_t micros_of(const google::protobuf::Duration& d) {
  if (d.seconds() < 0 || d.nanos() < 0 || d.nanos() >= 1'000'000'000) return -1;
  if (d.seconds() > fair_share::kMaxElapsedUs / kUsPerS) return fair_share::kMaxElapsedUs + 1;
  return d.seconds() * kUsPerS + d.nanos() / 1000;
}

void translate(const pb::BucketId& in, rlqs::BucketKey& out) {
  out.clear();
  if (in.bucket_size() > static_cast<int>(rlqs::kMaxBucketPairs)) {
    out.resize(rlqs::kMaxBucketPairs + 1);  // refused by QuotaService::valid_bucket, nothing copied
    return;
  }
  for (const auto& [k, v] : in.bucket()) out.emplace_back(k, v);
  std::sort(out.begin(), out.end());  // a map: its order on the wire must not matter
}

void render(const Assignment& a, pb::RateLimitQuotaResponse::BucketAction::QuotaAssignmentAction& out) {
  out.mutable_assignment_time_to_live()->set_seconds(a.ttl_s);
  RateLimitStrategy* strategy = out.mutable_rate_limit_strategy();
  switch (a.kind) {
    case Assignment::Kind::kAllowAll: strategy->set_blanket_rule(RateLimitStrategy::ALLOW_ALL); return;
    case Assignment::Kind::kDenyAll: strategy->set_blanket_rule(RateLimitStrategy::DENY_ALL); return;
    case Assignment::Kind::kTokenBucket: break;
  }
  auto* tb = strategy->mutable_token_bucket();
  // Capacities are at most 10^9 rps (fair_share::kMaxCapacityMrps): tokens fit uint32.
  tb->set_max_tokens(static_cast<uint32_t>(std::min<int64_t>(a.max_tokens, UINT32_MAX)));
  tb->mutable_tokens_per_fill()->set_value(static_cast<uint32_t>(std::min<int64_t>(a.tokens_per_fill, UINT32_MAX)));
  tb->mutable_fill_interval()->set_seconds(a.fill_interval_s);
}

}  // namespace

Status answer_rlqs(rlqs::QuotaService& service, RlqsStream& st, std::string_view message, std::string& reply) {
  reply.clear();
  pb::RateLimitQuotaUsageReports in;
  if (!in.ParseFromArray(message.data(), static_cast<int>(message.size()))) {
    return Status::internal("the message is not a RateLimitQuotaUsageReports");
  }
  if (!st.named) {
    if (in.domain().empty()) return Status::invalid_argument("the stream's first report must name its domain");
    st.domain = in.domain();
    st.named = true;
  }
  // The map's iteration order is the protobuf library's: buckets are looked up again by index.
  std::vector<const pb::RateLimitQuotaUsageReports::BucketQuotaUsage*> usages;
  usages.reserve(static_cast<size_t>(in.bucket_quota_usages_size()));
  st.reports.resize(static_cast<size_t>(in.bucket_quota_usages_size()));
  for (const auto& [key, usage] : in.bucket_quota_usages()) {
    rlqs::BucketReport& r = st.reports[usages.size()];
    translate(usage.bucket_id(), r.id);
    r.allowed = usage.num_requests_allowed();
    r.denied = usage.num_requests_denied();
    r.elapsed_us = micros_of(usage.time_elapsed());
    usages.push_back(&usage);
  }
  service.report(st.client, st.domain, st.reports, st.answers);
  if (st.answers.empty()) return Status::ok();
  pb::RateLimitQuotaResponse out;
  for (const rlqs::BucketAnswer& a : st.answers) {
    auto* action = out.add_bucket_action();
    *action->mutable_bucket_id() = usages[a.index]->bucket_id();
    render(a.assignment, *action->mutable_quota_assignment_action());
  }
  out.SerializeToString(&reply);
  return Status::ok();
}

}  // namespace ratelimit::grpc_api
