// rlqs_e2e_test.cc — Envoy's Rate Limit Quota Service (RLQS) on the real ratelimitd binary,
// spoken by real gRPC clients (libgrpc++ and the generated stubs of proto/envoy/service/
// rate_limit_quota/v3/rlqs.proto), each behaving as Envoy's quota filter does: it reports every
// second (time_elapsed whole seconds, 0 in its first report) the requests its assignment let
// through and those it denied, and applies only what Envoy applies.
//   FairShareFollowsDemand  three clients on one bucket of 300 rps with demands 10/100/1000 get
//                           10/100/190 (±10 %) within five reports; the shift to 10/1000/20
//                           gives 10/270/20 within five; when the 1000-rps client closes its
//                           stream its share is spread over the others within TTL + two reports.
//                           Reports are paced by the real clock (one per second per client: the
//                           TTL is counted on it); every assignment obeys Envoy's constraints.
//   BadInputIsAnsweredOrIgnored  a message that is not a report (INTERNAL), a first report
//                           without a domain (INVALID_ARGUMENT), empty/huge bucket_ids and absurd
//                           counts (ignored, counted), while another stream keeps its answers;
//                           rules by domain, allow/deny; bucket_id order irrelevant; health and
//                           reflection list the service; 20,000 distinct buckets stay within
//                           max_buckets (the least recently reported forgotten).
#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "envoy/service/rate_limit_quota/v3/rlqs.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "rlqs_client.h"
#include "rls_daemon.h"

