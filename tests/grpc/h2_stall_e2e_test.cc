// h2_stall_e2e_test.cc — what an HTTP/2 client that never opens its flow-control windows can
// make the real ratelimitd hold (issue 33, finding 2): the client sends
// SETTINGS_INITIAL_WINDOW_SIZE = 0 and many requests and never a WINDOW_UPDATE, so every answer
// past its head waits for a window that never comes. Each such stream is reset (RST_STREAM
// CANCEL) once its answer could not be written within limits.request_timeout, the connection
// whose every stream is stalled is closed (GOAWAY), and the bytes held meanwhile are counted at
// /metrics — on the HTTP port (h2c) and on the gRPC port alike. A client that does read is served
// on. The held-bytes cap itself is tested in memory (tests/h2/session_test.cc).
// The same for a long-lived RLQS stream (StreamRateLimitQuotas, issue 29's "streams that never
// read"): an Envoy that keeps reporting but never reads its answers gets its stream reset, while
// another Envoy's stream is answered all along.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "daemon.h"
#include "h2_client.h"
#include "rlqs_client.h"
#include "rls_client.h"
#include "rls_daemon.h"

namespace ratelimit::grpc_api {
namespace {

using namespace ratelimit::grpc_test;  // NOLINT: the shared test client
using h2::testing::SocketClient;

const std::string kYaml = R"(grpc_listen: 127.0.0.1:0
store: { type: memory }
limits: { request_timeout: 1s, idle_timeout: 60s }
policies:
  five: { algorithm: fixed_window, limit: 5, window: 1m }
domains:
  - domain: edge
    descriptors:
      - key: user
        rate_limit: { unit: minute, requests_per_unit: 1000, name: per_user }
rlqs:
  buckets:
    - match: {name: api}
      limit: 300
      unit: second
)";

// The client announces a stream window of 0 before its first request: no DATA can reach it.
void close_the_windows(SocketClient& c) {
  const nghttp2_settings_entry iv[] = {{NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 0}};
  ASSERT_EQ(nghttp2_submit_settings(c.client.ng(), NGHTTP2_FLAG_NONE, iv, 1), 0);
}

// A gRPC ShouldRateLimit call's body (one length-prefixed message).
std::string should_rate_limit_body() {
  const std::string m = make_request("edge", {{{"user", "u"}}}).SerializeAsString();
  std::string framed(5, '\0');
  framed[4] = static_cast<char>(m.size());
  return framed + m;
}

// The value of an unlabelled sample in Prometheus text; -1 when absent.
double sample(const std::string& text, const std::string& name) {
  const size_t at = text.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + name.size() + 2));
}

// Sends `n` requests with the windows closed and waits for what the server does about them:
// every stream's head arrives (the answer was ready), then every stream is reset and the
// connection gets GOAWAY and is closed — within a few request_timeouts, not never.
void expect_stalled_streams_reset_then_goaway(SocketClient& c, const std::vector<int32_t>& ids) {
  const auto all = [&](auto pred) { return std::all_of(ids.begin(), ids.end(), pred); };
  ASSERT_TRUE(c.until([&](){ return all([&](int32_t id) { return c.client.responses[id].headers.contains(":status"); }); },
                      std::chrono::seconds(10)))
      << "every answer's head is sent (heads are not flow-controlled)";
  ASSERT_TRUE(c.until([&] { return all([&](int32_t id) { return c.client.responses[id].closed; }); },
                      std::chrono::seconds(10)))
      << "streams whose answers the peer's window holds are never reset: "
      << std::count_if(ids.begin(), ids.end(), [&](int32_t id) { return c.client.responses[id].closed; })
      << " closed";
  for (int32_t id : ids) {
    EXPECT_TRUE(c.client.responses[id].reset) << "stream " << id;
    EXPECT_EQ(c.client.responses[id].reset_code, static_cast<uint32_t>(NGHTTP2_CANCEL)) << "stream " << id;
    EXPECT_TRUE(c.client.responses[id].body.empty()) << "no DATA through a closed window";
  }
  ASSERT_TRUE(c.until([&] { return !c.client.goaways.empty(); }, std::chrono::seconds(10)))
      << "a connection whose every stream is stalled gets no GOAWAY";
  EXPECT_EQ(c.client.goaways.back(), static_cast<uint32_t>(NGHTTP2_NO_ERROR));
  EXPECT_TRUE(c.until([] { return false; }, std::chrono::seconds(5)) || c.eof);
  EXPECT_TRUE(c.eof) << "and is closed";
}

