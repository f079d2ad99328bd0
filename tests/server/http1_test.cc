// http1_test.cc — the transport's own tests, in process and without any API: the HTTP/1.1
// connection on a real loopback socket (keep-alive, pipelining, answers sent one by one and
// batched through the worker's io_uring, an answer given later from another thread, the size
// limits and timeouts, the connection cap) and the h2c takeover on the same port (transport_rig.h: Listener, Workers and ConnectionCaps, nothing else).
//
// Why here as well as end to end (e2e_hardening_test.cc): the rules are the transport's, and a
// failure here names the rule without a daemon, a configuration or a store in the way. The
// handlers below are the tests' own: they echo what the transport handed them, so each test
// asserts what the transport delivered, not what an API made of it.
// Every wait is bounded (RawConn's deadlines, eventually()); ports are free loopback ports.
// The reading rules without a socket (parser, fast parse, head screen): http1_parse_test.cc.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

#include "eventually.h"
#include "h2c.h"
#include "raw_conn.h"
#include "transport_rig.h"

namespace ratelimit::server {
namespace {

using namespace std::chrono_literals;
using test_support::RawConn;
using test_support::status_of;
using testing::RigOptions;
using testing::TransportRig;

// ---- the connection ------------------------------------------------------------------------

constexpr auto kEcho = static_cast<Endpoint>(1);
constexpr auto kLater = static_cast<Endpoint>(2);

// Answers at once with what the transport delivered: "<target>|<body>|<x-test>".
class EchoHandler final : public Handler {
 public:
  bool handle(Exchange& e) override {
    e.response.status = 200;
    e.response.content_type = "text/plain";
    e.response.body = std::string(e.request.target) + "|" + std::string(e.request.body) + "|" +
                      std::string(e.request.headers->first("x-test").value_or(""));
    return true;
  }
};

// Answers 30 ms later from another thread, as a store thread does.
class LaterHandler final : public Handler {
 public:
  bool handle(Exchange& e) override {
    std::thread([&e] {
      std::this_thread::sleep_for(30ms);
      e.response.status = 202;
      e.response.content_type = "text/plain";
      e.response.body = "later";
      e.resume();
    }).detach();
    return false;
  }
};

struct Fixture {
  explicit Fixture(ConnectionLimits limits = {}, bool h2c = false) {
    served.info.name = "HTTP";
    served.routes.exact("/later", later, kLater).fallback(echo, kEcho);
    if (h2c) served.h2c = &takeover;
    rig = std::make_unique<TransportRig>(served, RigOptions{1, limits});
  }
  EchoHandler echo;
  LaterHandler later;
  H2cTakeover takeover{nullptr};
  Served served;
  std::unique_ptr<TransportRig> rig;
};

// The bodies of every response in `bytes`, in order.
std::vector<std::string> bodies(const std::string& bytes) {
  std::vector<std::string> out;
  size_t at = 0;
  while ((at = bytes.find("HTTP/1.1 ", at)) != std::string::npos) {
    const size_t head_end = bytes.find("\r\n\r\n", at);
    const size_t cl = bytes.find("Content-Length: ", at);
    if (head_end == std::string::npos || cl == std::string::npos || cl > head_end) break;
    const size_t len = std::stoul(bytes.substr(cl + 16));
    out.push_back(bytes.substr(head_end + 4, len));
    at = head_end + 4 + len;
  }
  return out;
}

// Sends `requests` at once on `c` and reads until `answers` HTTP/1.1 answers (the last one's
// body ending in `last`) have come back, or 5 s: all that arrived.
std::string pipeline(RawConn& c, const std::string& requests, std::string_view last, size_t answers) {
  std::string got;
  EXPECT_TRUE(c.connected());
  EXPECT_TRUE(c.send(requests));
  EXPECT_TRUE(::ratelimit::testing::eventually([&] {
    got += c.read_until(last, 200ms);
    return bodies(got).size() >= answers;
  }, 5s)) << got;
  return got;
}

TEST(Http1Connection, PipelinedRequestsAreAnsweredInOrderOnOneConnection) {
  Fixture f;
  RawConn c(static_cast<uint16_t>(f.rig->port()));
  const std::string got = pipeline(c,
                                   "GET /a HTTP/1.1\r\nHost: x\r\nX-Test: 1\r\n\r\n"
                                   "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"
                                   "GET /later HTTP/1.1\r\nHost: x\r\n\r\n"
                                   "GET /c HTTP/1.1\r\nHost: x\r\nX-Test: 3\r\n\r\n",
                                   "/c||3", 4);
  EXPECT_EQ(bodies(got), (std::vector<std::string>{"/a||1", "/b|hi|", "later", "/c||3"}));
  EXPECT_NE(got.find("HTTP/1.1 202"), std::string::npos);
  EXPECT_EQ(f.rig->counters().requests(kEcho, 200), 3u);
  EXPECT_EQ(f.rig->counters().requests(kLater, 202), 1u);
  EXPECT_FALSE(c.wait_closed(100ms)) << "a kept-alive connection stays open";
}

// The connection parses a body already buffered with its head at once and reads the socket
// only for what is missing; it sends an answer with one non-blocking send and leaves only what
// did not fit to an asynchronous write. Both fallbacks must serve the request whole and keep the
// connection for the next one: a body that arrives in pieces after its head, and an answer far
// larger than the socket's send buffer.
TEST(Http1Connection, ABodyInLaterSegmentsAndAnAnswerLargerThanTheSendBufferAreServedWhole) {
  ConnectionLimits limits;
  limits.max_body_bytes = 8 * 1024 * 1024;
  Fixture f(limits);
  RawConn c(static_cast<uint16_t>(f.rig->port()));
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send("POST /split HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nab"));
  std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(c.send("cd"));
  std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(c.send("ef"));
  EXPECT_EQ(bodies(c.read_until("/split|abcdef|", 5s)), (std::vector<std::string>{"/split|abcdef|"}));

