// h2c_e2e_test.cc — the real ratelimitd serving HTTP/1.1 and h2c (prior knowledge) on ONE
// port (src/server/h2c.h): POST /v1/acquire as HTTP/2 streams on one connection (statuses,
// lower-case RateLimit fields, JSON bodies, exactly the limit admitted), gRPC ShouldRateLimit
// and Health on the HTTP port with a libgrpc++ channel, the body and header limits (413, 431),
// HTTP/1.1 still answered beside it, and a drain (SIGTERM) that answers GOAWAY. What an h2c
// connection cannot hold: a silent one is closed (GOAWAY first) by the worker's idle sweep, a
// half-open stream is reset — and the daemon serves on.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <csignal>

#include "daemon.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "h2_client.h"
#include "rls_client.h"

namespace ratelimit::grpc_api {
namespace {

using namespace ratelimit::grpc_test;  // NOLINT: the shared test client
using h2::testing::SocketClient;

constexpr const char* kYaml = R"(grpc_listen: 127.0.0.1:0
store: { type: memory }
limits: { max_body_bytes: 1024, max_header_bytes: 4096 }
policies:
  five: { algorithm: fixed_window, limit: 5, window: 1m }
domains:
  - domain: edge
    descriptors:
      - key: user
        rate_limit: { unit: minute, requests_per_unit: 3, name: per_user }
)";

const std::vector<std::pair<std::string, std::string>> kJson = {{"content-type", "application/json"}};

// Short timeouts, so the sweep's deadlines are seen within a test.
constexpr const char* kShortTimeouts = R"(grpc_listen: 127.0.0.1:0
store: { type: memory }
limits: { idle_timeout: 1s, request_timeout: 1s }
policies:
  five: { algorithm: fixed_window, limit: 5, window: 1m }
domains:
  - domain: edge
    descriptors:
      - key: user
        rate_limit: { unit: minute, requests_per_unit: 3, name: per_user }
)";

TEST(H2cE2e, AcquireAsStreamsOnOneConnectionBesideHttp1) {
  e2e::Daemon d;
  ASSERT_TRUE(d.start(kYaml)) << d.log();
  SocketClient c(d.port());
  std::vector<int32_t> ids;
  for (int i = 0; i < 7; ++i) ids.push_back(c.client.request("/v1/acquire", kJson, R"({"key":"k","policy":"five"})"));
  ASSERT_TRUE(c.until([&] {
    for (int32_t id : ids) {
      if (!c.client.responses[id].closed) return false;
    }
    return true;
  }));
  int ok = 0, denied = 0;
  for (int32_t id : ids) {
    auto& r = c.client.responses[id];
    if (r.headers[":status"] == "200") ++ok;
    if (r.headers[":status"] == "429") ++denied;
    EXPECT_EQ(r.headers["content-type"], "application/json");
    EXPECT_TRUE(r.headers.contains("ratelimit-policy")) << "RateLimit fields, lower case";
    EXPECT_EQ(r.body.front(), '{');
  }
  EXPECT_EQ(ok, 5);
  EXPECT_EQ(denied, 2);
  // HTTP/1.1 on the same port, same counter.
  EXPECT_EQ(e2e::http_post(d.port(), "/v1/acquire", R"({"key":"k","policy":"five"})").status, 429U);
  EXPECT_EQ(e2e::http_get(d.port(), "/healthz").status, 200U);
  // GET over h2c, and a path no route has.
  const int32_t health = c.client.request("/healthz", {}, "", false, "GET");
  const int32_t missing = c.client.request("/nope", {}, "", false, "GET");
  ASSERT_TRUE(c.until([&] { return c.client.responses[health].closed && c.client.responses[missing].closed; }));
  EXPECT_EQ(c.client.responses[health].headers[":status"], "200");
  EXPECT_EQ(c.client.responses[missing].headers[":status"], "404");
}

TEST(H2cE2e, BodyAndHeaderLimitsAnswerPerStream) {
  e2e::Daemon d;
  ASSERT_TRUE(d.start(kYaml)) << d.log();
  SocketClient c(d.port());
  const int32_t big_body = c.client.request("/v1/acquire", kJson, std::string(2000, ' '));
  auto big = kJson;
  big.emplace_back("x-filler", std::string(6000, 'f'));
  const int32_t big_head = c.client.request("/v1/acquire", big, R"({"key":"h","policy":"five"})");
  const int32_t fine = c.client.request("/v1/acquire", kJson, R"({"key":"h","policy":"five"})");
  ASSERT_TRUE(c.until([&] {
    return c.client.responses[big_body].closed && c.client.responses[big_head].closed && c.client.responses[fine].closed;
  }));
  EXPECT_EQ(c.client.responses[big_body].headers[":status"], "413");
  EXPECT_EQ(c.client.responses[big_head].headers[":status"], "431");
  EXPECT_EQ(c.client.responses[fine].headers[":status"], "200");
  EXPECT_NE(c.client.responses[fine].headers["ratelimit-policy"].find("q=5"), std::string::npos);
}

