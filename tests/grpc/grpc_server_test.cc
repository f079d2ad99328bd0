// grpc_server_test.cc — the gRPC front-end over real gRPC on loopback: a C++ client (the
// generated stub) calls ShouldRateLimit and Health on ratelimitd's gRPC port in process
// (grpc_host.h: the daemon's listener, workers and h2c transport) serving an
// envoyproxy/ratelimit configuration through the decision service, on the memory store and on
// a real Redis. Checks the response as Envoy reads it (statuses in order, overall_code,
// current_limit with name, limit_remaining, duration_until_reset, unlimited, no match,
// shadow, headers), the status codes for bad requests and deadlines, and 200 concurrent
// asynchronous RPCs on one descriptor at 10 per minute → exactly 10 OK.
#include "grpc_host.h"

#include "config_dir.h"
#include "rls_service.h"
#include "rls_stats.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <random>
#include <thread>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "ratelimit/memory_store.h"
#include "ratelimit/redis_store.h"
#include "redis_server.h"
#include "rls_client.h"
#include "window_room.h"

namespace ratelimit::grpc_api {
namespace {

using namespace ratelimit::grpc_test;  // NOLINT: the shared test client

constexpr const char* kConfig = R"(domain: test
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 10, name: per_user }
  - key: vip
    rate_limit: { unlimited: true }
  - key: dark
    shadow_mode: true
    rate_limit: { unit: hour, requests_per_unit: 1 }
)";

struct Rig {
  explicit Rig(std::shared_ptr<Store> store, rls::ServiceOptions options = {})
      : decisions(store, nullptr), rules("", false, rls::LoadOptions{}) {
    // The rules count per minute and per hour in windows aligned to the clock (the memory
    // store's SystemClock, Redis' TIME): a boundary mid-test would give counts back. A test
    // here takes well under 10 s; it starts with 10 s of the minute and the hour left.
    testing::await_window_room({std::chrono::seconds(60), std::chrono::hours(1)}, std::chrono::seconds(10));
    std::vector<rls::SourceFile> files = {{"config.yaml", kConfig}};
    auto loaded = rls::RuleSet::load(files);
    EXPECT_TRUE(loaded.ok()) << loaded.status().to_string();
    rules.replace(*loaded);
    service = std::make_unique<rls::RateLimitService>(decisions, rules, options, stats, &outcomes);
    GrpcHostOptions o;
    o.threads = 2;
    server = std::make_unique<GrpcHost>(*service, o);
    channel = ::grpc::CreateChannel("127.0.0.1:" + std::to_string(server->port()),
                                    ::grpc::InsecureChannelCredentials());
    stub = RateLimitService::NewStub(channel);
  }
  service::DecisionService decisions;
  service::RuleCounters outcomes;
  rls::RuleSource rules;
  rls::RuleStats stats;
  std::unique_ptr<rls::RateLimitService> service;
  std::unique_ptr<GrpcHost> server;
  std::shared_ptr<::grpc::Channel> channel;
  std::unique_ptr<RateLimitService::Stub> stub;
};


::grpc::Status call(Rig& rig, const RateLimitRequest& req, RateLimitResponse& resp,
                    std::chrono::milliseconds deadline = std::chrono::seconds(5)) {
  ::grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline);
  return rig.stub->ShouldRateLimit(&ctx, req, &resp);
}

