// e2e_hardening_test.cc — the real ratelimitd binary against what an adversarial review threw at
// it (issue 12): request-smuggling shapes (Transfer-Encoding / Content-Length desync, obs-fold,
// bare LF, NUL), connection exhaustion (per-address cap, first-byte timeout, the admin
// listener), bounded trailers and chunk extensions, /v1/peek behind the admin token, escaped
// reload errors.
//
// Why raw sockets: the smuggling shapes must reach the server byte for byte, and the
// connection tests need to bind a second loopback source address (127.0.0.2); a real HTTP
// client would normalise or refuse what is being tested. Every wait is bounded (recv with a
// deadline), every socket count is small and fixed.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "daemon.h"
#include "raw_conn.h"
#include "eventually.h"
#include "window_room.h"

namespace ratelimit::e2e {
namespace {

using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;
using test_support::RawConn;
using test_support::status_of;

// Every response ratelimitd writes carries exactly one Date field (a body may quote "HTTP/1.").
size_t count_responses(const std::string& bytes) {
  size_t n = 0;
  for (size_t at = bytes.find("\r\nDate: "); at != std::string::npos; at = bytes.find("\r\nDate: ", at + 1)) ++n;
  return n;
}

std::string acquire_request(const std::string& key) {
  const std::string body = R"({"key":")" + key + R"(","policy":"one"})";
  return "POST /v1/acquire HTTP/1.1\r\nHost: x\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n\r\n" + body;
}

const char* kPolicies = R"(policies:
  one: { algorithm: fixed_window, limit: 1, window: 60s }
)";

class Hardening : public ::testing::Test {
 protected:
  void start(const std::string& extra_yaml = "") {
    // "one" is a 60 s fixed window aligned to the clock's minute: across a boundary a key's
    // unit comes back, and "untouched" or "429 after" would be checked against a fresh window.
    // A test here takes well under a second; it starts with at least 5 s of its minute left.
    testing::await_window_room(std::chrono::seconds(60), std::chrono::seconds(5));
    ASSERT_TRUE(d.start(std::string(kPolicies) + extra_yaml)) << d.log();
  }
  // A peek answers what an acquire would: 200 while the key's one unit is unspent, 429 after.
  unsigned peek_status(const std::string& key) {
    return http_post(d.port(), "/v1/peek", R"({"key":")" + key + R"(","policy":"one"})").status;
  }
  Daemon d;
};

// Every shape in which a front proxy and ratelimitd could disagree on where a request ends.
// Each hides an acquire of its own key after (or inside) an outer request; whatever the
// interpretation, the answer must be one 400, the connection closed, and the key untouched.
TEST_F(Hardening, RequestSmugglingShapesAre400AndCloseAndConsumeNothing) {
  start();
  // Each shape is (name, head of the outer request up to the blank line, what follows the
  // blank line before the hidden acquire); `h` is the hidden request's length, for the shapes
  // whose outer Content-Length covers it.
  struct Shape {
    std::string name;
    std::function<std::string(size_t h)> head;
    std::string body;
  };
  const std::string chunk_end = "0\r\n\r\n";
  const std::string peek = "POST /v1/peek HTTP/1.1\r\nHost: x\r\n";
  const auto cl = [](size_t n) { return "Content-Length: " + std::to_string(n) + "\r\n"; };
  const auto fixed = [](std::string head) { return [head](size_t) { return head; }; };
  const std::vector<Shape> shapes = {
      {"te_xchunked", fixed(peek + "Transfer-Encoding: xchunked\r\n"), ""},
      {"te_identity", fixed(peek + "Transfer-Encoding: identity\r\n"), ""},
      {"te_gzip", fixed(peek + "Transfer-Encoding: gzip\r\n"), ""},
      {"te_chunked_then_identity", fixed(peek + "Transfer-Encoding: chunked, identity\r\n"), ""},
      {"te_gzip_chunked", fixed(peek + "Transfer-Encoding: gzip, chunked\r\n"), chunk_end},
      {"te_empty", fixed(peek + "Transfer-Encoding: \r\n"), ""},
      {"cl_then_te", [&](size_t h) { return peek + cl(chunk_end.size() + h) + "Transfer-Encoding: chunked\r\n"; }, chunk_end},
      {"te_then_cl", [&](size_t h) { return peek + "Transfer-Encoding: chunked\r\n" + cl(chunk_end.size() + h); }, chunk_end},
      {"te_xchunked_then_cl", fixed(peek + "Transfer-Encoding: xchunked\r\n" + cl(chunk_end.size())), chunk_end},
      {"two_content_lengths", [&](size_t h) { return peek + cl(0) + cl(h); }, ""},
      {"repeated_te", fixed(peek + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"), chunk_end},
      {"repeated_te_identity_chunked", fixed(peek + "Transfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n"), chunk_end},
      {"te_space_before_colon", fixed(peek + "Transfer-Encoding : chunked\r\n"), chunk_end},
      {"te_http10", fixed("POST /v1/peek HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n"), chunk_end},
      {"obs_fold", fixed(peek + "X-Folded: a\r\n b\r\n" + cl(0)), ""},
      {"obs_fold_te", fixed(peek + "Transfer-Encoding: identity\r\n chunked\r\n"), chunk_end},
      {"bare_lf_in_header", fixed(peek + "X-A: a\nContent-Length: 0\r\n"), ""},
      {"bare_lf_lines", fixed("POST /v1/peek HTTP/1.1\nHost: x\nContent-Length: 0\n"), ""},
      {"bare_cr", fixed(peek + "X-A: a\rContent-Length: 0\r\n"), ""},
      {"nul_in_value", fixed(peek + std::string("X-A: a\0b\r\n", 10) + cl(0)), ""},
      {"nul_in_name", fixed(peek + std::string("X\0A: b\r\n", 8) + cl(0)), ""},
  };
  for (const Shape& s : shapes) {
    SCOPED_TRACE(s.name);
    const std::string key = "smuggle-" + s.name;
    const std::string hidden = acquire_request(key);
    RawConn c(d.port());
    ASSERT_TRUE(c.connected());
    ASSERT_TRUE(c.send(s.head(hidden.size()) + "\r\n" + s.body + hidden));
    bool closed = false;
    const std::string answer = c.read_all(3s, closed);
    EXPECT_EQ(status_of(answer), "400") << answer;
    EXPECT_EQ(count_responses(answer), 1u) << answer;
    EXPECT_NE(answer.find("Connection: close"), std::string::npos) << answer;
    EXPECT_TRUE(closed) << answer;
    EXPECT_EQ(peek_status(key), 200u) << "the hidden acquire consumed quota";
  }
  // What the rules must not break: a well-formed chunked body (any letter case, OWS), a
  // repeated identical Content-Length, pipelined requests.
  {
    RawConn c(d.port());
    const std::string body = R"({"key":"chunked-ok","policy":"one"})";
    char size[16];
    std::snprintf(size, sizeof size, "%zx", body.size());
    const std::string a = c.exchange("POST /v1/acquire HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:  Chunked \r\n\r\n" +
                                     std::string(size) + "\r\n" + body + "\r\n0\r\n\r\n");
    EXPECT_EQ(status_of(a), "200") << a;
    EXPECT_EQ(peek_status("chunked-ok"), 429u);
  }
  {
    RawConn c(d.port());
    const std::string body = R"({"key":"same-cl","policy":"one"})";
    const std::string a = c.exchange("POST /v1/acquire HTTP/1.1\r\nHost: x\r\n" + cl(body.size()) + cl(body.size()) + "\r\n" + body);
    EXPECT_EQ(status_of(a), "200") << a;
  }
  EXPECT_EQ(http_get(d.port(), "/healthz").status, 200u);
}

// Chunk extensions and trailer fields count against limits.max_header_bytes like the header
// (9 KB of either used to pass with the 8192 default); within the bound they are accepted,
// and a trailer field never stands in for a header (no X-Forwarded-For from a trailer).
TEST_F(Hardening, TrailersAndChunkExtensionsAreBoundedLikeTheHeader) {
  start();
  const std::string body = R"({"key":"tr","policy":"one"})";
  char size[16];
  std::snprintf(size, sizeof size, "%zx", body.size());
  const std::string head = "POST /v1/peek HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  {
    RawConn c(d.port());  // 9 KB of extensions over two chunks
    const std::string ext = ";e=" + std::string(4600, 'x');
    const std::string a = c.exchange(head + "1" + ext + "\r\n{\r\n" + std::to_string(body.size() - 1) +
                                     ext + "\r\n" + body.substr(1) + "\r\n0\r\n\r\n");
    EXPECT_EQ(status_of(a), "431") << a;
    EXPECT_NE(a.find("chunk extensions"), std::string::npos) << a;
    EXPECT_TRUE(c.wait_closed(3s));
  }
  {
    RawConn c(d.port());  // 9 KB of trailer fields
    std::string trailers;
    for (int i = 0; i < 9; ++i) trailers += "X-T" + std::to_string(i) + ": " + std::string(1000, 't') + "\r\n";
    const std::string a = c.exchange(head + size + "\r\n" + body + "\r\n0\r\n" + trailers + "\r\n");
    EXPECT_EQ(status_of(a), "431") << a;
    EXPECT_NE(a.find("trailer fields"), std::string::npos) << a;
    EXPECT_TRUE(c.wait_closed(3s));
  }
  {
    RawConn c(d.port());  // small ones are fine
    const std::string a = c.exchange(head + size + ";name=value\r\n" + body + "\r\n0\r\nX-Trailer: 1\r\n\r\n");
    EXPECT_EQ(status_of(a), "200") << a;
  }
}

// The admin listener's port, from the daemon's log ("admin listener on 127.0.0.1:PORT").
uint16_t admin_port(const Daemon& d) {
  constexpr std::string_view kMarker = "admin listener on 127.0.0.1:";
  if (!d.wait_log(kMarker, 5s)) return 0;
  const std::string log = d.log();
  return static_cast<uint16_t>(std::atoi(log.c_str() + log.find(kMarker) + kMarker.size()));
}

std::string metric_line(uint16_t port, const std::string& name) {
  const std::string m = http_get(port, "/metrics").body;
  const size_t at = m.find("\n" + name + " ");
  if (at == std::string::npos) return "<absent>";
  return m.substr(at + 1 + name.size() + 1, m.find('\n', at + 1) - at - 2 - name.size());
}

// 12,000 idle sockets once locked every client out until idle_timeout. Now: one address may
// hold max_connections_per_client, a second address is still served, the admin listener is
// served even when the global cap is full, and sockets that never speak are closed after
// first_byte_timeout. 20 sockets, every wait bounded.
TEST_F(Hardening, IdleSocketsFromOneAddressLockOutNobody) {
  start("admin_listen: 127.0.0.1:0\nlimits: { max_connections: 12, max_connections_per_client: 8, first_byte_timeout: 1s }\n");
  const uint16_t admin = admin_port(d);
  ASSERT_NE(admin, 0) << d.log();
  std::vector<std::unique_ptr<RawConn>> flood;
  for (int i = 0; i < 8; ++i) {
    flood.push_back(std::make_unique<RawConn>(d.port(), "127.0.0.1"));
    ASSERT_TRUE(flood.back()->connected());
  }
  // The ninth from the same address is closed at once; a second address is served.
  RawConn ninth(d.port(), "127.0.0.1");
  EXPECT_TRUE(ninth.wait_closed(2s));
  RawConn other(d.port(), "127.0.0.2");
  ASSERT_TRUE(other.connected());
  EXPECT_EQ(status_of(other.exchange("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")), "200");
  // Fill the global cap from the second address: the API is full, the admin listener is not.
  std::vector<std::unique_ptr<RawConn>> more;
  for (int i = 0; i < 3; ++i) more.push_back(std::make_unique<RawConn>(d.port(), "127.0.0.2"));
  RawConn over(d.port(), "127.0.0.2");
  EXPECT_TRUE(over.wait_closed(2s));
  {
    RawConn a(admin);
    EXPECT_EQ(status_of(a.exchange("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")), "200");
    EXPECT_EQ(status_of(a.exchange("GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n")), "200");
    // Decisions are not served there.
    EXPECT_EQ(status_of(a.exchange("POST /v1/acquire HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")), "404");
  }
  EXPECT_EQ(metric_line(admin, "ratelimitd_connections_rejected_per_client_total"), "1");
  EXPECT_EQ(metric_line(admin, "ratelimitd_connections_rejected_total"), "1");
  // The flood never sent a byte: first_byte_timeout (1 s, swept every 250 ms) closes it all.
  const auto t0 = SteadyClock::now();
  for (auto& c : flood) EXPECT_TRUE(c->wait_closed(4s));
  const auto took = SteadyClock::now() - t0;
  EXPECT_LT(took, 3s);
  EXPECT_GE(std::stoi(metric_line(admin, "ratelimitd_connections_first_byte_timeouts_total")), 8);
  // The API is reachable again from the first address.
  // A bounded poll (was 2.5 s; a generous bound costs a passing run nothing).
  EXPECT_TRUE(testing::eventually([&] { return http_get(d.port(), "/healthz").status == 200; }, 10s, 50ms));
}

// A connection that has sent a request gets idle_timeout (60 s by default), not the short
// first_byte_timeout.
TEST_F(Hardening, FirstByteTimeoutSparesAConnectionThatSpoke) {
  start("limits: { first_byte_timeout: 500ms }\n");
  RawConn spoke(d.port());
  EXPECT_EQ(status_of(spoke.exchange("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")), "200");
  RawConn silent(d.port());
  EXPECT_TRUE(silent.wait_closed(3s));
  EXPECT_FALSE(spoke.wait_closed(1500ms));
  EXPECT_EQ(status_of(spoke.exchange("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")), "200");
}

// /v1/peek reveals any key's quota; peek_requires_admin_token puts it behind the token.
TEST_F(Hardening, PeekBehindTheAdminToken) {
  const std::string token = "peek-token-0123456789";
  start("admin_token: " + token + "\npeek_requires_admin_token: true\n");
  const std::string body = R"({"key":"pk","policy":"one"})";
  EXPECT_EQ(peek_status("pk"), 401u);
  Client c(d.port());
  const Reply ok = c.request("POST", "/v1/peek", body, {{"Authorization", "Bearer " + token}});
  EXPECT_EQ(ok.status, 200u) << ok.body;
  const Reply bad = c.request("POST", "/v1/peek", body, {{"Authorization", "Bearer wrong-token-0123456789"}});
  EXPECT_EQ(bad.status, 401u);
  EXPECT_EQ(http_post(d.port(), "/v1/acquire", body).status, 200u);  // acquire needs no token
}

}  // namespace
}  // namespace ratelimit::e2e
