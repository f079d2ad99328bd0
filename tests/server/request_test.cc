// request_test.cc — parsing untrusted request bodies and forward-auth queries: every accepted
// shape, and a precise 400 for every malformed one.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "client_ip.h"
#include "head_scan.h"
#include "request.h"

namespace ratelimit::server {
namespace {

const RequestBounds kBounds{16, 100};

std::string refusal(std::string_view body, BodyKind kind = BodyKind::kDecision) {
  DecisionRequest r;
  RequestError e;
  EXPECT_FALSE(parse_request_body(body, kind, kBounds, r, e)) << body;
  EXPECT_EQ(e.status, 400u);
  return std::string(e.error) + ": " + e.message;
}

TEST(RequestBody, SinglePolicyDefaultsCostToOne) {
  DecisionRequest r;
  RequestError e;
  ASSERT_TRUE(parse_request_body(R"({"key":"user:42","policy":"api"})", BodyKind::kDecision, kBounds, r, e)) << e.message;
  EXPECT_EQ(r.key, "user:42");
  EXPECT_EQ(r.policy_count, 1u);
  EXPECT_EQ(r.policies[0], "api");
  EXPECT_FALSE(r.multi);
  EXPECT_EQ(r.cost, 1);
}

TEST(RequestBody, SeveralPoliciesAndCost) {
  DecisionRequest r;
  RequestError e;
  ASSERT_TRUE(parse_request_body(R"( {"cost": 7, "policies": ["per_second", "per_hour"], "key": "k"} )",
                                 BodyKind::kDecision, kBounds, r, e)) << e.message;
  EXPECT_TRUE(r.multi);
  EXPECT_EQ(r.policy_count, 2u);
  EXPECT_EQ(r.policies[1], "per_hour");
  EXPECT_EQ(r.cost, 7);
  // A one-element list is still the all-or-nothing form.
  ASSERT_TRUE(parse_request_body(R"({"key":"k","policies":["a"]})", BodyKind::kDecision, kBounds, r, e));
  EXPECT_TRUE(r.multi);
  EXPECT_EQ(r.cost, 1);  // reset from the previous parse
}

TEST(RequestBody, KeysMayHoldAnyUtf8) {
  DecisionRequest r;
  RequestError e;
  ASSERT_TRUE(parse_request_body(R"({"key":"caf\u00e9 {x}","policy":"a"})", BodyKind::kDecision, kBounds, r, e));
  EXPECT_EQ(r.key, "caf\xc3\xa9 {x}");
}

TEST(RequestBody, MalformedInputIsRefusedPrecisely) {
  EXPECT_EQ(refusal("").rfind("invalid_json: ", 0), 0u);
  EXPECT_EQ(refusal("{").rfind("invalid_json: ", 0), 0u);
  EXPECT_EQ(refusal(R"({"key":"a","policy":"p"} x)").rfind("invalid_json", 0), 0u);
  EXPECT_EQ(refusal("\"\xff\"").rfind("invalid_json", 0), 0u);  // invalid UTF-8
  EXPECT_EQ(refusal(R"([1,2])"), "invalid_request: the body must be a JSON object, got an array");
  EXPECT_EQ(refusal(R"({"policy":"p"})"), "invalid_request: missing field 'key'");
  EXPECT_EQ(refusal(R"({"key":5,"policy":"p"})"), "invalid_request: 'key' must be a string, got a number");
  EXPECT_EQ(refusal(R"({"key":"","policy":"p"})"), "invalid_key: key must not be empty");
  EXPECT_EQ(refusal(R"({"key":"0123456789abcdefg","policy":"p"})"), "invalid_key: key is 17 bytes; the limit is 16");
  EXPECT_EQ(refusal(R"({"key":"k"})"), "invalid_request: missing field 'policy' (or 'policies')");
  EXPECT_EQ(refusal(R"({"key":"k","policy":"a","policies":["b"]})"), "invalid_request: give either 'policy' or 'policies', not both");
  EXPECT_EQ(refusal(R"({"key":"k","policy":["a"]})"), "invalid_request: 'policy' must be a string, got an array");
  EXPECT_EQ(refusal(R"({"key":"k","policies":"a"})"), "invalid_request: 'policies' must be an array of policy names, got a string");
  EXPECT_EQ(refusal(R"({"key":"k","policies":[]})"), "invalid_request: 'policies' must name 1 to 16 policies");
  EXPECT_EQ(refusal(R"({"key":"k","policies":["a","a"]})"), "invalid_request: policy 'a' is listed twice in 'policies'");
  EXPECT_EQ(refusal(R"({"key":"k","policies":["a",1]})"), "invalid_request: 'policies' must hold strings, got a number");
  EXPECT_EQ(refusal(R"({"key":"k","policy":"no spaces"})").rfind("unknown_policy", 0), 0u);
  EXPECT_EQ(refusal(R"({"key":"k","policy":"p","cost":0})"), "invalid_cost: 'cost' must be between 1 and 100");
  EXPECT_EQ(refusal(R"({"key":"k","policy":"p","cost":-3})"), "invalid_cost: 'cost' must be between 1 and 100");
  EXPECT_EQ(refusal(R"({"key":"k","policy":"p","cost":101})"), "invalid_cost: 'cost' must be between 1 and 100");
  EXPECT_EQ(refusal(R"({"key":"k","policy":"p","cost":18446744073709551615})"), "invalid_cost: 'cost' must be between 1 and 100");
  // Beyond 2^64 Boost.JSON reads an integer as a double: still "out of range", not "a fraction".
  EXPECT_EQ(refusal(R"({"key":"k","policy":"p","cost":99999999999999999999})"), "invalid_cost: 'cost' must be between 1 and 100");
  EXPECT_EQ(refusal(R"({"key":"k","policy":"p","cost":-99999999999999999999})"), "invalid_cost: 'cost' must be between 1 and 100");
  EXPECT_EQ(refusal(R"({"key":"k","policy":"p","cost":1.5})"), "invalid_cost: 'cost' must be a whole number, got a number with a fraction or exponent");
  EXPECT_EQ(refusal(R"({"key":"k","policy":"p","cost":"1"})"), "invalid_cost: 'cost' must be a whole number, got a string");
  EXPECT_EQ(refusal(R"({"key":"k","policy":"p","cost":null})"), "invalid_cost: 'cost' must be a whole number, got null");
  EXPECT_EQ(refusal(R"({"key":"k","policy":"p","polcy":"x"})"), "invalid_request: unknown field 'polcy' (allowed: key, policy or policies, cost, limit, max_wait_ms, priority)");
  EXPECT_EQ(refusal(R"({"key":"k","policy":"p","x":[[[[[1]]]]]})").rfind("invalid_json", 0), 0u);  // too deep
}

TEST(RequestBody, DuplicateFieldsKeepTheLastValue) {
  // Boost.JSON (1.81) keeps the last of duplicate names; documented in README.md (ratelimitd).
  DecisionRequest r;
  RequestError e;
  ASSERT_TRUE(parse_request_body(R"({"key":"k","key":"j","policy":"p"})", BodyKind::kDecision, kBounds, r, e));
  EXPECT_EQ(r.key, "j");
}

// The fast path (plain_key_policy) answers exactly as the full parser: each body is also parsed
// with a "cost":1 member added (the default, and a shape the fast path never takes), and the two
// results — values or refusal — must be the same. The other bodies are left to the full parser.
TEST(RequestBody, PlainKeyAndPolicyBodiesReadAsTheFullParserReadsThem) {
  struct Case {
    std::string body;
    bool plain;  // whether the fast path takes it
  };
  const std::vector<Case> cases = {
      {R"({"key":"user:42","policy":"api"})", true},
      {" {\n\t\"policy\" : \"api\" ,\r\n \"key\":\"k k\" } \n", true},
      {R"({"key":"","policy":"api"})", true},                      // invalid_key
      {R"({"key":"0123456789abcdefX","policy":"api"})", true},     // longer than max_key_length 16
      {R"({"key":"k","policy":"no spaces"})", true},               // unknown_policy (its shape)
      {R"({"key":"k","policy":""})", true},                        // unknown_policy (empty)
      {R"({"key":"k\u0041","policy":"api"})", false},              // an escape: the full parser
      {R"({"key":"caf\u00e9","policy":"api"})", false},
      {"{\"key\":\"caf\xc3\xa9\",\"policy\":\"api\"}", false},  // non-ASCII
      {R"({"key":"k","key":"j","policy":"api"})", false},          // a duplicate name
      {R"({"key":"k","policy":"api","policy":"b"})", false},
      {R"({"key":"k"})", false},
      {R"({"key":"k","policy":"api",})", false},                   // a trailing comma: invalid JSON
      {R"({"key":"k","policy":"api"}x)", false},
      {R"({"key":"k","polcy":"api"})", false},
      {R"({"key":1,"policy":"api"})", false},
      // The compact shape's own matcher (compact_key_policy) at its edges.
      {R"({"key":"","policy":""})", true},
      {R"({"key":"k","policy":"ap"i"})", false},                   // a quote inside the last value
      {R"({"key":"k","policy":"api"}})", false},
      {"{\"key\":\"k\x7f\",\"policy\":\"api\"}", false},       // DEL: valid JSON, not plain
      {R"({"key":"k", "policy":"api"})", true},                    // a space: the general loop
  };
  for (const Case& c : cases) {
    std::string_view key, policy;
    EXPECT_EQ(plain_key_policy(c.body, key, policy), c.plain) << c.body;
    if (!c.plain) continue;  // the full parser reads it (its own tests above)
    std::string with_cost = c.body;
    const size_t close = with_cost.rfind('}');
    ASSERT_NE(close, std::string::npos);
    with_cost.insert(close, R"(,"cost":1)");
    for (BodyKind kind : {BodyKind::kDecision, BodyKind::kReset}) {
      DecisionRequest fast, full;
      RequestError fast_err, full_err;
      const bool fast_ok = parse_request_body(c.body, kind, kBounds, fast, fast_err);
      if (kind == BodyKind::kReset) {  // a reset refuses "cost": the same verdict as an acquire
        EXPECT_EQ(fast_ok, parse_request_body(c.body, BodyKind::kDecision, kBounds, full, full_err)) << c.body;
        continue;
      }
      const bool full_ok = parse_request_body(with_cost, kind, kBounds, full, full_err);
      ASSERT_EQ(fast_ok, full_ok) << c.body;
      if (fast_ok) {
        EXPECT_EQ(fast.key, full.key) << c.body;
        EXPECT_EQ(fast.policy_count, full.policy_count);
        EXPECT_EQ(fast.policies[0], full.policies[0]);
        EXPECT_EQ(fast.cost, full.cost);
        EXPECT_EQ(fast.multi, full.multi);
      } else {
        EXPECT_EQ(fast_err.error, full_err.error) << c.body;
        EXPECT_EQ(fast_err.message, full_err.message) << c.body;
      }
    }
  }
}

TEST(RequestBody, ResetTakesOnlyKeyAndPolicy) {
  DecisionRequest r;
  RequestError e;
  ASSERT_TRUE(parse_request_body(R"({"key":"k","policy":"a"})", BodyKind::kReset, kBounds, r, e));
  EXPECT_EQ(refusal(R"({"key":"k","policy":"a","cost":1})", BodyKind::kReset),
            "invalid_request: unknown field 'cost' (allowed: key, policy)");
  EXPECT_EQ(refusal(R"({"key":"k","policies":["a"]})", BodyKind::kReset).rfind("invalid_request: unknown field 'policies'", 0), 0u);
}

TEST(ForwardAuthQuery, OneOrSeveralPolicies) {
  DecisionRequest r;
  RequestError e;
  ASSERT_TRUE(parse_forward_auth_query("policy=api", r, e));
  EXPECT_EQ(r.policy_count, 1u);
  EXPECT_FALSE(r.multi);
  ASSERT_TRUE(parse_forward_auth_query("policy=a%3Ab&policy=c", r, e));
  EXPECT_EQ(r.policies[0], "a:b");
  EXPECT_EQ(r.policies[1], "c");
  EXPECT_TRUE(r.multi);
  EXPECT_FALSE(parse_forward_auth_query("", r, e));
  EXPECT_EQ(e.message, "missing query parameter 'policy' (e.g. ?policy=api)");
  EXPECT_FALSE(parse_forward_auth_query("policy=a&cost=5", r, e));
  EXPECT_EQ(e.message, "unknown query parameter 'cost' (allowed: policy, deny_status, max_wait_ms)");
  EXPECT_FALSE(parse_forward_auth_query("policy=%zz", r, e));
  EXPECT_FALSE(parse_forward_auth_query("policy=%4", r, e));
  EXPECT_FALSE(parse_forward_auth_query("policy=a&policy=a", r, e));
}

TEST(RequestBody, MaxWaitIsAWholeNumberOfMillisecondsWithinBounds) {
  DecisionRequest r;
  RequestError e;
  ASSERT_TRUE(parse_request_body(R"({"key":"k","policy":"p"})", BodyKind::kDecision, kBounds, r, e));
  EXPECT_EQ(r.max_wait_ms, -1);  // not given: the policy's max_wait
  ASSERT_TRUE(parse_request_body(R"({"key":"k","policy":"p","max_wait_ms":250})", BodyKind::kDecision, kBounds, r, e));
  EXPECT_EQ(r.max_wait_ms, 250);
  ASSERT_TRUE(parse_request_body(R"({"key":"k","policy":"p","max_wait_ms":0})", BodyKind::kDecision, kBounds, r, e));
  EXPECT_EQ(r.max_wait_ms, 0);
  const std::string bad = "invalid_max_wait: 'max_wait_ms' must be a whole number of milliseconds between 0 and 3600000";
  EXPECT_EQ(refusal(R"({"key":"k","policy":"p","max_wait_ms":-1})"), bad);
  EXPECT_EQ(refusal(R"({"key":"k","policy":"p","max_wait_ms":3600001})"), bad);
  EXPECT_EQ(refusal(R"({"key":"k","policy":"p","max_wait_ms":1.5})"), bad);
  EXPECT_EQ(refusal(R"({"key":"k","policy":"p","max_wait_ms":"1s"})"), bad);
  ASSERT_TRUE(parse_forward_auth_query("policy=a&max_wait_ms=1500", r, e));
  EXPECT_EQ(r.max_wait_ms, 1500);
  ASSERT_TRUE(parse_forward_auth_query("policy=a", r, e));
  EXPECT_EQ(r.max_wait_ms, -1);
  for (const char* q : {"policy=a&max_wait_ms=", "policy=a&max_wait_ms=-5", "policy=a&max_wait_ms=3600001",
                        "policy=a&max_wait_ms=12345678", "policy=a&max_wait_ms=1e3"}) {
    EXPECT_FALSE(parse_forward_auth_query(q, r, e)) << q;
    EXPECT_EQ(e.error, "invalid_max_wait") << q;
  }
  EXPECT_FALSE(parse_forward_auth_query("policy=a&max_wait_ms=1&max_wait_ms=2", r, e));
}

TEST(ForwardAuthQuery, DenyStatus) {
  DecisionRequest r;
  RequestError e;
  ASSERT_TRUE(parse_forward_auth_query("policy=a&deny_status=403", r, e));
  EXPECT_EQ(r.deny_status, 403u);
  ASSERT_TRUE(parse_forward_auth_query("policy=a", r, e));
  EXPECT_EQ(r.deny_status, 0u);  // reset between requests
  EXPECT_FALSE(parse_forward_auth_query("policy=a&deny_status=500", r, e));
  EXPECT_EQ(e.message, "deny_status must be 429, 403 or 401");
  EXPECT_FALSE(parse_forward_auth_query("policy=a&deny_status=403&deny_status=401", r, e));
}

// The client address of a forward-auth request (client_ip.h).
std::string client(std::string_view peer, const char* header, const std::vector<std::string>& trusted,
                   ClientHeader kind = ClientHeader::kXForwardedFor) {
  const auto t = TrustedProxies::parse(trusted);
  EXPECT_TRUE(static_cast<bool>(t));
  std::string h = header == nullptr ? "" : header;
  std::string out;
  client_address(peer, header == nullptr ? nullptr : &h, kind, *t, out);
  return out;
}

TEST(ClientAddress, NoTrustedProxiesIgnoresTheHeader) {
  EXPECT_EQ(client("127.0.0.1", "203.0.113.7", {}), "127.0.0.1");
  EXPECT_EQ(client("127.0.0.1", nullptr, {"127.0.0.1"}), "127.0.0.1");
}

TEST(ClientAddress, UntrustedPeerIgnoresTheHeader) {
  EXPECT_EQ(client("198.51.100.9", "203.0.113.7", {"10.0.0.0/8"}), "198.51.100.9");
}

TEST(ClientAddress, ForgedLeftElementsAreSkipped) {
  // nginx's $proxy_add_x_forwarded_for appends the real peer after what the client sent.
  EXPECT_EQ(client("127.0.0.1", "1.2.3.4, 203.0.113.7", {"127.0.0.1/32"}), "203.0.113.7");
  EXPECT_EQ(client("127.0.0.1", "1.2.3.4, 203.0.113.7, 10.1.2.3", {"127.0.0.1", "10.0.0.0/8"}), "203.0.113.7");
  // Everything trusted: the left-most.
  EXPECT_EQ(client("127.0.0.1", "10.0.0.5, 10.0.0.6", {"127.0.0.1", "10.0.0.0/8"}), "10.0.0.5");
}

TEST(ClientAddress, EmptyOrMalformedElementStopsAtTheLastTrustedHop) {
  EXPECT_EQ(client("127.0.0.1", "", {"127.0.0.1"}), "127.0.0.1");
  EXPECT_EQ(client("127.0.0.1", "203.0.113.7, , 10.0.0.5", {"127.0.0.1", "10.0.0.0/8"}), "10.0.0.5");
  EXPECT_EQ(client("127.0.0.1", "203.0.113.7, garbage", {"127.0.0.1"}), "127.0.0.1");
  EXPECT_EQ(client("127.0.0.1", " 203.0.113.7 ,", {"127.0.0.1"}), "127.0.0.1");
}

TEST(ClientAddress, DuplicateHeadersAreOneList) {
  // The server joins repeated X-Forwarded-For fields with ", " in arrival order.
  EXPECT_EQ(client("127.0.0.1", "1.2.3.4, 203.0.113.7", {"127.0.0.1"}), "203.0.113.7");
}

TEST(ClientAddress, Ipv6) {
  EXPECT_EQ(client("::1", "1.2.3.4, 2001:db8::7", {"::1/128"}), "2001:db8::7");
  EXPECT_EQ(client("::1", "[2001:db8::7]:4711", {"::1"}), "2001:db8::7");
  EXPECT_EQ(client("::ffff:127.0.0.1", "203.0.113.7", {"127.0.0.0/8"}), "203.0.113.7");
  EXPECT_EQ(client("fd00::1", "2001:db8::7, fd00::2", {"fd00::/8"}), "2001:db8::7");
  EXPECT_EQ(client("fe00::1", "2001:db8::7", {"fd00::/8"}), "fe00::1");
  EXPECT_EQ(client("127.0.0.1", "203.0.113.7:80", {"127.0.0.1"}), "203.0.113.7");
}

TEST(ClientAddress, Rfc7239Forwarded) {
  EXPECT_EQ(client("127.0.0.1", "for=1.2.3.4, for=\"[2001:db8:cafe::17]:4711\";proto=http", {"127.0.0.1"},
                   ClientHeader::kForwarded),
            "2001:db8:cafe::17");
  EXPECT_EQ(client("127.0.0.1", "for=1.2.3.4, proto=https;FOR=192.0.2.60", {"127.0.0.1"}, ClientHeader::kForwarded),
            "192.0.2.60");
  EXPECT_EQ(client("127.0.0.1", "for=1.2.3.4, for=unknown", {"127.0.0.1"}, ClientHeader::kForwarded), "127.0.0.1");
  EXPECT_EQ(client("127.0.0.1", "for=1.2.3.4, by=10.0.0.1", {"127.0.0.1"}, ClientHeader::kForwarded), "127.0.0.1");
}

// An empty element (a proxy that appended to an empty header, or a client that sent ", x")
// is malformed: the walk stops at the last believed hop and never skips over it.
TEST(ClientAddress, EmptyElements) {
  EXPECT_EQ(client("127.0.0.1", ", 203.0.113.7", {"127.0.0.1"}), "203.0.113.7");
  EXPECT_EQ(client("127.0.0.1", ",203.0.113.7", {"127.0.0.1"}), "203.0.113.7");
  EXPECT_EQ(client("127.0.0.1", ", 10.0.0.5", {"127.0.0.1", "10.0.0.0/8"}), "10.0.0.5");
  EXPECT_EQ(client("127.0.0.1", "198.51.100.1, , 10.0.0.5", {"127.0.0.1", "10.0.0.0/8"}), "10.0.0.5");
  EXPECT_EQ(client("127.0.0.1", "", {"127.0.0.1"}), "127.0.0.1");
  EXPECT_EQ(client("127.0.0.1", " , ", {"127.0.0.1"}), "127.0.0.1");
  EXPECT_EQ(client("127.0.0.1", "203.0.113.7,", {"127.0.0.1"}), "127.0.0.1");
}

// The head screen (RFC 9112 §2.2, §5.2): what a lenient parser accepts and a proxy may frame
// differently is refused as soon as it arrives.
TEST(ScanRequestHead, CompleteNeedMoreAndEveryFault) {
  using S = HeadScan::State;
  const std::string ok = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-T: a\tb\r\n\r\n";
  EXPECT_EQ(scan_request_head(ok).state, S::kComplete);
  EXPECT_EQ(scan_request_head(ok).length, ok.size());
  EXPECT_EQ(scan_request_head(ok + "{\"body\":1}").length, ok.size());
  for (size_t cut = 0; cut < ok.size(); ++cut) {
    EXPECT_EQ(scan_request_head(std::string_view(ok).substr(0, cut)).state, S::kNeedMore) << cut;
  }
  const std::vector<std::pair<std::string, std::string_view>> bad = {
      {"GET / HTTP/1.1\nHost: x\r\n\r\n", "a bare LF (lines must end with CRLF)"},
      {"GET / HTTP/1.1\r\nHost: x\n\n", "a bare LF (lines must end with CRLF)"},
      {"GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", "a CR not followed by LF"},
      {"GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", "a folded header line (obs-fold)"},
      {"GET / HTTP/1.1\r\nA: b\r\n\tc\r\n\r\n", "a folded header line (obs-fold)"},
      {std::string("GET / HTTP/1.1\r\nA: b\0c\r\n\r\n", 25), "a NUL byte in the header"},
      {"GET / HTTP/1.1\r\nA: b\x01\r\n\r\n", "a control character in the header"},
      {"GET / HTTP/1.1\r\nA: b\x7f\r\n\r\n", "a control character in the header"},
      {"GET / HTTP/1.1\r\nA: b\r\n\r\x01", "a CR not followed by LF"},
  };
  for (const auto& [text, reason] : bad) {
    const HeadScan r = scan_request_head(text);
    EXPECT_EQ(r.state, S::kMalformed) << text;
    EXPECT_EQ(r.reason, reason) << text;
  }
  // Bytes after the head (a body) are not the screen's business.
  EXPECT_EQ(scan_request_head(ok + std::string("\0\n\r", 3)).state, S::kComplete);
}

// The scan passes printable runs a word at a time: a fault at any offset of a long line, and
// every byte value beside printable neighbours, must be judged as one byte at a time would.
TEST(ScanRequestHead, EveryByteAtEveryOffsetOfALongLine) {
  using S = HeadScan::State;
  const std::string line = "POST /v1/acquire HTTP/1.1\r\nContent-Type: application/json-and-more\r\n";
  const size_t value_at = line.find("application");
  for (int b = 0; b < 256; ++b) {
    const auto c = static_cast<char>(b);
    const bool printable = (b >= 0x20 && b != 0x7f) || b == '\t';
    for (size_t at = value_at; at < value_at + 20; ++at) {
      std::string head = line;
      head[at] = c;
      head += "\r\n";
      const HeadScan r = scan_request_head(head);
      if (printable) {
        EXPECT_EQ(r.state, S::kComplete) << b << " at " << at;
        EXPECT_EQ(r.length, head.size());
      } else {
        EXPECT_EQ(r.state, S::kMalformed) << b << " at " << at;
        const std::string_view want = b == '\n' ? "a bare LF (lines must end with CRLF)"
                                      : b == '\r' ? "a CR not followed by LF"
                                      : b == 0 ? "a NUL byte in the header"
                                               : "a control character in the header";
        EXPECT_EQ(r.reason, want) << b << " at " << at;
      }
    }
  }
}

TEST(TrustedProxies, RefusesBadEntries) {
  EXPECT_FALSE(static_cast<bool>(TrustedProxies::parse({"10.0.0.0/33"})));
  EXPECT_FALSE(static_cast<bool>(TrustedProxies::parse({"::/129"})));
  EXPECT_FALSE(static_cast<bool>(TrustedProxies::parse({"example.com"})));
  EXPECT_FALSE(static_cast<bool>(TrustedProxies::parse({"10.0.0.0/"})));
  EXPECT_FALSE(static_cast<bool>(TrustedProxies::parse({"10.0.0.0/x"})));
  EXPECT_TRUE(static_cast<bool>(TrustedProxies::parse({"0.0.0.0/0", "::/0"})));
}


// "limit": the caller's own limit for one policy (its bounds are the policy's request_limit,
// checked by the API, not here).
TEST(RequestBody, OwnLimitForOnePolicy) {
  DecisionRequest r;
  RequestError e;
  ASSERT_TRUE(parse_request_body(R"({"key":"tenant:7","policy":"plan","limit":5000})", BodyKind::kDecision,
                                 kBounds, r, e)) << e.message;
  EXPECT_EQ(r.limit, 5000);
  ASSERT_TRUE(parse_request_body(R"({"key":"tenant:7","policy":"plan"})", BodyKind::kDecision, kBounds, r, e));
  EXPECT_EQ(r.limit, 0);  // reset from the previous parse: not given
  EXPECT_EQ(refusal(R"({"key":"k","policies":["a","b"],"limit":5})"),
            "invalid_request: 'limit' applies to one 'policy', not to 'policies'");
  for (const char* bad : {R"({"key":"k","policy":"a","limit":0})", R"({"key":"k","policy":"a","limit":-3})",
                          R"({"key":"k","policy":"a","limit":1.5})", R"({"key":"k","policy":"a","limit":"9"})",
                          R"({"key":"k","policy":"a","limit":1000000001})",
                          R"({"key":"k","policy":"a","limit":18446744073709551615})"}) {
    EXPECT_EQ(refusal(bad), "invalid_limit: 'limit' must be a whole number between 1 and 1000000000") << bad;
  }
  EXPECT_EQ(refusal(R"({"key":"k","policy":"a","limit":5})", BodyKind::kReset),
            "invalid_request: unknown field 'limit' (allowed: key, policy)");
}

}  // namespace
}  // namespace ratelimit::server
