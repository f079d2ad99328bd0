// health_watch_e2e_test.cc — grpc.health.v1.Health/Watch on the real ratelimitd, asked by a
// libgrpc++ client as a Kubernetes gRPC probe or Envoy's health checker would: the current
// status at once, a new message on each change of readiness (the store lost and back, the
// drain), nothing in between, and the stream ended (UNAVAILABLE) when the server stops — on
// the dedicated gRPC listener and on the HTTP port's h2c alike.
// The store outage is a real one: this test's own redis-server, killed and restarted by pid.
// Every wait is bounded: each Watch carries a 30 s deadline, so a message that never comes
// fails the test instead of hanging it.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <csignal>
#include <memory>
#include <string>

#include "grpc/health/v1/health.grpc.pb.h"
#include "redis_server.h"
#include "rls_daemon.h"

namespace ratelimit::grpc_api {
namespace {

using namespace ratelimit::grpc_test;  // NOLINT: the shared test client
using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

std::string yaml(const std::string& store) {
  return "store: " + store + R"(
grpc_listen: 127.0.0.1:0
domains:
  - domain: edge
    descriptors:
      - key: user
        rate_limit: { unit: minute, requests_per_unit: 3 }
)";
}

// One Watch call: its context (30 s deadline), its reader, the status of the last message.
struct Watch {
  Watch(const std::shared_ptr<::grpc::Channel>& channel, const std::string& service) {
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    HealthCheckRequest req;
    req.set_service(service);
    stub = Health::NewStub(channel);
    reader = stub->Watch(&ctx, req);
  }
  // The next message's status; -1 when the stream ended (or the deadline passed).
  int next() {
    HealthCheckResponse r;
    return reader->Read(&r) ? static_cast<int>(r.status()) : -1;
  }
  ::grpc::ClientContext ctx;
  std::unique_ptr<Health::Stub> stub;
  std::unique_ptr<::grpc::ClientReader<HealthCheckResponse>> reader;
};

int check(const std::shared_ptr<::grpc::Channel>& channel) {
  ::grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  HealthCheckRequest req;
  req.set_service("ratelimit");
  HealthCheckResponse r;
  const ::grpc::Status st = Health::NewStub(channel)->Check(&ctx, req, &r);
  return st.ok() ? static_cast<int>(r.status()) : -1;
}

constexpr int kServing = HealthCheckResponse::SERVING;
constexpr int kNotServing = HealthCheckResponse::NOT_SERVING;

TEST(HealthWatchE2e, OnTheHttpPortTheDrainIsStreamedThenTheWatchEnds) {
  Server s;
  ASSERT_TRUE(s.start(yaml("{ type: memory }")));
  auto h2c = ::grpc::CreateChannel("127.0.0.1:" + std::to_string(s.daemon.port()), ::grpc::InsecureChannelCredentials());
  Watch w(h2c, "ratelimit");
  ASSERT_EQ(w.next(), kServing) << "the current status at once";
  s.daemon.signal(SIGTERM);
  EXPECT_EQ(w.next(), kNotServing) << "the drain, streamed";
  EXPECT_EQ(w.next(), -1) << "then the stream ends";
  const ::grpc::Status end = w.reader->Finish();
  EXPECT_EQ(end.error_code(), ::grpc::StatusCode::UNAVAILABLE) << end.error_message();
  EXPECT_EQ(s.daemon.wait_exit(std::chrono::seconds(15)), 0) << s.daemon.log();
}

TEST(HealthWatchE2e, FollowsTheStoreOutageOnBothPortsAndEndsAtShutdown) {
  ratelimit::testing::RedisServer redis;
  ASSERT_TRUE(redis.start().is_ok());
  Server s;
  ASSERT_TRUE(s.start(yaml("{ type: redis, url: \"redis://127.0.0.1:" + std::to_string(redis.port()) +
                           "\", command_timeout: 1s, on_failure: open }")));
  auto h2c = ::grpc::CreateChannel("127.0.0.1:" + std::to_string(s.daemon.port()), ::grpc::InsecureChannelCredentials());
  Watch grpc_port(s.channel, "ratelimit");
  Watch http_port(h2c, "envoy.service.ratelimit.v3.RateLimitService");
  Watch overall(s.channel, "");
  ASSERT_EQ(grpc_port.next(), kServing);
  ASSERT_EQ(http_port.next(), kServing);
  ASSERT_EQ(overall.next(), kServing);

  redis.kill();
  EXPECT_EQ(grpc_port.next(), kNotServing) << "the store outage, streamed";
  EXPECT_EQ(http_port.next(), kNotServing);
  EXPECT_EQ(overall.next(), kNotServing);
  EXPECT_EQ(check(s.channel), kNotServing) << "Check agrees with Watch (and /readyz)";

  ASSERT_TRUE(redis.restart().is_ok());
  // One message per change: the next one is SERVING, with no repeat of NOT_SERVING between.
  EXPECT_EQ(grpc_port.next(), kServing) << "the store is back";
  EXPECT_EQ(http_port.next(), kServing);
  EXPECT_EQ(overall.next(), kServing);
  EXPECT_EQ(check(h2c), kServing);

  s.daemon.signal(SIGTERM);
  for (Watch* w : {&grpc_port, &http_port, &overall}) {
    EXPECT_EQ(w->next(), kNotServing) << "the drain, streamed";
    EXPECT_EQ(w->next(), -1) << "then the stream ends";
    EXPECT_EQ(w->reader->Finish().error_code(), ::grpc::StatusCode::UNAVAILABLE);
  }
  EXPECT_EQ(s.daemon.wait_exit(std::chrono::seconds(15)), 0) << s.daemon.log();
}

}  // namespace
}  // namespace ratelimit::grpc_api
