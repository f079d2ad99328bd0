// http1_test.cc — the transport's own tests, in process and without any API: the HTTP/1.1
// parser's strict framing rules (Http1Parser), the head screening (scan_request_head), the
// connection on a real loopback socket (keep-alive, pipelining, an answer given later from
// another thread, the size limits and timeouts, the connection cap) and the h2c takeover on the
// same port (transport_rig.h: Listener, Workers and ConnectionCaps, nothing else).
//
// Why here as well as end to end (e2e_hardening_test.cc): the rules are the transport's, and a
// failure here names the rule without a daemon, a configuration or a store in the way. The
// handlers below are the tests' own: they echo what the transport handed them, so each test
// asserts what the transport delivered, not what an API made of it.
// Every wait is bounded (RawConn's deadlines, eventually()); ports are free loopback ports.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <liburing.h>

#include "eventually.h"
#include "h2c.h"
#include "head_scan.h"
#include "http1_fast.h"
#include "http1_parser.h"
#include "raw_conn.h"
#include "transport_rig.h"

namespace ratelimit::server {
namespace {

using namespace std::chrono_literals;
using test_support::RawConn;
using test_support::status_of;
using testing::RigOptions;
using testing::TransportRig;

// ---- the parser ----------------------------------------------------------------------------

struct Parsed {
  Http1Request request;
  boost::system::error_code ec;
  bool done = false;
};

// Feeds `bytes` (one whole request) to a fresh parser, as the connection does: head first,
// then the rest.
Parsed parse(std::string_view bytes, size_t max_header_bytes = 8192) {
  Parsed out;
  Http1Parser p(out.request, max_header_bytes);
  p.header_limit(static_cast<std::uint32_t>(max_header_bytes));
  p.body_limit(64 * 1024);
  p.eager(true);
  while (!bytes.empty() && !out.ec && !p.is_done()) {
    const size_t used = p.put(boost::asio::buffer(bytes.data(), bytes.size()), out.ec);
    if (used == 0 && !out.ec) break;
    bytes.remove_prefix(used);
  }
  if (out.ec == boost::beast::http::error::need_more) out.ec = {};
  out.done = p.is_done();
  return out;
}

TEST(Http1Parser, ContentLengthBodyAndHeaderFieldsAsSent) {
  const Parsed r = parse("POST /v1/acquire?x=1 HTTP/1.1\r\nHost: a\r\nX-Key: k1\r\nContent-Length: 5\r\n\r\nhello");
  ASSERT_FALSE(r.ec) << r.ec.message();
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.request.method, Method::kPost);
  EXPECT_EQ(r.request.target, "/v1/acquire?x=1");
  EXPECT_EQ(r.request.body, "hello");
  EXPECT_EQ(r.request.headers.first("x-key").value_or(""), "k1");
  EXPECT_TRUE(r.request.has_content_length);
}

TEST(Http1Parser, ChunkedBodyIsJoinedAndTrailerFieldsAreIgnored) {
  const Parsed r = parse(
      "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\nabc\r\n2\r\nde\r\n0\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n");
  ASSERT_FALSE(r.ec) << r.ec.message();
  ASSERT_TRUE(r.done);
  EXPECT_EQ(r.request.body, "abcde");
  // A trailer must not pick the key: it never reaches the fields the handlers read.
  EXPECT_FALSE(r.request.headers.first("x-forwarded-for").has_value());
}

// Every framing a proxy could read differently is refused. Beast itself already refuses a
// repeated Transfer-Encoding and Transfer-Encoding beside Content-Length while reading the
// fields (its message is then the reason: reason "" below); the parser's own rule catches what
// Beast lets through, and would catch those two too if Beast relaxed.
TEST(Http1Parser, AmbiguousFramingIsRefusedWithItsReason) {
  struct Case {
    const char* bytes;
    std::string_view reason;
  } cases[] = {
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
       ""},
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
       ""},
      {"POST / HTTP/1.0\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n",
       "Transfer-Encoding in an HTTP/1.0 request"},
      {"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
       "the only transfer coding accepted is 'chunked'"},
  };
  for (const Case& c : cases) {
    const Parsed r = parse(c.bytes);
    EXPECT_TRUE(r.ec) << c.bytes;
    EXPECT_EQ(r.request.refusal, c.reason) << c.bytes;
  }
}