  const std::string big(4 * 1024 * 1024, 'z');
  const std::string a = c.exchange("POST /big HTTP/1.1\r\nHost: x\r\nX-Test: end\r\nContent-Length: " +
                                   std::to_string(big.size()) + "\r\n\r\n" + big, 10s);
  ASSERT_EQ(status_of(a), "200") << a.substr(0, 200);
  EXPECT_EQ(bodies(a), (std::vector<std::string>{"/big|" + big + "|end"}));
  EXPECT_EQ(bodies(c.exchange("GET /after HTTP/1.1\r\nHost: x\r\n\r\n")), (std::vector<std::string>{"/after||"}))
      << "the connection is kept after an answer written in parts";
  EXPECT_EQ(f.rig->counters().requests(kEcho, 200), 3u);
}

TEST(Http1Connection, BodyAndHeaderOverTheirLimitsAreRefusedAndTheConnectionClosed) {
  ConnectionLimits limits;
  limits.max_body_bytes = 16;
  limits.max_header_bytes = 256;
  Fixture f(limits);
  {
    RawConn c(static_cast<uint16_t>(f.rig->port()));
    const std::string a = c.exchange("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\n\r\n" + std::string(17, 'b'));
    EXPECT_EQ(status_of(a), "413") << a;
    EXPECT_TRUE(c.wait_closed(2s));
  }
  {
    RawConn c(static_cast<uint16_t>(f.rig->port()));
    const std::string a = c.exchange("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(300, 'h') + "\r\n\r\n");
    EXPECT_EQ(status_of(a), "431") << a;
    EXPECT_TRUE(c.wait_closed(2s));
  }
  EXPECT_EQ(f.rig->counters().requests(kEcho, 200), 0u) << "no handler saw either request";
}

// Requests the fast path takes and ones it leaves to Beast, pipelined on one connection: each
// is answered, in order, with what was sent, and the connection follows each one's keep-alive.
TEST(Http1Connection, FastAndBeastParsedRequestsInterleaveOnOneConnection) {
  Fixture f;
  RawConn c(static_cast<uint16_t>(f.rig->port()));
  const std::string got =
      pipeline(c,
               "POST /f1 HTTP/1.1\r\nHost: x\r\nX-Test: a\r\nContent-Length: 2\r\n\r\nhi"
               "POST /b1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
               "GET /f2 HTTP/1.1\r\nHost: x\r\nX-Test:  b \r\n\r\n"
               "PUT /b2 HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nz"
               "POST /f3 HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 3\r\n\r\nxyz"
               "GET /f4 HTTP/1.1\r\nConnection: close\r\n\r\n"
               "GET /never HTTP/1.1\r\n\r\n",
               "/f4||", 5);
  // bodies() reads the HTTP/1.1 answers; /f3's is an HTTP/1.0 one, kept alive.
  EXPECT_EQ(bodies(got), (std::vector<std::string>{"/f1|hi|a", "/b1|abc|", "/f2||b", "/b2|z|", "/f4||"}));
  const size_t f3 = got.find("HTTP/1.0 200");
  ASSERT_NE(f3, std::string::npos) << got;
  EXPECT_LT(got.find("Connection: keep-alive", f3), got.find("/f3|xyz|", f3)) << got;
  EXPECT_LT(got.find("/f3|xyz|", f3), got.find("/f4||")) << got;
  EXPECT_TRUE(c.wait_closed(2s)) << "Connection: close ends the connection after its answer";
  EXPECT_EQ(f.rig->counters().requests(kEcho, 200), 6u);
}

TEST(Http1Connection, MalformedHeadIsRefusedBeforeAnyHandler) {
  Fixture f;
  RawConn c(static_cast<uint16_t>(f.rig->port()));
  const std::string a = c.exchange("GET / HTTP/1.1\r\nHost: x\r\n folded: y\r\n\r\n");
  EXPECT_EQ(status_of(a), "400") << a;
  EXPECT_TRUE(c.wait_closed(2s));
  EXPECT_EQ(f.rig->counters().requests(kEcho, 200), 0u);
}

TEST(Http1Connection, SilentAndSlowClientsAreClosedByTheirTimeouts) {
  ConnectionLimits limits;
  limits.first_byte_timeout = Micros{300'000};
  limits.request_timeout = Micros{300'000};
  Fixture f(limits);
  RawConn silent(static_cast<uint16_t>(f.rig->port()));
  RawConn slow(static_cast<uint16_t>(f.rig->port()));
  ASSERT_TRUE(slow.send("GET / HTTP/1.1\r\nHost: x\r\n"));  // the head never ends
  // The worker's sweep runs every 250 ms: closed within timeout + sweep, bounded here at 5 s.
  EXPECT_TRUE(silent.wait_closed(5s));
  EXPECT_TRUE(slow.wait_closed(5s));
  EXPECT_EQ(f.rig->counters().first_byte_timeouts(), 1u) << "only the silent one sent no byte";
}

TEST(Http1Connection, ConnectionsBeyondTheCapAreRefused) {
  ConnectionLimits limits;
  limits.max_connections = 2;
  Fixture f(limits);
  RawConn a(static_cast<uint16_t>(f.rig->port())), b(static_cast<uint16_t>(f.rig->port()));
  ASSERT_EQ(status_of(a.exchange("GET / HTTP/1.1\r\nHost: x\r\n\r\n")), "200");
  ASSERT_EQ(status_of(b.exchange("GET / HTTP/1.1\r\nHost: x\r\n\r\n")), "200");
  RawConn over(static_cast<uint16_t>(f.rig->port()));
  EXPECT_NE(status_of(over.exchange("GET / HTTP/1.1\r\nHost: x\r\n\r\n", 2s)), "200");
  EXPECT_TRUE(over.wait_closed(2s));
  EXPECT_EQ(f.rig->counters().open_connections(), 2);
}

// ---- h2c on the same port ------------------------------------------------------------------

// An HTTP/2 frame header: length (24 bits), type, flags, stream id.
std::string frame(uint8_t type, uint8_t flags, uint32_t stream, std::string_view payload) {
  std::string f;
  const auto n = static_cast<uint32_t>(payload.size());
  f += static_cast<char>(n >> 16);
  f += static_cast<char>(n >> 8);
  f += static_cast<char>(n);
  f += static_cast<char>(type);
  f += static_cast<char>(flags);
  f += static_cast<char>(stream >> 24);
  f += static_cast<char>(stream >> 16);
  f += static_cast<char>(stream >> 8);
  f += static_cast<char>(stream);
  f += payload;
  return f;
}

TEST(H2cTakeover, APrefaceOnTheHttpPortIsServedByTheSameRoutes) {
  Fixture f({}, /*h2c=*/true);
  RawConn h2(static_cast<uint16_t>(f.rig->port()));
  // HPACK, static table only: :method GET (2), :scheme http (6), :path "/h2" (literal, name 4),
  // :authority "x" (literal, name 1), x-test "7" (literal, new name).
  std::string block = "\x82\x86";
  block += "\x04\x03/h2";
  block += "\x01\x01x";
  block += std::string("\x00\x06x-test\x01", 9) + "7";
  ASSERT_TRUE(h2.send(std::string(kH2Preface) + frame(0x4, 0, 0, "") +
                      frame(0x1, 0x5 /*END_STREAM|END_HEADERS*/, 1, block)));
  const std::string got = h2.read_until("/h2||7", 5s);
  ASSERT_GE(got.size(), 9u);
  EXPECT_EQ(got[3], '\x04') << "the server's first frame is its SETTINGS";
  EXPECT_NE(got.find("/h2||7"), std::string::npos) << "the echo handler answered the stream";
  EXPECT_EQ(f.rig->counters().requests(kEcho, 200), 1u);
  // HTTP/1.1 on the same port is unchanged.
  RawConn h1(static_cast<uint16_t>(f.rig->port()));
  EXPECT_EQ(bodies(h1.exchange("GET /h1 HTTP/1.1\r\nHost: x\r\n\r\n")), (std::vector<std::string>{"/h1||"}));
}

TEST(H2cTakeover, WithoutATakeoverAPrefaceIsAMalformedHttp1Request) {
  Fixture f;  // no h2c
  RawConn c(static_cast<uint16_t>(f.rig->port()));
  const std::string a = c.exchange(std::string(kH2Preface));
  EXPECT_EQ(status_of(a), "400") << a;
  EXPECT_TRUE(c.wait_closed(2s));
}

}  // namespace
}  // namespace ratelimit::server
