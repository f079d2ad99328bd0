// rlqs_fuzz.cc — libFuzzer target for the Rate Limit Quota Service's messages: whatever an Envoy
// (or anything on the gRPC port) sends on StreamRateLimitQuotas, through grpc_api::answer_rlqs
// into rlqs::QuotaService, as ratelimitd's streams do. Built by scripts/fuzz with clang
// (-fsanitize=fuzzer,address,undefined; it generates the messages' protobuf code itself); built
// by CMake with a corpus-replay main.
//
// The input is a script of three streams sharing one service and a manual clock: each record is
// one byte (low two bits: stream 0–2, or 3: advance the clock by the next byte × 100 ms), then
// for a stream a two-byte length (mod 2048) and that many bytes as one message. protobuf's parser
// is fuzzed upstream; what is ours is everything after it: the translation, the bucket table and
// its bounds, the division and the assignments.
// Invariants checked beyond "no crash": a refused message ends only its stream (the call, as
// the server does; the next message there is a new stream's first); every answer parses as a
// RateLimitQuotaResponse with at most one action per bucket sent, each carrying a bucket_id that
// was sent; each action is an assignment Envoy's quota filter applies — a blanket rule, or a
// token bucket with max_tokens ≥ tokens_per_fill ≥ 1 per whole fill_interval of 1 or 60 s —
// whose rate never exceeds its rule's limit; TTLs are whole seconds in [2, 2 days]; a bucket
// ruled `deny` gets DENY_ALL, one ruled `allow` ALLOW_ALL; the table never holds more than
// max_buckets.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "envoy/service/rate_limit_quota/v3/rlqs.pb.h"
#include "quota_service.h"
#include "ratelimit/clock.h"
#include "rlqs_stream.h"