TEST(Http1Parser, ChunkExtensionsAreBoundedLikeTheHeader) {
  const std::string ext(300, 'e');
  const Parsed r = parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3;" + ext +
                             "\r\nabc\r\n0\r\n\r\n",
                         /*max_header_bytes=*/256);
  EXPECT_EQ(r.ec, boost::beast::http::error::header_limit);
  EXPECT_EQ(r.request.refusal, "the chunk extensions exceed limits.max_header_bytes");
}

TEST(Http1Parser, ExpectContinueIsSeen) {
  const Parsed r = parse("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx");
  ASSERT_FALSE(r.ec) << r.ec.message();
  EXPECT_TRUE(r.request.expect_continue);
}

// ---- the fast parse of the common request -------------------------------------------------

struct Fast {
  bool accepted = false;
  FastParse result;
  Http1Request request;
};

// `bytes` as the connection hands it to the fast path: screened first.
Fast fast_parse(std::string_view bytes, size_t max_header_bytes = 8192, uint64_t max_body_bytes = 64 * 1024) {
  Fast out;
  const HeadScan scan = scan_request_head(bytes);
  EXPECT_EQ(scan.state, HeadScan::State::kComplete) << bytes;
  out.request.target = "untouched";
  out.accepted = parse_common_request(bytes, scan.length, max_header_bytes, max_body_bytes, out.request, out.result);
  return out;
}

TEST(Http1FastParse, TheCommonRequestIsReadAsBeastReadsIt) {
  const std::string req =
      "POST /v1/acquire HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/json\r\n"
      "Content-Length: 30\r\nX-Ows: \t a \t b\t \r\nX-Empty:\r\n\r\n{\"key\":\"hot\",\"policy\":\"bench\"}";
  const Fast f = fast_parse(req + "GET /next HTTP/1.1\r\n");  // the next request's start is not consumed
  ASSERT_TRUE(f.accepted);
  EXPECT_EQ(f.result.consumed, req.size());
  EXPECT_TRUE(f.result.keep_alive);
  EXPECT_EQ(f.request.method, Method::kPost);
  EXPECT_EQ(f.request.version, 11u);
  EXPECT_EQ(f.request.target, "/v1/acquire");
  EXPECT_EQ(f.request.body, "{\"key\":\"hot\",\"policy\":\"bench\"}");
  EXPECT_EQ(f.request.headers.first("x-ows").value_or(""), "a \t b") << "OWS trimmed at both ends, as Beast does";
  EXPECT_TRUE(f.request.headers.first("x-empty").has_value());
  EXPECT_TRUE(f.request.has_content_length);
  const Parsed beast = parse(req);
  ASSERT_FALSE(beast.ec) << beast.ec.message();
  EXPECT_TRUE(beast.request.headers == f.request.headers) << "the same fields in the same order";
  EXPECT_EQ(beast.request.target, f.request.target);
  EXPECT_EQ(beast.request.body, f.request.body);
}

