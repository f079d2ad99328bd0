// http1_parse_test.cc — the transport's HTTP/1.1 reading rules, without a socket: the parser's
// strict framing (Http1Parser, Beast underneath), the fast parse of the common request
// (parse_common_request: Beast's reading or a decline, never a refusal of its own) and the head
// screening (scan_request_head). The connection on a real socket is http1_test.cc's.
//
// Why apart from the connection tests: each failure here names a reading rule, with no socket,
// thread or timeout in the way.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <string_view>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>

#include "head_scan.h"
#include "http1_fast.h"
#include "http1_parser.h"

namespace ratelimit::server {
namespace {
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

}  // namespace
}  // namespace ratelimit::server
