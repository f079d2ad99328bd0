// h2c_e2e_test.cc — the real ratelimitd serving HTTP/1.1 and h2c (prior knowledge) on ONE
// port (src/server/h2c.h): POST /v1/acquire as HTTP/2 streams on one connection (statuses,
// lower-case RateLimit fields, JSON bodies, exactly the limit admitted), gRPC ShouldRateLimit
// and Health on the HTTP port with a libgrpc++ channel, the body and header limits (413, 431),
// HTTP/1.1 still answered beside it, and a drain (SIGTERM) that answers GOAWAY. What an h2c
// connection cannot hold: a silent one is closed (GOAWAY first) by the worker's idle sweep, a
// half-open stream is reset, a Watch flood stops at the stream cap, a rapid-reset flood
// (CVE-2023-44487) ends in GOAWAY — and the daemon serves on. The gRPC port (grpc_listen) is a
// listener of the same workers: its connections count in limits.max_connections. A waiting
// request (max_wait) whose stream is reset, or whose connection closes, leaves its queue and
// costs nothing.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <memory>
#include <optional>
#include <thread>

#include "daemon.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "h2_client.h"
#include "rls_client.h"
#include "rls_daemon.h"

namespace ratelimit::grpc_api {
namespace {

using namespace ratelimit::grpc_test;  // NOLINT: the shared test client
using h2::testing::SocketClient;

// One configuration; `limits` differ between the tests.
std::string config(const std::string& limits) {
  return R"(grpc_listen: 127.0.0.1:0
store: { type: memory }
limits: )" + limits + R"(
policies:
  five: { algorithm: fixed_window, limit: 5, window: 1m }
domains:
  - domain: edge
    descriptors:
      - key: user
        rate_limit: { unit: minute, requests_per_unit: 3, name: per_user }
)";
}
const std::string kYaml = config("{ max_body_bytes: 1024, max_header_bytes: 4096 }");

const std::vector<std::pair<std::string, std::string>> kJson = {{"content-type", "application/json"}};

// Short timeouts, so the sweep's deadlines are seen within a test.
const std::string kShortTimeouts = config("{ idle_timeout: 1s, request_timeout: 1s }");

// Frames received (raw bytes after the server's first frame): the first one of `type` on
// `stream`, as its payload; nullopt when there is none. The client session cannot report
// frames about streams it never opened (the raw ones these tests send).
std::optional<std::string> find_frame(const std::string& raw, uint8_t type, uint32_t stream) {
  for (size_t i = 0; i + 9 <= raw.size();) {
    const auto* p = reinterpret_cast<const unsigned char*>(raw.data() + i);
    const size_t len = size_t{p[0]} << 16 | size_t{p[1]} << 8 | p[2];
    const uint32_t id = (uint32_t{p[5]} << 24 | uint32_t{p[6]} << 16 | uint32_t{p[7]} << 8 | p[8]) & 0x7fffffffU;
    if (i + 9 + len > raw.size()) break;
    if (p[3] == type && id == stream) return raw.substr(i + 9, len);
    i += 9 + len;
  }
  return std::nullopt;
}
std::string frame_head(size_t len, uint8_t type, uint8_t flags, uint32_t stream) {
  const char h[9] = {static_cast<char>(len >> 16), static_cast<char>(len >> 8), static_cast<char>(len),
                     static_cast<char>(type), static_cast<char>(flags), static_cast<char>(stream >> 24),
                     static_cast<char>(stream >> 16), static_cast<char>(stream >> 8), static_cast<char>(stream)};
  return std::string(h, 9);
}
// A request HEADERS frame, END_HEADERS and not END_STREAM (the request goes on): :method POST,
// :scheme http, :path /, :authority a — static-table HPACK, so no encoder state is involved.
std::string open_stream(uint32_t id) {
  const std::string block("\x83\x86\x84\x41\x01" "a", 6);
  return frame_head(block.size(), 0x1, 0x4, id) + block;
}
std::string rst_stream(uint32_t id, uint32_t code) {
  const char c[4] = {static_cast<char>(code >> 24), static_cast<char>(code >> 16), static_cast<char>(code >> 8),
                     static_cast<char>(code)};
  return frame_head(4, 0x3, 0, id) + std::string(c, 4);
}

TEST(H2cE2e, AcquireAsStreamsOnOneConnectionBesideHttp1) {
  e2e::Daemon d;
  // "five" is a 60 s fixed window aligned to the clock's minute; the test takes well under a
  // second and starts with 5 s of the minute left (else a boundary gives its units back).
  testing::await_window_room(std::chrono::seconds(60), std::chrono::seconds(5));
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

// A waiting request whose h2c stream ends before its answer — reset by the client (RST_STREAM),
// or with its whole connection closed — leaves the queue and costs nothing: no lease taken,
// nothing counted; the lease freed later goes to nobody. The connection that reset one stream
// serves the next.
const std::string kWaitYaml = R"(store: { type: memory }
policies:
  db: { algorithm: concurrency, limit: 1, lease_ttl: 60s, max_wait: 20s, max_queue: 10 }
)";

// The body of every request these tests send: key k of policy db.
const std::string kDbOnK = R"({"key":"k","policy":"db"})";

// Starts `d` on kWaitYaml and takes db's one lease over HTTP/1.1, so that the next request for it
// waits; `holder` is that lease's id.
void start_with_the_lease_held(e2e::Daemon& d, std::string& holder) {
  ASSERT_TRUE(d.start(kWaitYaml)) << d.log();
  holder = e2e::lease_id(e2e::http_post(d.port(), "/v1/leases", kDbOnK));
  ASSERT_FALSE(holder.empty());
}

void expect_the_gone_waiter_cost_nothing(e2e::Daemon& d, const std::string& holder, int64_t cancelled) {
  ASSERT_TRUE(e2e::wait_metric(d.port(), "ratelimitd_wait_cancelled_total", cancelled)) << "the server saw the stream go";
  EXPECT_EQ(e2e::metric_value(d.port(), "ratelimitd_wait_waiting"), 0);
  e2e::Reply r;
  {
    e2e::Client c(d.port());
    r = c.request("DELETE", "/v1/leases/" + holder);
  }
  ASSERT_EQ(r.status, 200U);
  EXPECT_EQ(e2e::http_post(d.port(), "/v1/peek", kDbOnK).json().at("remaining").as_int64(), 1)
      << "the gone waiter must not have taken the freed lease";
  const std::string m = e2e::http_get(d.port(), "/metrics").body;
  EXPECT_NE(m.find("ratelimitd_decisions_total{policy=\"db\",outcome=\"allowed\"} 1\n"), std::string::npos) << m;
  EXPECT_NE(m.find("ratelimitd_decisions_total{policy=\"db\",outcome=\"denied\"} 0\n"), std::string::npos)
      << "a waiter that left is not counted as denied\n" << m;
  EXPECT_EQ(e2e::metric_value(d.port(), "ratelimitd_wait_admitted_total"), 0);
}

TEST(H2cE2e, AWaitingStreamResetByTheClientLeavesTheQueue) {
  e2e::Daemon d;
  std::string holder;
  ASSERT_NO_FATAL_FAILURE(start_with_the_lease_held(d, holder));
  SocketClient c(d.port());
  const int32_t id = c.client.request("/v1/leases", kJson, kDbOnK);
  c.flush();
  ASSERT_TRUE(e2e::wait_metric(d.port(), "ratelimitd_wait_queued_total", 1));
  nghttp2_submit_rst_stream(c.client.ng(), NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  c.flush();
  expect_the_gone_waiter_cost_nothing(d, holder, 1);
  const int32_t next = c.client.request("/v1/peek", kJson, kDbOnK);
  ASSERT_TRUE(c.until([&] { return c.client.responses[next].closed; }));
  EXPECT_EQ(c.client.responses[next].headers[":status"], "200") << "the connection serves on";
  EXPECT_FALSE(c.client.responses[id].headers.contains(":status")) << "no answer on the reset stream";
}

TEST(H2cE2e, AWaitingStreamWhoseConnectionClosesLeavesTheQueue) {
  e2e::Daemon d;
  std::string holder;
  ASSERT_NO_FATAL_FAILURE(start_with_the_lease_held(d, holder));
  {
    SocketClient c(d.port());
    c.client.request("/v1/leases", kJson, kDbOnK);
    c.client.request("/v1/leases", kJson, kDbOnK);
    c.flush();
    ASSERT_TRUE(e2e::wait_metric(d.port(), "ratelimitd_wait_queued_total", 2));
  }  // the client closes its socket with two streams waiting
  expect_the_gone_waiter_cost_nothing(d, holder, 2);
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
  // per_user counts in the clock's minute (as above): 5 s of it left for these four calls.
  testing::await_window_room(std::chrono::seconds(60), std::chrono::seconds(5));
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

std::string health_watch_body() {
  ::grpc::health::v1::HealthCheckRequest req;
  req.set_service("ratelimit");
  const std::string m = req.SerializeAsString();
  return std::string(1, '\0') + std::string(1, '\0') + std::string(1, '\0') + std::string(1, '\0') +
         std::string(1, static_cast<char>(m.size())) + m;
}

// Watches hold streams like any call: 100 (SETTINGS_MAX_CONCURRENT_STREAMS) stay open, each
// with its SERVING message; a 101st waits (the client honours the limit) until one is
// cancelled, then is answered. A client that forces a stream past the limit it acknowledged
// loses the connection: GOAWAY(PROTOCOL_ERROR) (nghttp2's answer; before the SETTINGS ACK it
// is REFUSED_STREAM per stream, tests/h2). The daemon serves on.
TEST(H2cE2e, WatchesCountAgainstTheStreamCap) {
  e2e::Daemon d;
  ASSERT_TRUE(d.start(kYaml)) << d.log();
  SocketClient c(d.port());
  const std::vector<std::pair<std::string, std::string>> grpc = {{"content-type", "application/grpc"}, {"te", "trailers"}};
  const auto watch = [&] { return c.client.request("/grpc.health.v1.Health/Watch", grpc, health_watch_body()); };
  const auto watching = [&](int32_t id) { return c.client.responses[id].body.size() >= 5; };  // a message came
  std::vector<int32_t> ids;
  for (int i = 0; i < 100; ++i) ids.push_back(watch());
  ASSERT_TRUE(c.until([&] { return std::all_of(ids.begin(), ids.end(), watching); }, std::chrono::seconds(10)));
  for (int32_t id : ids) EXPECT_FALSE(c.client.responses[id].closed) << "a Watch stays open";
  const int32_t extra = watch();
  EXPECT_FALSE(c.until([&] { return watching(extra); }, std::chrono::milliseconds(300))) << "beyond the cap";
  nghttp2_submit_rst_stream(c.client.ng(), NGHTTP2_FLAG_NONE, ids[0], NGHTTP2_CANCEL);
  ASSERT_TRUE(c.until([&] { return watching(extra); }, std::chrono::seconds(10))) << "a cancelled Watch frees its stream";
  EXPECT_TRUE(c.client.goaways.empty());
  c.send(open_stream(999));  // past every id the client session used, and past the cap
  ASSERT_TRUE(c.until([&] { return !c.client.goaways.empty(); }, std::chrono::seconds(10)));
  EXPECT_EQ(c.client.goaways.back(), static_cast<uint32_t>(NGHTTP2_PROTOCOL_ERROR));
  EXPECT_EQ(e2e::http_get(d.port(), "/healthz").status, 200U);
}

// Rapid reset (CVE-2023-44487): streams opened and reset at once, in one write. Debian's
// nghttp2 allows a burst of 1000 resets, then 33/s: 400 leave the connection serving (a PING is
// answered), 2000 more end it with GOAWAY(INTERNAL_ERROR), nghttp2's answer to the flood. None
// of the streams is decided; other connections are served.
TEST(H2cE2e, ARapidResetFloodEndsInGoaway) {
  e2e::Daemon d;
  ASSERT_TRUE(d.start(kYaml)) << d.log();
  SocketClient c(d.port());
  ASSERT_TRUE(c.until([&] { return find_frame(c.raw, 0x4, 0).has_value(); }));  // the server's SETTINGS
  const auto flood = [&](uint32_t from, uint32_t pairs) {
    std::string bytes;
    for (uint32_t id = from; id < from + 2 * pairs; id += 2) bytes += open_stream(id) + rst_stream(id, NGHTTP2_CANCEL);
    c.send(bytes);
  };
  flood(1, 400);
  c.send(frame_head(8, 0x6, 0, 0) + "rlping!!");  // PING
  ASSERT_TRUE(c.until([&] { return c.raw.find("rlping!!") != std::string::npos; })) << "within the burst: served";
  EXPECT_TRUE(c.client.goaways.empty());
  flood(801, 2000);
  ASSERT_TRUE(c.until([&] { return !c.client.goaways.empty(); }, std::chrono::seconds(10)))
      << "no GOAWAY after 2400 rapid resets";
  EXPECT_EQ(c.client.goaways.back(), static_cast<uint32_t>(NGHTTP2_INTERNAL_ERROR));
  EXPECT_TRUE(c.until([] { return false; }, std::chrono::seconds(5)) || c.eof);
  EXPECT_TRUE(c.eof) << "the connection is closed";
  EXPECT_EQ(e2e::http_post(d.port(), "/v1/acquire", R"({"key":"r","policy":"five"})").status, 200U);
}

// The gRPC port's connections are admitted by the same connection caps as the HTTP port's:
// with max_connections 2, a third connection is closed unserved, and a place freed is taken.
TEST(H2cE2e, GrpcPortConnectionsCountInTheConnectionCaps) {
  Server s;
  ASSERT_TRUE(s.start(config("{ max_connections: 2 }")));
  const auto served = [](SocketClient& c) {
    return c.until([&] { return find_frame(c.raw, 0x4, 0).has_value(); }) && !c.eof;  // the server's SETTINGS
  };
  auto a = std::make_unique<SocketClient>(s.grpc_port);
  SocketClient b(s.grpc_port);
  ASSERT_TRUE(served(*a));
  ASSERT_TRUE(served(b));
  SocketClient third(s.grpc_port);
  EXPECT_TRUE(third.until([] { return false; }, std::chrono::seconds(5)) || third.eof);
  EXPECT_TRUE(third.eof) << "closed by the cap";
  EXPECT_TRUE(third.raw.empty()) << "and never served";
  a.reset();  // frees a place (counted out when the server sees the close)
  bool admitted = false;
  for (int i = 0; i < 50 && !admitted; ++i) {
    SocketClient next(s.grpc_port);
    admitted = served(next);
    if (!admitted) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(admitted) << "a freed place is taken again";
}

// A connection to the gRPC port that never sends its preface holds its place in the caps for
// limits.first_byte_timeout, as on the HTTP port — not for idle_timeout (60 s here).
TEST(H2cE2e, ASilentGrpcPortConnectionIsClosedAfterTheFirstByteTimeout) {
  Server s;
  ASSERT_TRUE(s.start(config("{ first_byte_timeout: 1s }")));
  const auto t0 = std::chrono::steady_clock::now();
  SocketClient c(s.grpc_port);
  // Read without writing: SocketClient's own preface is never flushed by this raw wait.
  char buf[4096];
  const int fd = c.fd();
  bool closed = false;
  while (!closed && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 200) > 0) closed = recv(fd, buf, sizeof buf, 0) <= 0;
  }
  EXPECT_TRUE(closed) << "not closed within 10 s";
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(900));
}

}  // namespace
}  // namespace ratelimit::grpc_api