namespace {

namespace pb = ::envoy::service::rate_limit_quota::v3;
using ::envoy::type::v3::RateLimitStrategy;
using ratelimit::rlqs::QuotaAction;
using ratelimit::rlqs::QuotaRule;
using ratelimit::rlqs::QuotaRules;

constexpr size_t kMaxBuckets = 8;
constexpr int64_t kApiLimitRps = 300;  // {name: api}: 300 per second
constexpr int64_t kSlowLimitPerMin = 10;  // {name: slow}: 10 per minute (shares below 1 rps)

std::shared_ptr<const QuotaRules> rules() {
  auto r = std::make_shared<QuotaRules>();
  auto limit = [](int64_t n, int64_t unit_s) {
    QuotaAction a{QuotaAction::Kind::kLimit, n, unit_s, 0};
    a.capacity_mrps = *ratelimit::fair_share::capacity_mrps(n, unit_s);
    return a;
  };
  r->rules.push_back(QuotaRule{"", {{"name", "api"}}, limit(kApiLimitRps, 1), 1});
  r->rules.push_back(QuotaRule{"envoy", {{"name", "slow"}}, limit(kSlowLimitPerMin, 60), 2});
  r->rules.push_back(QuotaRule{"", {{"name", "blocked"}}, QuotaAction{QuotaAction::Kind::kDeny}, 3});
  r->rules.push_back(QuotaRule{"", {{"name", "open"}}, QuotaAction{QuotaAction::Kind::kAllow}, 4});
  r->unmatched = limit(5, 1);
  return r;
}

std::string key_of(const pb::BucketId& id) {
  std::string k;
  std::set<std::pair<std::string, std::string>> sorted(id.bucket().begin(), id.bucket().end());
  for (const auto& [a, b] : sorted) k += a + '\0' + b + '\0';
  return k;
}

// The rule's limit for this bucket in mrps as the tests' rules above set it, or -1 for a
// blanket rule (allow: -1, deny: -2).
int64_t limit_mrps(const std::string& domain, const pb::BucketId& id) {
  const auto it = id.bucket().find("name");
  const std::string name = it == id.bucket().end() ? "" : it->second;
  if (name == "api") return kApiLimitRps * 1000;
  if (name == "slow" && domain == "envoy") return kSlowLimitPerMin * 1000 / 60;
  if (name == "blocked") return -2;
  if (name == "open") return -1;
  return 5 * 1000;
}

void check_answer(const std::string& domain, const pb::RateLimitQuotaUsageReports& sent, const std::string& reply) {
  pb::RateLimitQuotaResponse resp;
  if (!resp.ParseFromString(reply)) std::abort();
  if (resp.bucket_action_size() == 0 || resp.bucket_action_size() > sent.bucket_quota_usages_size()) std::abort();
  std::set<std::string> sent_ids;
  for (const auto& [k, usage] : sent.bucket_quota_usages()) sent_ids.insert(key_of(usage.bucket_id()));
  for (const auto& action : resp.bucket_action()) {
    if (!sent_ids.contains(key_of(action.bucket_id()))) std::abort();
    if (!action.has_quota_assignment_action()) std::abort();
    const auto& qa = action.quota_assignment_action();
    const auto& ttl = qa.assignment_time_to_live();
    if (ttl.nanos() != 0 || ttl.seconds() < 2 || ttl.seconds() > 2 * 86'400) std::abort();
    const RateLimitStrategy& s = qa.rate_limit_strategy();
    const int64_t limit = limit_mrps(domain, action.bucket_id());
    if (s.has_blanket_rule()) {
      if (limit == -1 && s.blanket_rule() != RateLimitStrategy::ALLOW_ALL) std::abort();
      if (limit == -2 && s.blanket_rule() != RateLimitStrategy::DENY_ALL) std::abort();
      if (limit >= 0 && s.blanket_rule() != RateLimitStrategy::DENY_ALL) std::abort();  // no token: deny
      continue;
    }
    if (!s.has_token_bucket() || limit < 0) std::abort();
    const auto& tb = s.token_bucket();
    const int64_t fill_s = tb.fill_interval().seconds();
    if (tb.fill_interval().nanos() != 0 || (fill_s != 1 && fill_s != 60)) std::abort();
    const int64_t per_fill = tb.tokens_per_fill().value();
    if (per_fill < 1 || tb.max_tokens() < per_fill || tb.max_tokens() > per_fill + 1) std::abort();
    if (per_fill * 1000 > limit * fill_s) std::abort();  // a share never exceeds the limit
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ratelimit::ManualClock clock(ratelimit::Micros{1'000'000'000});
  ratelimit::rlqs::QuotaService service(rules(), {kMaxBuckets, &clock});
  ratelimit::grpc_api::RlqsStream streams[3];
  for (auto& s : streams) s.reset(service.new_client());
  std::string reply;
  size_t i = 0;
  while (i < size) {
    const uint8_t op = data[i++] & 3;
    if (op == 3) {
      if (i < size) clock.advance(ratelimit::Micros{int64_t{data[i++]} * 100'000});
      continue;
    }
    if (i + 2 > size) break;
    const size_t len = (size_t{data[i]} | size_t{data[i + 1]} << 8) % 2048;
    i += 2;
    const std::string_view message(reinterpret_cast<const char*>(data + i), std::min(len, size - i));
    i += message.size();
    auto& stream = streams[op];
    const ratelimit::Status status = ratelimit::grpc_api::answer_rlqs(service, stream, message, reply);
    if (!status.is_ok()) {
      if (!reply.empty()) std::abort();  // a refused message is not answered
      stream.reset(service.new_client());  // the call ends; the Envoy opens a new one
      continue;
    }
    pb::RateLimitQuotaUsageReports sent;
    if (!sent.ParseFromArray(message.data(), static_cast<int>(message.size()))) std::abort();
    if (!reply.empty()) check_answer(stream.domain, sent, reply);
    if (service.stats().buckets > kMaxBuckets) std::abort();
  }
  return 0;
}