TEST(H2Stall, StalledStreamsOnTheHttpPortAreResetAndTheConnectionClosed) {
  Server s;
  ASSERT_TRUE(s.start(kYaml));
  const uint16_t port = s.daemon.port();
  std::vector<std::unique_ptr<SocketClient>> conns;
  std::vector<std::vector<int32_t>> ids(3);
  for (auto& stream_ids : ids) {
    conns.push_back(std::make_unique<SocketClient>(port));
    close_the_windows(*conns.back());
    for (int i = 0; i < 100; ++i) stream_ids.push_back(conns.back()->client.request("/metrics", {}, "", false, "GET"));
    conns.back()->flush();
  }
  // While they are stalled the held bytes are counted.
  ASSERT_TRUE(conns[0]->until([&] { return conns[0]->client.responses[ids[0].back()].headers.contains(":status"); }));
  const std::string during = e2e::http_get(port, "/metrics").body;
  EXPECT_GT(sample(during, "ratelimitd_h2_held_bytes"), 0) << during.substr(0, 2000);
  for (size_t i = 0; i < conns.size(); ++i) expect_stalled_streams_reset_then_goaway(*conns[i], ids[i]);
  const std::string after = e2e::http_get(port, "/metrics").body;
  EXPECT_EQ(sample(after, "ratelimitd_h2_held_bytes"), 0) << "released with the streams";
  // 100 answers of /metrics (~10 KiB each) are more than a connection may hold (256 KiB): the
  // largest are reset at once, the rest when request_timeout passed.
  EXPECT_GT(sample(after, "ratelimitd_h2_held_streams_reset_total"), 0);
  EXPECT_GT(sample(after, "ratelimitd_h2_stalled_streams_reset_total"), 0);
  EXPECT_EQ(sample(after, "ratelimitd_h2_held_streams_reset_total") +
                sample(after, "ratelimitd_h2_stalled_streams_reset_total"),
            300);
  EXPECT_GE(sample(after, "ratelimitd_h2_stalled_connections_closed_total"), 3);
  // Served on, over HTTP/1.1 and over h2c with open windows.
  EXPECT_EQ(e2e::http_post(port, "/v1/acquire", R"({"key":"k","policy":"five"})").status, 200U);
  SocketClient ok(port);
  const int32_t id = ok.client.request("/metrics", {}, "", false, "GET");
  ASSERT_TRUE(ok.until([&] { return ok.client.responses[id].closed; }));
  EXPECT_FALSE(ok.client.responses[id].reset);
  EXPECT_NE(ok.client.responses[id].body.find("ratelimitd_h2_held_bytes"), std::string::npos);
}

TEST(H2Stall, StalledCallsOnTheGrpcPortAreResetAndTheConnectionClosed) {
  Server s;
  ASSERT_TRUE(s.start(kYaml));
  SocketClient c(s.grpc_port);
  close_the_windows(c);
  const std::vector<std::pair<std::string, std::string>> grpc = {{"content-type", "application/grpc"}, {"te", "trailers"}};
  std::vector<int32_t> ids;
  for (int i = 0; i < 100; ++i) {
    ids.push_back(c.client.request("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", grpc,
                                   should_rate_limit_body()));
  }
  expect_stalled_streams_reset_then_goaway(c, ids);
  // The daemon serves on, on the gRPC port too.
  ::grpc::ClientContext ctx;
  RateLimitResponse r;
  EXPECT_TRUE(s.stub->ShouldRateLimit(&ctx, make_request("edge", {{{"user", "u"}}}), &r).ok());
}

// One RLQS report as a gRPC message on the wire (uncompressed, length-prefixed).
std::string rlqs_report_frame(bool first) {
  rlqs_test::RateLimitQuotaUsageReports r;
  if (first) r.set_domain("envoy");
  auto& usage = (*r.mutable_bucket_quota_usages())[1];
  rlqs_test::set_bucket(usage.mutable_bucket_id(), {{"name", "api"}});
  if (!first) {
    usage.set_num_requests_allowed(100);
    usage.mutable_time_elapsed()->set_seconds(1);
  }
  const std::string m = r.SerializeAsString();
  std::string framed(5, '\0');
  framed[3] = static_cast<char>(m.size() >> 8);
  framed[4] = static_cast<char>(m.size() & 0xff);
  return framed + m;
}

TEST(H2Stall, AnRlqsStreamThatNeverReadsIsResetWhileOthersAreAnswered) {
  Server s;
  ASSERT_TRUE(s.start(kYaml));
  SocketClient c(s.grpc_port);
  close_the_windows(c);
  const std::vector<std::pair<std::string, std::string>> grpc = {{"content-type", "application/grpc"}, {"te", "trailers"}};
  const int32_t id = c.client.request("/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas",
                                      grpc, rlqs_report_frame(true), /*keep_open=*/true);
  c.flush();
  rlqs_test::Envoy reader(s.channel, {{"name", "api"}}, 50);
  ASSERT_TRUE(reader.report());
  // The silent Envoy keeps reporting (its reports reach the server: only answers are held) while
  // the other reports and reads; every answer of the other arrives.
  for (int i = 0; i < 20 && !c.client.responses[id].closed; ++i) {
    c.client.send_more(id, rlqs_report_frame(false));
    c.flush();
    c.until([] { return false; }, std::chrono::milliseconds(100));
    ASSERT_TRUE(reader.report()) << "report " << i << " of the reading Envoy";
  }
  ASSERT_TRUE(c.until([&] { return c.client.responses[id].closed; }, std::chrono::seconds(10)))
      << "a stream whose answers wait on a window that never opens is never reset";
  EXPECT_TRUE(c.client.responses[id].reset);
  EXPECT_EQ(c.client.responses[id].reset_code, static_cast<uint32_t>(NGHTTP2_CANCEL));
  EXPECT_TRUE(c.client.responses[id].body.empty()) << "no DATA through a closed window";
  const std::string after = e2e::http_get(s.daemon.port(), "/metrics").body;
  EXPECT_EQ(sample(after, "ratelimitd_h2_held_bytes"), 0) << "released with the stream";
  EXPECT_GE(sample(after, "ratelimitd_h2_stalled_streams_reset_total"), 1);
  // Served on: the reading Envoy's stream is still answered, with a share of the bucket.
  ASSERT_TRUE(reader.report());
  EXPECT_GT(reader.rate, 0);
}

}  // namespace
}  // namespace ratelimit::grpc_api