TEST(H2cE2e, GrpcOnTheHttpPort) {
  e2e::Daemon d;
  ASSERT_TRUE(d.start(kYaml)) << d.log();
  auto channel = ::grpc::CreateChannel("127.0.0.1:" + std::to_string(d.port()), ::grpc::InsecureChannelCredentials());
  auto stub = RateLimitService::NewStub(channel);
  RateLimitResponse r;
  for (uint32_t left : {2U, 1U, 0U}) {
    ::grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    const ::grpc::Status st = stub->ShouldRateLimit(&ctx, make_request("edge", {{{"user", "u"}}}), &r);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(r.overall_code(), RateLimitResponse::OK);
    EXPECT_EQ(r.statuses(0).limit_remaining(), left);
  }
  ::grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  ASSERT_TRUE(stub->ShouldRateLimit(&ctx, make_request("edge", {{{"user", "u"}}}), &r).ok());
  EXPECT_EQ(r.overall_code(), RateLimitResponse::OVER_LIMIT);
  auto health = ::grpc::health::v1::Health::NewStub(channel);
  ::grpc::ClientContext hctx;
  hctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  ::grpc::health::v1::HealthCheckRequest req;
  req.set_service("ratelimit");
  ::grpc::health::v1::HealthCheckResponse resp;
  ASSERT_TRUE(health->Check(&hctx, req, &resp).ok());
  EXPECT_EQ(resp.status(), ::grpc::health::v1::HealthCheckResponse::SERVING);
}

TEST(H2cE2e, DrainSendsGoawayAndExits) {
  e2e::Daemon d;
  ASSERT_TRUE(d.start(kYaml)) << d.log();
  SocketClient c(d.port());
  const int32_t first = c.client.request("/v1/acquire", kJson, R"({"key":"g","policy":"five"})");
  ASSERT_TRUE(c.until([&] { return c.client.responses[first].closed; }));
  d.signal(SIGTERM);
  ASSERT_TRUE(c.until([&] { return !c.client.goaways.empty(); }, std::chrono::seconds(10)));
  EXPECT_EQ(c.client.goaways.back(), static_cast<uint32_t>(NGHTTP2_NO_ERROR));
  EXPECT_TRUE(c.until([] { return false; }, std::chrono::seconds(5)) || c.eof);
  EXPECT_TRUE(c.eof) << "the connection closes once drained";
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(10)), 0);
}

// An h2c connection that sends its preface and SETTINGS and then nothing is closed by the
// worker's idle sweep (the one HTTP/1.1 uses) after limits.idle_timeout, with GOAWAY(NO_ERROR)
// first — not before the timeout, and not never.
TEST(H2cE2e, ASilentConnectionGetsGoawayAndIsClosedAfterTheIdleTimeout) {
  e2e::Daemon d;
  ASSERT_TRUE(d.start(kShortTimeouts)) << d.log();
  const auto t0 = std::chrono::steady_clock::now();
  SocketClient c(d.port());
  ASSERT_TRUE(c.until([&] { return !c.client.goaways.empty(); }, std::chrono::seconds(10)))
      << "no GOAWAY within 10 s of an idle_timeout of 1 s";
  const auto waited = std::chrono::steady_clock::now() - t0;
  EXPECT_EQ(c.client.goaways.back(), static_cast<uint32_t>(NGHTTP2_NO_ERROR));
  EXPECT_GE(waited, std::chrono::milliseconds(900)) << "closed before the idle timeout";
  EXPECT_TRUE(c.until([] { return false; }, std::chrono::seconds(5)) || c.eof);
  EXPECT_TRUE(c.eof) << "the connection is closed after its GOAWAY";
  EXPECT_EQ(e2e::http_get(d.port(), "/healthz").status, 200U);
}

// A stream whose request never ends (HEADERS without END_STREAM, a partial body, then silence)
// is reset with CANCEL after limits.request_timeout; nothing was decided; the connection still
// serves, and once it is idle it is closed like any other.
TEST(H2cE2e, AHalfOpenStreamIsResetThenTheIdleConnectionClosed) {
  e2e::Daemon d;
  ASSERT_TRUE(d.start(kShortTimeouts)) << d.log();
  SocketClient c(d.port());
  const int32_t open = c.client.request("/v1/acquire", kJson, R"({"key":"half",)", true);
  ASSERT_TRUE(c.until([&] { return c.client.responses[open].closed; }, std::chrono::seconds(10)));
  EXPECT_TRUE(c.client.responses[open].reset);
  EXPECT_EQ(c.client.responses[open].reset_code, static_cast<uint32_t>(NGHTTP2_CANCEL));
  const int32_t next = c.client.request("/v1/acquire", kJson, R"({"key":"half","policy":"five"})");
  ASSERT_TRUE(c.until([&] { return c.client.responses[next].closed; }));
  EXPECT_EQ(c.client.responses[next].headers[":status"], "200");
  EXPECT_NE(c.client.responses[next].headers["ratelimit"].find(";r=4;"), std::string::npos)
      << "the half-open stream counted nothing: " << c.client.responses[next].headers["ratelimit"];
  ASSERT_TRUE(c.until([&] { return !c.client.goaways.empty(); }, std::chrono::seconds(10)));
  EXPECT_TRUE(c.until([] { return false; }, std::chrono::seconds(5)) || c.eof);
  EXPECT_TRUE(c.eof);
}

}  // namespace
}  // namespace ratelimit::grpc_api