TEST(Http1FastParse, KeepAliveIsBeastsForEachVersion) {
  struct Case {
    const char* bytes;
    Method method;
    bool keep_alive;
  } cases[] = {
      {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", Method::kGet, true},
      {"HEAD / HTTP/1.1\r\nHost: a\r\nConnection: CLOSE\r\n\r\n", Method::kHead, false},
      {"DELETE /k HTTP/1.1\r\nConnection: keep-alive\r\n\r\n", Method::kDelete, true},
      {"GET / HTTP/1.0\r\nHost: a\r\n\r\n", Method::kGet, false},
      {"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", Method::kGet, true},
      {"POST / HTTP/1.0\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", Method::kPost, false},
  };
  for (const Case& c : cases) {
    const Fast f = fast_parse(c.bytes);
    ASSERT_TRUE(f.accepted) << c.bytes;
    EXPECT_EQ(f.request.method, c.method) << c.bytes;
    EXPECT_EQ(f.result.keep_alive, c.keep_alive) << c.bytes;
    EXPECT_EQ(f.result.consumed, std::string_view(c.bytes).size()) << c.bytes;
  }
}

// Whatever is not the plain common form is declined, untouched, and Beast then reads it (or
// refuses it) exactly as before the fast path existed.
TEST(Http1FastParse, AnythingElseIsDeclinedAndLeftToBeast) {
  struct Case {
    std::string bytes;
    bool beast_accepts;
    size_t max_header_bytes = 8192;
    uint64_t max_body_bytes = 64 * 1024;
  } cases[] = {
      {"PUT / HTTP/1.1\r\nHost: a\r\n\r\n", true},                                  // another method
      {"get / HTTP/1.1\r\nHost: a\r\n\r\n", true},                                  // not a verb Beast names
      {"GET / HTTP/1.2\r\nHost: a\r\n\r\n", false},                                 // another version
      {"GET /\x7f HTTP/1.1\r\nHost: a\r\n\r\n", false},                              // a byte Beast refuses in a target
      {"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", false},                                // an empty target
      {"GET / HTTP/1.1\r\nHost : a\r\n\r\n", false},                                // a space before ':'
      {"GET / HTTP/1.1\r\nHo(st: a\r\n\r\n", false},                                // a name not a token
      {"GET / HTTP/1.1\r\nno colon\r\n\r\n", false},
      {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n", true},
      {"POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx", true},
      {"GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n", true},
      {"GET / HTTP/1.0\r\nProxy-Connection: keep-alive\r\n\r\n", true},
      {"GET / HTTP/1.1\r\nConnection: close, keep-alive\r\n\r\n", true},         // a list
      {"GET / HTTP/1.1\r\nConnection: close\r\nConnection: close\r\n\r\n", true},  // repeated
      {"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", true},
      {"POST / HTTP/1.1\r\nContent-Length: 1,1\r\n\r\nx", true},
      {"POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\nx", false},
      {"POST / HTTP/1.1\r\nContent-Length: 00000000000000000001\r\n\r\nx", true},  // 20 digits
      {"POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", false},  // past 64 bits
      {"POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nab", true},                   // the body not all here
      {"POST / HTTP/1.1\r\nContent-Length: 16\r\n\r\n" + std::string(16, 'b'), true, 8192, 16},   // at the body limit
      {"POST / HTTP/1.1\r\nContent-Length: 17\r\n\r\n" + std::string(17, 'b'), false, 8192, 16},  // past it
      {"GET / HTTP/1.1\r\nHost: a\r\n\r\n", true, 27},                              // the head at the header limit
      {"GET / HTTP/1.1\r\nX: \x80\x01\r\n\r\n", false},                              // unscreened: a control byte
  };
  for (const Case& c : cases) {
    const HeadScan scan = scan_request_head(c.bytes);
    if (scan.state != HeadScan::State::kComplete) {
      EXPECT_FALSE(c.beast_accepts) << c.bytes;
    }
    Http1Request out;
    out.target = "untouched";
    FastParse result;
    result.consumed = 12345;
    const size_t head = scan.state == HeadScan::State::kComplete ? scan.length : c.bytes.find("\r\n\r\n") + 4;
    EXPECT_FALSE(parse_common_request(c.bytes, head, c.max_header_bytes, c.max_body_bytes, out, result)) << c.bytes;
    EXPECT_EQ(out.target, "untouched") << c.bytes;
    EXPECT_EQ(result.consumed, 12345u) << c.bytes;
    Parsed beast;
    Http1Parser p(beast.request, c.max_header_bytes);
    p.header_limit(static_cast<std::uint32_t>(c.max_header_bytes));
    p.body_limit(c.max_body_bytes);
    p.eager(true);
    p.put(boost::asio::buffer(c.bytes.data(), c.bytes.size()), beast.ec);
    if (beast.ec == boost::beast::http::error::need_more) beast.ec = {};
    EXPECT_EQ(!beast.ec, c.beast_accepts) << c.bytes << ": " << beast.ec.message();
  }
}

// ---- the head screening --------------------------------------------------------------------

TEST(HeadScan, CompleteHeadLengthAndWhatIsMalformed) {
  const std::string head = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
  const HeadScan ok = scan_request_head(head + "body");
  EXPECT_EQ(ok.state, HeadScan::State::kComplete);
  EXPECT_EQ(ok.length, head.size());
  EXPECT_EQ(scan_request_head("GET / HTTP/1.1\r\nHo").state, HeadScan::State::kNeedMore);
  for (const char* bad : {"GET / HTTP/1.1\nHost: a\r\n\r\n",             // bare LF
                          "GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n",  // obs-fold
                          "GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n"}) {       // bare CR
    const HeadScan s = scan_request_head(bad);
    EXPECT_EQ(s.state, HeadScan::State::kMalformed) << bad;
    EXPECT_FALSE(s.reason.empty()) << bad;
  }
  const std::string nul = std::string("GET / HTTP/1.1\r\nHost: a") + '\0' + "\r\n\r\n";
  EXPECT_EQ(scan_request_head(nul).state, HeadScan::State::kMalformed);
}

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
  explicit Fixture(ConnectionLimits limits = {}, bool h2c = false, bool io_uring = true) {
    served.info.name = "HTTP";
    served.routes.exact("/later", later, kLater).fallback(echo, kEcho);
    if (h2c) served.h2c = &takeover;
    rig = std::make_unique<TransportRig>(served, RigOptions{1, limits, io_uring});
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

// Whether this kernel (and its seccomp profile) lets a process open an io_uring at all.
bool kernel_allows_io_uring() {
  io_uring ring{};
  if (io_uring_queue_init(4, &ring, 0) != 0) return false;
  io_uring_queue_exit(&ring);
  return true;
}

// The connection tests that send answers run twice: with the worker's io_uring batching
// (send_batch.h) and with one send() per answer (`io_uring: false`).
class Http1Sends : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(IoUring, Http1Sends, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Batched" : "OneSendEach"; });

// Many connections whose answers are ready in the same turns: each answer reaches its own
// connection, whole and in order, however the sends were grouped — and with batching on (where
// the kernel allows io_uring) they did leave through the ring; with it off, none did.
TEST_P(Http1Sends, ManyConnectionsEachGetTheirOwnAnswers) {
  Fixture f({}, false, GetParam());
  std::vector<std::unique_ptr<RawConn>> conns;
  for (int i = 0; i < 40; ++i) {
    conns.push_back(std::make_unique<RawConn>(static_cast<uint16_t>(f.rig->port())));
    ASSERT_TRUE(conns.back()->connected());
  }
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < conns.size(); ++i) {
      ASSERT_TRUE(conns[i]->send("GET /c" + std::to_string(i) + "r" + std::to_string(round) +
                                 " HTTP/1.1\r\nHost: x\r\n\r\n"));
    }
    for (size_t i = 0; i < conns.size(); ++i) {
      const std::string want = "/c" + std::to_string(i) + "r" + std::to_string(round) + "||";
      EXPECT_EQ(bodies(conns[i]->read_until(want, 5s)), (std::vector<std::string>{want}));
    }
  }
  EXPECT_EQ(f.rig->counters().requests(kEcho, 200), 120u);
  if (GetParam() && kernel_allows_io_uring()) {
    EXPECT_EQ(f.rig->batched_sends(), 120u);
  } else {
    EXPECT_EQ(f.rig->batched_sends(), 0u);
  }
}

TEST_P(Http1Sends, PipelinedRequestsAreAnsweredInOrderOnOneConnection) {
  Fixture f({}, false, GetParam());
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
TEST_P(Http1Sends, ABodyInLaterSegmentsAndAnAnswerLargerThanTheSendBufferAreServedWhole) {
  ConnectionLimits limits;
  limits.max_body_bytes = 8 * 1024 * 1024;
  Fixture f(limits, false, GetParam());
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
