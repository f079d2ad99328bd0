// http1_writer_test.cc — the exact bytes write_http1_response puts on the wire (http1_writer.h):
// status line, Date, the fields in order, Content-Type, Content-Length, the Connection field
// each framing needs, the body (not for HEAD). Pinned byte for byte because the writer sizes its
// output once and writes through a pointer: a wrong size or a missed piece shows here first.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "http1_writer.h"
#include "ratelimit/http.h"

namespace ratelimit::server {
namespace {

// The answer with its Date value (checked to be an IMF-fixdate) replaced by <DATE>.
std::string written(const http::Response& r, const Http1Framing& framing) {
  std::string out = "stale bytes of the previous answer";  // replaced, not appended to
  write_http1_response(r, framing, out);
  const size_t at = out.find("\r\nDate: ");
  EXPECT_NE(at, std::string::npos);
  if (at == std::string::npos) return out;
  const std::string date = out.substr(at + 8, 29);
  EXPECT_TRUE(std::regex_match(date, std::regex(R"([A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT)")))
      << date;
  return out.replace(at + 8, 29, "<DATE>");
}

http::Response decision_answer() {
  Decision d;
  d.allowed = true;
  d.reason = DecisionReason::kWithinLimit;
  d.limit = 10;
  d.remaining = 9;
  d.reset_after = Micros{60'000'000};
  http::Response r;
  http::render_decision(d, {"api", 10, Micros{60'000'000}}, r);
  return r;
}

TEST(Http1Writer, KeepAliveHttp11) {
  EXPECT_EQ(written(decision_answer(), {}),
            "HTTP/1.1 200 OK\r\nDate: <DATE>\r\n"
            "RateLimit-Policy: \"api\";q=10;w=60\r\nRateLimit: \"api\";r=9;t=60\r\n"
            "Content-Type: application/json\r\nContent-Length: 105\r\n\r\n"
            R"({"allowed":true,"policy":"api","limit":10,"remaining":9,"reset_ms":60000,)"
            R"("retry_after_ms":0,"delay_ms":0})");
}

TEST(Http1Writer, ConnectionFieldPerFraming) {
  const http::Response r = decision_answer();
  EXPECT_TRUE(written(r, {11, false, true}).ends_with("\r\nContent-Length: 105\r\nConnection: close\r\n\r\n"));
  const std::string keep10 = written(r, {10, true, false});
  EXPECT_EQ(keep10.rfind("HTTP/1.0 200 OK\r\n", 0), 0u);
  EXPECT_NE(keep10.find("Content-Length: 105\r\nConnection: keep-alive\r\n\r\n{"), std::string::npos);
  const std::string close10 = written(r, {10, false, false});
  EXPECT_NE(close10.find("Content-Length: 105\r\nConnection: close\r\n\r\n{"), std::string::npos);
}

TEST(Http1Writer, HeadKeepsContentLengthWithoutBody) {
  EXPECT_TRUE(written(decision_answer(), {11, true, true}).ends_with("\r\nContent-Length: 105\r\n\r\n"));
}

TEST(Http1Writer, ErrorsUnknownStatusesEmptyAndLongBodies) {
  http::Response r;
  r.status = 599;
  r.content_type = "text/plain";
  EXPECT_EQ(written(r, {}),
            "HTTP/1.1 599 Unknown\r\nDate: <DATE>\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n\r\n");
  r.status = 429;
  r.fields.push_back({"Retry-After", "9223372036855"});
  r.fields.push_back({"X-Empty", ""});
  r.body.assign(100'000, 'b');
  const std::string head =
      "HTTP/1.1 429 Too Many Requests\r\nDate: <DATE>\r\nRetry-After: 9223372036855\r\nX-Empty: \r\n"
      "Content-Type: text/plain\r\nContent-Length: 100000\r\n\r\n";
  EXPECT_EQ(written(r, {}), head + r.body);
}

}  // namespace
}  // namespace ratelimit::server
