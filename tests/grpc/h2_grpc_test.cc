// h2_grpc_test.cc — gRPC on our own HTTP/2 (src/grpc over src/h2, served by ratelimitd's
// listener, workers and h2c transport: grpc_host.h), beyond what
// grpc_server_test.cc asks of any gRPC server: the wire helpers (grpc-timeout, grpc-message,
// message framing), health for envoyproxy/ratelimit's service name "ratelimit", Watch streaming
// a change, server reflection as grpcurl uses it (a descriptor pool rebuilt from the answers),
// UNIMPLEMENTED for unknown methods, and — with a raw HTTP/2 client on a socket — grpc-timeout
// honoured and malformed, non-gRPC requests, oversized heads, half-open streams, garbage
// bytes: each gets its HTTP/2 or gRPC answer and the server keeps serving.
#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "config_dir.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "grpc_host.h"
#include "grpc_wire.h"
#include "h2_client.h"
#include "ratelimit/memory_store.h"
#include "rls_client.h"
#include "window_room.h"
#include "rls_service.h"
#include "rls_stats.h"

namespace ratelimit::grpc_api {
namespace {

using namespace ratelimit::grpc_test;  // NOLINT: the shared test client
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

TEST(GrpcWire, ParsesTimeouts) {
  using namespace std::chrono;
  EXPECT_EQ(parse_timeout("1S"), nanoseconds(seconds(1)));
  EXPECT_EQ(parse_timeout("250m"), nanoseconds(milliseconds(250)));
  EXPECT_EQ(parse_timeout("3H"), nanoseconds(hours(3)));
  EXPECT_EQ(parse_timeout("99999999n"), nanoseconds(99999999));
  EXPECT_EQ(parse_timeout("7u"), nanoseconds(microseconds(7)));
  EXPECT_EQ(parse_timeout("2M"), nanoseconds(minutes(2)));
  for (const char* bad : {"", "S", "1", "1s", "123456789S", "-1S", "1.5S", " 1S"}) {
    EXPECT_FALSE(parse_timeout(bad).has_value()) << bad;
  }
}

TEST(GrpcWire, PercentEncodesMessages) {
  EXPECT_EQ(percent_encode("plain text"), "plain text");
  EXPECT_EQ(percent_encode("50%\r\n\xc3\xa9"), "50%25%0D%0A%C3%A9");
}

std::string framed(std::string_view m) {
  std::string out;
  append_prefix(out, static_cast<uint32_t>(m.size()));
  out += m;
  return out;
}

TEST(GrpcWire, ReadsMessagesAcrossChunksAndRefusesBadFraming) {
  MessageReader r(100);
  const std::string two = framed("hello") + framed("");
  ASSERT_TRUE(r.feed(two.substr(0, 3)));
  EXPECT_FALSE(r.next().has_value());
  ASSERT_TRUE(r.feed(two.substr(3)));
  EXPECT_EQ(r.next(), "hello");
  EXPECT_EQ(r.next(), "");
  EXPECT_FALSE(r.next().has_value());
  EXPECT_EQ(r.partial(), 0U);
  // Too large: refused at the prefix, before the body arrives.
  std::string big;
  append_prefix(big, 101);
  EXPECT_FALSE(r.feed(big));
  EXPECT_EQ(r.error_code(), GrpcCode::kResourceExhausted);
  // A reset reader forgets the error (a reused call must not inherit it).
  r.reset(100);
  EXPECT_EQ(r.error_code(), GrpcCode::kOk);
  ASSERT_TRUE(r.feed(framed("ok")));
  EXPECT_EQ(r.next(), "ok");
  r.reset(100);
  EXPECT_FALSE(r.feed(std::string("\x01\0\0\0\x01x", 6)));
  EXPECT_EQ(r.error_code(), GrpcCode::kUnimplemented);
  r.reset(100);
  EXPECT_FALSE(r.feed(std::string("\x07\0\0\0\x01x", 6)));
  EXPECT_EQ(r.error_code(), GrpcCode::kInternal);
}

constexpr const char* kConfig = R"(domain: test
descriptors:
  - key: user
    rate_limit: { unit: minute, requests_per_unit: 10, name: per_user }
)";

struct Rig {
  explicit Rig(server::ConnectionLimits limits = {})
      : decisions(std::make_shared<MemoryStore>(), nullptr), rules("", false, rls::LoadOptions{}) {
    // The rules count per minute and per hour in windows aligned to the clock (the memory
    // store's SystemClock, Redis' TIME): a boundary mid-test would give counts back. A test
    // here takes well under 10 s; it starts with 10 s of the minute and the hour left.
    testing::await_window_room({std::chrono::seconds(60), std::chrono::hours(1)}, std::chrono::seconds(10));
    std::vector<rls::SourceFile> files = {{"config.yaml", kConfig}};
    auto loaded = rls::RuleSet::load(files);
    EXPECT_TRUE(loaded.ok()) << loaded.status().to_string();
    rules.replace(*loaded);
    service = std::make_unique<rls::RateLimitService>(decisions, rules, rls::ServiceOptions{}, stats, &outcomes);
    GrpcHostOptions o;
    o.limits = limits;
    server = std::make_unique<GrpcHost>(*service, o);
    channel = ::grpc::CreateChannel("127.0.0.1:" + std::to_string(server->port()),
                                    ::grpc::InsecureChannelCredentials());
    stub = RateLimitService::NewStub(channel);
  }
  int remaining(const std::string& user) {
    ::grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    RateLimitResponse r;
    const ::grpc::Status st = stub->ShouldRateLimit(&ctx, make_request("test", {{{"user", user}}}), &r);
    EXPECT_TRUE(st.ok()) << st.error_code() << " " << st.error_message();
    return r.statuses_size() == 1 ? static_cast<int>(r.statuses(0).limit_remaining()) : -1;
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

TEST(GrpcOverH2, HealthAnswersForEnvoyproxyRatelimitsServiceName) {
  Rig rig;
  auto health = ::grpc::health::v1::Health::NewStub(rig.channel);
  ::grpc::ClientContext ctx;
  HealthCheckRequest req;
  req.set_service("ratelimit");
  HealthCheckResponse resp;
  ASSERT_TRUE(health->Check(&ctx, req, &resp).ok());
  EXPECT_EQ(resp.status(), HealthCheckResponse::SERVING);
}

TEST(GrpcOverH2, WatchStreamsTheChangeToNotServing) {
  Rig rig;
  auto health = ::grpc::health::v1::Health::NewStub(rig.channel);
  ::grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  HealthCheckRequest req;
  auto reader = health->Watch(&ctx, req);
  HealthCheckResponse resp;
  ASSERT_TRUE(reader->Read(&resp));
  EXPECT_EQ(resp.status(), HealthCheckResponse::SERVING);
  rig.server->drain();
  ASSERT_TRUE(reader->Read(&resp));
  EXPECT_EQ(resp.status(), HealthCheckResponse::NOT_SERVING);
  // An unknown name: SERVICE_UNKNOWN, streamed (not an error).
  ::grpc::ClientContext ctx2;
  ctx2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  req.set_service("no.such.Service");
  auto unknown = health->Watch(&ctx2, req);
  ASSERT_TRUE(unknown->Read(&resp));
  EXPECT_EQ(resp.status(), HealthCheckResponse::SERVICE_UNKNOWN);
  ctx.TryCancel();
  ctx2.TryCancel();
}

TEST(GrpcOverH2, UnknownMethodsAreUnimplemented) {
  Rig rig;
  ::grpc::GenericStub generic(rig.channel);
  ::grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  ::grpc::Slice empty("");
  ::grpc::ByteBuffer in(&empty, 1), out;
  ::grpc::Status st;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  generic.UnaryCall(&ctx, "/envoy.service.ratelimit.v3.RateLimitService/Nope", ::grpc::StubOptions(), &in, &out,
                    [&](::grpc::Status s) {
                      std::lock_guard l(mu);
                      st = s;
                      done = true;
                      cv.notify_all();
                    });
  std::unique_lock l(mu);
  ASSERT_TRUE(cv.wait_for(l, std::chrono::seconds(10), [&] { return done; }));
  EXPECT_EQ(st.error_code(), ::grpc::StatusCode::UNIMPLEMENTED);
}

TEST(GrpcOverH2, ReflectionDescribesShouldRateLimitAsGrpcurlNeedsIt) {
  Rig rig;
  namespace refl = ::grpc::reflection::v1alpha;
  auto stub = refl::ServerReflection::NewStub(rig.channel);
  ::grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  auto stream = stub->ServerReflectionInfo(&ctx);
  refl::ServerReflectionRequest req;
  req.set_list_services("");
  ASSERT_TRUE(stream->Write(req));
  refl::ServerReflectionResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  std::set<std::string> names;
  for (const auto& s : resp.list_services_response().service()) names.insert(s.name());
  EXPECT_TRUE(names.contains("envoy.service.ratelimit.v3.RateLimitService"));
  EXPECT_TRUE(names.contains("grpc.health.v1.Health"));
  // The file defining the service, with its imports: enough to build the method's types.
  req.set_file_containing_symbol("envoy.service.ratelimit.v3.RateLimitService");
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_GT(resp.file_descriptor_response().file_descriptor_proto_size(), 1);
  google::protobuf::DescriptorPool pool;
  // Imports first: add in reverse order of the answer (the file itself comes first).
  const auto& files = resp.file_descriptor_response().file_descriptor_proto();
  for (int i = files.size() - 1; i >= 0; --i) {
    google::protobuf::FileDescriptorProto f;
    ASSERT_TRUE(f.ParseFromString(files.Get(i)));
    pool.BuildFile(f);
  }
  const auto* method = pool.FindMethodByName("envoy.service.ratelimit.v3.RateLimitService.ShouldRateLimit");
  ASSERT_NE(method, nullptr);
  EXPECT_EQ(method->input_type()->full_name(), "envoy.service.ratelimit.v3.RateLimitRequest");
  ASSERT_NE(method->input_type()->FindFieldByName("descriptors"), nullptr);
  // An unknown symbol: an error in the stream, the stream goes on.
  req.set_file_containing_symbol("no.such.Symbol");
  ASSERT_TRUE(stream->Write(req));
  ASSERT_TRUE(stream->Read(&resp));
  EXPECT_EQ(resp.error_response().error_code(), 5);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

std::string rls_body(const std::string& user) {
  std::string m;
  make_request("test", {{{"user", user}}}).SerializeToString(&m);
  std::string out;
  append_prefix(out, static_cast<uint32_t>(m.size()));
  return out + m;
}

const std::vector<std::pair<std::string, std::string>> kGrpc = {{"content-type", "application/grpc"}, {"te", "trailers"}};
constexpr const char* kPath = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

std::string status_of(const h2::testing::Response& r) {
  auto it = r.trailers.find("grpc-status");
  if (it != r.trailers.end()) return it->second;
  it = r.headers.find("grpc-status");
  return it == r.headers.end() ? "" : it->second;
}

TEST(GrpcOverH2, GrpcTimeoutIsHonouredAndAMalformedOneRefused) {
  Rig rig;
  h2::testing::SocketClient raw(rig.server->port());
  auto h = kGrpc;
  h.emplace_back("grpc-timeout", "1n");  // passed before the call is decided
  const int32_t late = raw.client.request(kPath, h, rls_body("t"));
  auto bad = kGrpc;
  bad.emplace_back("grpc-timeout", "soon");
  const int32_t malformed = raw.client.request(kPath, bad, rls_body("t"));
  auto ok = kGrpc;
  ok.emplace_back("grpc-timeout", "5S");
  const int32_t fine = raw.client.request(kPath, ok, rls_body("t2"));
  ASSERT_TRUE(raw.until([&] {
    return raw.client.responses[late].closed && raw.client.responses[malformed].closed &&
           raw.client.responses[fine].closed;
  }));
  EXPECT_EQ(status_of(raw.client.responses[late]), "4");       // DEADLINE_EXCEEDED
  EXPECT_EQ(status_of(raw.client.responses[malformed]), "13");  // INTERNAL, as grpc-go
  EXPECT_EQ(status_of(raw.client.responses[fine]), "0");
  EXPECT_EQ(rig.remaining("t"), 9) << "neither refused call counted";
}

TEST(GrpcOverH2, NonGrpcOversizedAndEmptyRequestsGetPreciseAnswers) {
  Rig rig;
  h2::testing::SocketClient raw(rig.server->port());
  const int32_t plain = raw.client.request("/v1/acquire", {{"content-type", "application/json"}}, "{}");
  auto big = kGrpc;
  big.emplace_back("x-filler", std::string(20000, 'f'));  // above the 16 KiB header-list limit
  const int32_t oversized = raw.client.request(kPath, big, rls_body("o"));
  const int32_t empty = raw.client.request(kPath, kGrpc, "");
  const int32_t get = raw.client.request(kPath, kGrpc, "", false, "GET");
  ASSERT_TRUE(raw.until([&] {
    for (int32_t id : {plain, oversized, empty, get}) {
      if (!raw.client.responses[id].closed) return false;
    }
    return true;
  }));
  EXPECT_EQ(raw.client.responses[plain].headers[":status"], "415");
  EXPECT_EQ(status_of(raw.client.responses[oversized]), "8");  // RESOURCE_EXHAUSTED
  EXPECT_EQ(status_of(raw.client.responses[empty]), "13");     // no request message
  EXPECT_EQ(status_of(raw.client.responses[get]), "12");       // UNIMPLEMENTED
  EXPECT_EQ(rig.remaining("o"), 9);
}

TEST(GrpcOverH2, HalfOpenStreamsAreResetAndTheConnectionServesOn) {
  server::ConnectionLimits o;
  o.request_timeout = std::chrono::milliseconds(300);
  Rig rig(o);
  h2::testing::SocketClient raw(rig.server->port());
  const int32_t open = raw.client.request(kPath, kGrpc, rls_body("h").substr(0, 3), true);
  ASSERT_TRUE(raw.until([&] { return raw.client.responses[open].closed; }));
  EXPECT_TRUE(raw.client.responses[open].reset);
  EXPECT_EQ(raw.client.responses[open].reset_code, static_cast<uint32_t>(NGHTTP2_CANCEL));
  const int32_t next = raw.client.request(kPath, kGrpc, rls_body("h"));
  ASSERT_TRUE(raw.until([&] { return raw.client.responses[next].closed; }));
  EXPECT_EQ(status_of(raw.client.responses[next]), "0");
}

TEST(GrpcOverH2, GarbageGetsGoawayAndOthersAreStillServed) {
  Rig rig;
  {
    h2::testing::SocketClient raw(rig.server->port());
    raw.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");  // not the HTTP/2 preface
    EXPECT_TRUE(raw.until([] { return false; }, std::chrono::seconds(2)) || raw.eof);
    EXPECT_TRUE(raw.eof) << "the server closes the connection";
  }
  {
    h2::testing::SocketClient raw(rig.server->port());
    raw.flush();  // preface + SETTINGS
    raw.send(std::string("\0\0\x01\x01\x05\0\0\0\x01\x80", 10));  // HEADERS with bad HPACK
    raw.until([] { return false; }, std::chrono::seconds(2));
    EXPECT_TRUE(raw.eof);
    ASSERT_FALSE(raw.client.goaways.empty());
    EXPECT_EQ(raw.client.goaways.back(), static_cast<uint32_t>(NGHTTP2_COMPRESSION_ERROR));
  }
  EXPECT_EQ(rig.remaining("g"), 9);
}

}  // namespace
}  // namespace ratelimit::grpc_api