namespace ratelimit {
namespace {

namespace rlqs_pb = rlqs_test::rlqs_pb;
using rlqs_test::applied_rate;
using rlqs_test::Envoy;
using rlqs_test::near;
using rlqs_test::Pairs;
using rlqs_test::QuotaStream;
using rlqs_test::set_bucket;
using rlqs_pb::RateLimitQuotaResponse;
using rlqs_pb::RateLimitQuotaService;
using rlqs_pb::RateLimitQuotaUsageReports;
using Clock = std::chrono::steady_clock;

constexpr const char* kConfig = R"(grpc_listen: 127.0.0.1:0
rlqs:
  max_buckets: 1000
  buckets:
    - match: {name: api}
      domain: envoy
      limit: 300
      unit: second
    - match: {name: blocked}
      action: deny
  unmatched: allow
)";

// Rounds of one report per client, one round per second of the real clock (the interval Envoy
// reports at), until every client's rate is within ±10 % of `want` or `max_rounds` passed.
// Returns the rounds taken (max_rounds + 1: never).
int rounds_until(std::vector<Envoy*> clients, const std::vector<double>& want, int max_rounds, Clock::time_point& next) {
  for (int round = 1; round <= max_rounds; ++round) {
    std::this_thread::sleep_until(next);  // Envoy's reporting interval, not a wait for a result
    next += std::chrono::seconds(1);
    bool all = true;
    for (size_t i = 0; i < clients.size(); ++i) {
      EXPECT_TRUE(clients[i]->report()) << "client " << i;
      all = all && near(clients[i]->rate, want[i]);
    }
    double sum = 0;
    for (Envoy* c : clients) sum += c->rate;
    if (all) return round;
    std::string rates;
    for (Envoy* c : clients) rates += " " + std::to_string(c->rate);
    std::cout << "round " << round << ":" << rates << " (sum " << sum << ")\n";
  }
  return max_rounds + 1;
}

TEST(RlqsE2e, FairShareFollowsDemand) {
  grpc_test::Server server;
  ASSERT_TRUE(server.start(kConfig));
  const Pairs api = {{"name", "api"}};
  Envoy c1(server.channel, api, 10), c2(server.channel, api, 100), c3(server.channel, api, 1000);
  Clock::time_point next = Clock::now();
  // Demands 10/100/1000 of 300: max-min shares 10/100/190 (the first report counts: it brings
  // the initial share).
  int took = rounds_until({&c1, &c2, &c3}, {10, 100, 190}, 5, next);
  EXPECT_LE(took, 5) << "shares did not reach 10/100/190";
  std::cout << "10/100/190 after " << took << " reports\n";
  // The bucket on /metrics: three clients, demand 1110/s, assigned 300/s of a 300/s limit.
  const std::string page = e2e::http_get(server.daemon.port(), "/metrics").body;
  const std::string labels = "{domain=\"envoy\",bucket=\"name=api\"}";
  EXPECT_EQ(e2e::metric_in(page, "ratelimitd_rlqs_bucket_clients" + labels), 3) << page;
  EXPECT_EQ(e2e::metric_in(page, "ratelimitd_rlqs_bucket_demand_rps" + labels), 1110);
  EXPECT_EQ(e2e::metric_in(page, "ratelimitd_rlqs_bucket_assigned_rps" + labels), 300);
  EXPECT_EQ(e2e::metric_in(page, "ratelimitd_rlqs_bucket_limit_rps" + labels), 300);
  // Demand shift: 1000 -> 20, 100 -> 1000: 10/270/20.
  c3.demand = 20;
  c2.demand = 1000;
  took = rounds_until({&c1, &c2, &c3}, {10, 270, 20}, 5, next);
  EXPECT_LE(took, 5) << "shares did not follow the shift to 10/270/20";
  std::cout << "10/270/20 after " << took << " more reports\n";
  // c2 leaves (closes its stream). Its assignment stands until its TTL (2 s at a 1 s interval):
  // then its 270 goes to c1 and c3 as headroom (their demands are met): 10 + 135 and 20 + 135.
  EXPECT_TRUE(c2.close().ok());
  took = rounds_until({&c1, &c3}, {145, 155}, 2 + 2, next);
  EXPECT_LE(took, 4) << "the leaver's share was not redistributed within TTL + two reports";
  std::cout << "redistributed after " << took << " reports\n";
  EXPECT_LE(c1.rate + c3.rate, 300);
}

TEST(RlqsE2e, BadInputIsAnsweredOrIgnored) {
  grpc_test::Server server;
  ASSERT_TRUE(server.start(kConfig));
  // A healthy stream, asked again after each bad one.
  Envoy healthy(server.channel, {{"name", "api"}, {"env", "prod"}}, 50);
  ASSERT_TRUE(healthy.report());
  EXPECT_EQ(healthy.rate, 300);  // alone, unknown demand: the whole limit at once

  // Not a report message: INTERNAL, this stream only.
  {
    ::grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    const ::grpc::Slice garbage(std::string("\xff\xff\xff\xff\x0f", 5));
    ::grpc::ByteBuffer req(&garbage, 1), resp;
    const ::grpc::Status st = ::grpc::internal::BlockingUnaryCall(
        server.channel.get(),
        ::grpc::internal::RpcMethod("/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas",
                                    ::grpc::internal::RpcMethod::NORMAL_RPC),
        &ctx, req, &resp);
    EXPECT_EQ(st.error_code(), ::grpc::StatusCode::INTERNAL) << st.error_message();
  }
  // A first report without its domain: INVALID_ARGUMENT.
  {
    QuotaStream q(server.channel, 10);
    RateLimitQuotaUsageReports r;
    set_bucket((*r.mutable_bucket_quota_usages())[1].mutable_bucket_id(), {{"name", "api"}});
    q.stream->Write(r);
    RateLimitQuotaResponse resp;
    EXPECT_FALSE(q.stream->Read(&resp));
    const ::grpc::Status st = q.stream->Finish();
    EXPECT_EQ(st.error_code(), ::grpc::StatusCode::INVALID_ARGUMENT) << st.error_message();
  }
  healthy.demand = 50;
  ASSERT_TRUE(healthy.report());
  EXPECT_EQ(healthy.rate, 300);  // its demand (50) met, the rest is headroom

  // One message: an empty bucket_id, a huge one, absurd counts, and three good buckets.
  {
    QuotaStream q(server.channel, 10);
    RateLimitQuotaUsageReports r;
    r.set_domain("envoy");
    auto& m = *r.mutable_bucket_quota_usages();
    m[1].mutable_bucket_id();                                                  // empty: ignored
    set_bucket(m[2].mutable_bucket_id(), {{"name", std::string(5000, 'x')}});  // huge: ignored
    set_bucket(m[3].mutable_bucket_id(), {{"name", "api"}, {"n", "absurd"}});
    m[3].set_num_requests_allowed(UINT64_MAX);  // as a negative count would arrive: ignored
    m[3].mutable_time_elapsed()->set_seconds(1);
    set_bucket(m[4].mutable_bucket_id(), {{"name", "blocked"}});  // rule: deny
    set_bucket(m[5].mutable_bucket_id(), {{"name", "other"}});    // no rule: unmatched allow
    // Envoy's bucket_id is a map: {env: prod, name: api} in any order is the healthy stream's
    // bucket, which now has two clients (this one unknown: wants 150).
    set_bucket(m[6].mutable_bucket_id(), {{"env", "prod"}, {"name", "api"}});
    ASSERT_TRUE(q.stream->Write(r));
    RateLimitQuotaResponse resp;
    ASSERT_TRUE(q.stream->Read(&resp));
    std::map<std::string, double> rates;
    for (const auto& a : resp.bucket_action()) {
      rates[a.bucket_id().bucket().at("name") + "/" + std::to_string(a.bucket_id().bucket_size())] = applied_rate(a);
    }
    EXPECT_EQ(rates.size(), 3U) << resp.DebugString();
    EXPECT_EQ(rates["blocked/1"], 0);
    EXPECT_EQ(rates["other/1"], -1);
    // Two clients: the healthy one wants 50 (its report), this one is new (unknown: the equal
    // share, 150); both met, the spare 100 halved: 150 + 50.
    EXPECT_EQ(rates["api/2"], 200);
    EXPECT_TRUE(q.close().ok());
  }
  ASSERT_TRUE(healthy.report());
  EXPECT_GT(healthy.rate, 0);
  EXPECT_GE(e2e::metric_value(server.daemon.port(), "ratelimitd_rlqs_reports_ignored_total"), 3);

  // The domain a rule names: another domain's {name: api} is unmatched (allow).
  {
    QuotaStream q(server.channel, 10);
    RateLimitQuotaUsageReports r;
    r.set_domain("elsewhere");
    set_bucket((*r.mutable_bucket_quota_usages())[1].mutable_bucket_id(), {{"name", "api"}});
    ASSERT_TRUE(q.stream->Write(r));
    RateLimitQuotaResponse resp;
    ASSERT_TRUE(q.stream->Read(&resp));
    ASSERT_EQ(resp.bucket_action_size(), 1);
    EXPECT_EQ(applied_rate(resp.bucket_action(0)), -1);
    EXPECT_TRUE(q.close().ok());
  }

  // 20,000 distinct buckets in 20 messages of 1,000: at most max_buckets (1000) kept.
  {
    QuotaStream q(server.channel, 60);
    for (int msg = 0; msg < 20; ++msg) {
      RateLimitQuotaUsageReports r;
      if (msg == 0) r.set_domain("envoy");
      for (int b = 0; b < 1000; ++b) {
        set_bucket((*r.mutable_bucket_quota_usages())[static_cast<uint64_t>(b)].mutable_bucket_id(),
                   {{"name", "api"}, {"user", std::to_string(msg * 1000 + b)}});
      }
      ASSERT_TRUE(q.stream->Write(r));
      RateLimitQuotaResponse resp;
      ASSERT_TRUE(q.stream->Read(&resp));
      ASSERT_EQ(resp.bucket_action_size(), 1000);
    }
    EXPECT_TRUE(q.close().ok());
    EXPECT_LE(e2e::metric_value(server.daemon.port(), "ratelimitd_rlqs_buckets"), 1000);
    EXPECT_GE(e2e::metric_value(server.daemon.port(), "ratelimitd_rlqs_buckets_forgotten_total"), 19000);
  }
  ASSERT_TRUE(healthy.report());
  EXPECT_GT(healthy.rate, 0) << "the healthy stream kept its answers";

  // Health and reflection name the service.
  auto health = ::grpc::health::v1::Health::NewStub(server.channel);
  ::grpc::ClientContext hctx;
  ::grpc::health::v1::HealthCheckRequest hreq;
  hreq.set_service("envoy.service.rate_limit_quota.v3.RateLimitQuotaService");
  ::grpc::health::v1::HealthCheckResponse hresp;
  ASSERT_TRUE(health->Check(&hctx, hreq, &hresp).ok());
  EXPECT_EQ(hresp.status(), ::grpc::health::v1::HealthCheckResponse::SERVING);
  namespace refl = ::grpc::reflection::v1alpha;
  auto reflection = refl::ServerReflection::NewStub(server.channel);
  ::grpc::ClientContext rctx;
  rctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto rs = reflection->ServerReflectionInfo(&rctx);
  refl::ServerReflectionRequest rreq;
  rreq.set_list_services("");
  ASSERT_TRUE(rs->Write(rreq));
  refl::ServerReflectionResponse rresp;
  ASSERT_TRUE(rs->Read(&rresp));
  std::set<std::string> names;
  for (const auto& svc : rresp.list_services_response().service()) names.insert(svc.name());
  EXPECT_TRUE(names.contains("envoy.service.rate_limit_quota.v3.RateLimitQuotaService"));
  rreq.set_file_containing_symbol("envoy.service.rate_limit_quota.v3.RateLimitQuotaService");
  ASSERT_TRUE(rs->Write(rreq));
  ASSERT_TRUE(rs->Read(&rresp));
  EXPECT_GT(rresp.file_descriptor_response().file_descriptor_proto_size(), 1);
  rs->WritesDone();
}

}  // namespace
}  // namespace ratelimit