void check_envoy_answers(Rig& rig, const std::string& user) {
  RateLimitResponse r;
  auto req = make_request("test", {{{"user", user}}, {{"vip", "x"}}, {{"nothing", "here"}}, {{"dark", user}}});
  ASSERT_TRUE(call(rig, req, r).ok());
  EXPECT_EQ(r.overall_code(), RateLimitResponse::OK);
  ASSERT_EQ(r.statuses_size(), 4);
  const auto& s0 = r.statuses(0);
  EXPECT_EQ(s0.code(), RateLimitResponse::OK);
  EXPECT_EQ(s0.current_limit().name(), "per_user");
  EXPECT_EQ(s0.current_limit().requests_per_unit(), 10U);
  EXPECT_EQ(s0.current_limit().unit(), RateLimitResponse::RateLimit::MINUTE);
  EXPECT_EQ(s0.limit_remaining(), 9U);
  // envoyproxy/ratelimit's whole seconds to the end of the epoch-aligned minute.
  EXPECT_GE(s0.duration_until_reset().seconds(), 1);
  EXPECT_LE(s0.duration_until_reset().seconds(), 60);
  EXPECT_EQ(s0.duration_until_reset().nanos(), 0);
  EXPECT_EQ(r.statuses(1).code(), RateLimitResponse::OK);  // unlimited
  EXPECT_EQ(r.statuses(1).limit_remaining(), 4294967295U);
  EXPECT_FALSE(r.statuses(1).has_current_limit());
  EXPECT_EQ(r.statuses(2).code(), RateLimitResponse::OK);  // no match
  EXPECT_FALSE(r.statuses(2).has_current_limit());
  EXPECT_EQ(r.statuses(3).code(), RateLimitResponse::OK);  // shadow, within
  // The shadow rule (1 per hour) is over now, but answers OK; the user limit counts down.
  ASSERT_TRUE(call(rig, req, r).ok());
  EXPECT_EQ(r.statuses(3).code(), RateLimitResponse::OK);
  EXPECT_EQ(r.statuses(0).limit_remaining(), 8U);
  EXPECT_EQ(r.overall_code(), RateLimitResponse::OK);
  // Eight more: the user is at 10; the eleventh is over, and so is the request.
  auto only_user = make_request("test", {{{"user", user}}});
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(call(rig, only_user, r).ok());
  EXPECT_EQ(r.statuses(0).limit_remaining(), 0U);
  EXPECT_EQ(r.overall_code(), RateLimitResponse::OK);
  ASSERT_TRUE(call(rig, only_user, r).ok());
  EXPECT_EQ(r.overall_code(), RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(r.statuses(0).code(), RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(r.statuses(0).limit_remaining(), 0U);
  // Unknown domain: OK, nothing applies.
  ASSERT_TRUE(call(rig, make_request("other", {{{"user", user}}}), r).ok());
  EXPECT_EQ(r.overall_code(), RateLimitResponse::OK);
}

TEST(GrpcServer, AnswersAsEnvoyReadsItOnTheMemoryStore) {
  Rig rig(std::make_shared<MemoryStore>());
  check_envoy_answers(rig, "alice");
}

TEST(GrpcServer, RefusesBadRequestsWithInvalidArgument) {
  Rig rig(std::make_shared<MemoryStore>());
  RateLimitResponse r;
  auto code = [&](const RateLimitRequest& req) { return call(rig, req, r).error_code(); };
  EXPECT_EQ(code(make_request("", {{{"user", "a"}}})), ::grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code(make_request("test", {})), ::grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code(make_request("test", {{}})), ::grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code(make_request("test", {{{"user", ""}}})), ::grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(code(make_request("test", {{{"", "x"}}})), ::grpc::StatusCode::INVALID_ARGUMENT);
  auto bad_unit = make_request("test", {{{"user", "a"}}});
  bad_unit.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(5);
  EXPECT_EQ(code(bad_unit), ::grpc::StatusCode::INVALID_ARGUMENT);  // unit UNKNOWN
  // Too large a message.
  auto huge = make_request("test", {{{"user", std::string(100'000, 'x')}}});
  EXPECT_EQ(code(huge), ::grpc::StatusCode::RESOURCE_EXHAUSTED);
  // Nothing of this consumed anything.
  ASSERT_TRUE(call(rig, make_request("test", {{{"user", "a"}}}), r).ok());
  EXPECT_EQ(r.statuses(0).limit_remaining(), 9U);
}

TEST(GrpcServer, HealthAnswersServing) {
  Rig rig(std::make_shared<MemoryStore>());
  auto health = ::grpc::health::v1::Health::NewStub(rig.channel);
  for (const std::string name : {"", "envoy.service.ratelimit.v3.RateLimitService"}) {
    ::grpc::ClientContext ctx;
    ::grpc::health::v1::HealthCheckRequest req;
    req.set_service(name);
    ::grpc::health::v1::HealthCheckResponse resp;
    ASSERT_TRUE(health->Check(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.status(), ::grpc::health::v1::HealthCheckResponse::SERVING);
  }
  ::grpc::ClientContext ctx;
  ::grpc::health::v1::HealthCheckRequest req;
  req.set_service("no.such.Service");
  ::grpc::health::v1::HealthCheckResponse resp;
  EXPECT_EQ(health->Check(&ctx, req, &resp).error_code(), ::grpc::StatusCode::NOT_FOUND);
}

TEST(GrpcServer, HealthTurnsNotServingWhenDrainingAndCallsStillAnswer) {
  Rig rig(std::make_shared<MemoryStore>());
  rig.server->drain();
  auto health = ::grpc::health::v1::Health::NewStub(rig.channel);
  ::grpc::ClientContext ctx;
  ::grpc::health::v1::HealthCheckRequest req;
  ::grpc::health::v1::HealthCheckResponse resp;
  ASSERT_TRUE(health->Check(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.status(), ::grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  RateLimitResponse r;
  ASSERT_TRUE(call(rig, make_request("test", {{{"user", "draining"}}}), r).ok());
  EXPECT_EQ(r.statuses(0).limit_remaining(), 9U);
}

TEST(GrpcServer, ResponseHeadersWhenEnabled) {
  rls::ServiceOptions s;
  s.response_headers = true;
  Rig rig(std::make_shared<MemoryStore>(), s);
  RateLimitResponse r;
  ASSERT_TRUE(call(rig, make_request("test", {{{"user", "h"}}}), r).ok());
  std::map<std::string, std::string> h;
  for (const auto& kv : r.response_headers_to_add()) h[kv.key()] = kv.value();
  EXPECT_EQ(h["RateLimit-Limit"], "10");
  EXPECT_EQ(h["RateLimit-Remaining"], "9");
  EXPECT_GE(std::stoi(h["RateLimit-Reset"]), 1);
  EXPECT_LE(std::stoi(h["RateLimit-Reset"]), 60);
}

// 200 asynchronous RPCs in flight at once on one descriptor at 10 per minute.
void exactly_ten_of_200(Rig& rig, const std::string& user) {
  const CallCounts c = concurrent_calls({rig.stub.get()}, make_request("test", {{{"user", user}}}), 200);
  EXPECT_EQ(c.ok, 10);
  EXPECT_EQ(c.over, 190);
  EXPECT_EQ(c.failed, 0);
}

TEST(GrpcServer, ExactlyTenOf200ConcurrentOnTheMemoryStore) {
  Rig rig(std::make_shared<MemoryStore>());
  exactly_ten_of_200(rig, "hot");
}

std::shared_ptr<RedisStore> redis_store() {
  auto url = ratelimit::testing::shared_test_redis_url();
  EXPECT_TRUE(url.ok()) << url.status().to_string();
  RedisStoreOptions o;
  o.url = url.ok() ? *url : "";
  o.connections = 2;
  o.command_timeout = std::chrono::milliseconds(2000);
  o.key_prefix = "rltest:grpc:" + std::to_string(std::random_device{}()) + ":";
  auto s = RedisStore::connect(o);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? *s : nullptr;
}

TEST(GrpcServer, RedisStoreAnswersAlikeAndExactly) {
  auto store = redis_store();
  ASSERT_NE(store, nullptr);
  Rig rig(store);
  check_envoy_answers(rig, "bob");
  exactly_ten_of_200(rig, "hot");
}

}  // namespace
}  // namespace ratelimit::grpc_api
