// resp_test.cc — the Redis-protocol framing of resp_listen (resp_parser.h), in process: the two
// request forms Redis reads (multibulk and inline, with its quoting), the bounds checked before
// anything is buffered for a declared size, Redis's protocol-error messages, and the reply
// encodings in RESP2 and RESP3. The connection itself is tested end to end on the real binary
// (e2e_resp_test.cc).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ratelimit/algorithms.h"
#include "resp_parser.h"

namespace ratelimit::server {
namespace {

struct Parsed {
  RespParse state;
  std::vector<std::string> args;
  size_t length = 0;
  std::string error;
};

Parsed parse(std::string_view in, RespBounds bounds = {}) {
  RespCommand c;
  Parsed p;
  p.state = parse_resp_command(in, bounds, c, p.error);
  for (std::string_view a : c.args) p.args.emplace_back(a);
  p.length = c.length;
  return p;
}

using Args = std::vector<std::string>;

TEST(RespParser, Multibulk) {
  const std::string in = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n*1\r\n$4\r\nPING\r\n";
  const Parsed p = parse(in);
  ASSERT_EQ(p.state, RespParse::kCommand);
  EXPECT_EQ(p.args, (Args{"SET", "k", ""}));
  EXPECT_EQ(p.length, in.find("*1"));
  // Binary-safe: CR, LF and NUL inside a bulk are data.
  const Parsed b = parse(std::string("*1\r\n$5\r\na\r\n\0b\r\n", 15));
  ASSERT_EQ(b.state, RespParse::kCommand);
  EXPECT_EQ(b.args, (Args{std::string("a\r\n\0b", 5)}));
}

TEST(RespParser, EveryPrefixNeedsMore) {
  const std::string in = "*2\r\n$4\r\nPING\r\n$11\r\nhello world\r\n";
  for (size_t n = 0; n < in.size(); ++n) {
    EXPECT_EQ(parse(in.substr(0, n)).state, RespParse::kNeedMore) << n;
  }
  EXPECT_EQ(parse(in).state, RespParse::kCommand);
}

TEST(RespParser, EmptyAndNullMultibulkAreSkipped) {
  for (std::string in : {"*0\r\n", "*-1\r\n"}) {
    const Parsed p = parse(in);
    EXPECT_EQ(p.state, RespParse::kSkip) << in;
    EXPECT_EQ(p.length, in.size());
  }
}

TEST(RespParser, ProtocolErrorsAsRedisWordsThem) {
  EXPECT_EQ(parse("*x\r\n").error, "Protocol error: invalid multibulk length");
  EXPECT_EQ(parse("*1\r\n:1\r\n").error, "Protocol error: expected '$', got ':'");
  // A nested array is not a request: requests are one level of bulk strings.
  EXPECT_EQ(parse("*1\r\n*1\r\n$1\r\na\r\n").error, "Protocol error: expected '$', got '*'");
  EXPECT_EQ(parse("*1\r\n$-1\r\n").error, "Protocol error: invalid bulk length");
  EXPECT_EQ(parse("*1\r\n$1x\r\n").error, "Protocol error: invalid bulk length");
  EXPECT_EQ(parse("*1\r\n$1\r\nab\r\n").error, "Protocol error: expected CRLF after a bulk string");
  EXPECT_EQ(parse("*1\r\n$1\r\n").state, RespParse::kNeedMore);
  EXPECT_EQ(parse("*1\n").error, "Protocol error: invalid multibulk length");
  EXPECT_EQ(parse("SET \"a\n").error, "Protocol error: unbalanced quotes in request");
  EXPECT_EQ(parse("SET \"a\"b\n").error, "Protocol error: unbalanced quotes in request");
}

TEST(RespParser, DeclaredSizesAreBoundedBeforeTheirBytesArrive) {
  const RespBounds b{64, 4};
  // A huge bulk is refused on its header alone (nothing more is awaited or buffered).
  EXPECT_EQ(parse("*1\r\n$999999999999\r\n", b).error, "Protocol error: invalid bulk length");
  EXPECT_EQ(parse("*1\r\n$9999999999999999999999\r\n", b).error, "Protocol error: invalid bulk length");
  EXPECT_EQ(parse("*1\r\n$65\r\n", b).error, "Protocol error: invalid bulk length");
  // Several bulks within bounds each, but not together.
  EXPECT_EQ(parse("*2\r\n$30\r\n012345678901234567890123456789\r\n$30\r\n", b).error,
            "Protocol error: command too big (limits.max_body_bytes 64)");
  EXPECT_EQ(parse("*5\r\n", b).error, "Protocol error: invalid multibulk length (at most 4 arguments)");
  EXPECT_EQ(parse("*1048577\r\n").error, "Protocol error: invalid multibulk length (at most 1024 arguments)");
  // An inline line without its newline is refused once it is longer than the bound.
  EXPECT_EQ(parse(std::string(64, 'a'), b).state, RespParse::kNeedMore);
  EXPECT_EQ(parse(std::string(65, 'a'), b).error, "Protocol error: too big inline request");
  EXPECT_EQ(parse("a b c d e\n", b).error, "Protocol error: too many arguments (at most 4)");
}

TEST(RespParser, InlineCommandsSplitAsRedisDoes) {
  const Parsed p = parse("CL.THROTTLE user123 15 30 60\r\nPING\r\n");
  ASSERT_EQ(p.state, RespParse::kCommand);
  EXPECT_EQ(p.args, (Args{"CL.THROTTLE", "user123", "15", "30", "60"}));
  EXPECT_EQ(p.length, 30u);
  EXPECT_EQ(parse("  ping  \n").args, (Args{"ping"}));
  EXPECT_EQ(parse("set \"a b\" 'c d' \"\\x41\\n\" 'it\\'s' \"q\\\"\"\n").args,
            (Args{"set", "a b", "c d", "A\n", "it's", "q\""}));
  EXPECT_EQ(parse("set ab\"c d\"\n").args, (Args{"set", "abc d"}));
  EXPECT_EQ(parse("echo ''\n").args, (Args{"echo", ""}));
  EXPECT_EQ(parse("\r\n").state, RespParse::kSkip);
  EXPECT_EQ(parse("   \n").length, 4u);
  EXPECT_EQ(parse("PING").state, RespParse::kNeedMore);
}

TEST(RespReply, Resp2AndResp3) {
  std::string two, three;
  for (auto [out, proto] : {std::pair<std::string*, int>{&two, 2}, {&three, 3}}) {
    RespReply r(*out, proto);
    r.map(1);
    r.bulk("limited");
    r.boolean(true);
    r.null();
    r.integer(-1);
    r.simple("OK\r\nx");
    r.error("ERR bad");
    r.array(0);
  }
  EXPECT_EQ(two, "*2\r\n$7\r\nlimited\r\n:1\r\n$-1\r\n:-1\r\n+OK  x\r\n-ERR bad\r\n*0\r\n");
  EXPECT_EQ(three, "%1\r\n$7\r\nlimited\r\n#t\r\n_\r\n:-1\r\n+OK  x\r\n-ERR bad\r\n*0\r\n");
}

// CL.THROTTLE decides with src/core's token bucket of max_burst + 1 at count/period (resp_api.h).
// redis-cell's own table (redis-cell-impl/src/lib.rs, it_rate_limits: max_burst 4 at 1/s; time
// in ms from its start, quantity, then what it expects) on a manual clock, to the microsecond:
// the two are the same GCRA, also where a level is fractional (3.1 s: remaining 1, reset 3.9 s),
// which the e2e test (real clock) cannot pin down. Quantity 0 (redis-cell's peek) is the core's
// peek of cost 0: the math answers it, only ratelimitd's cost validation refuses it today.
TEST(RespCellTable, TokenBucketIsRedisCellsGcra) {
  struct Case {
    int64_t at_ms, quantity;
    bool limited;
    int64_t remaining, reset_ms, retry_ms;  // retry -1: none (admitted, or can never pass)
  };
  const Case cases[] = {
      {0, 6, true, 5, 0, -1},           {0, 1, false, 4, 1000, -1},       {0, 1, false, 3, 2000, -1},
      {0, 1, false, 2, 3000, -1},       {0, 1, false, 1, 4000, -1},       {0, 1, false, 0, 5000, -1},
      {0, 1, true, 0, 5000, 1000},      {3000, 1, false, 2, 3000, -1},    {3100, 1, false, 1, 3900, -1},
      {4000, 1, false, 1, 4000, -1},    {8000, 1, false, 4, 1000, -1},    {9500, 1, false, 4, 1000, -1},
      {9500, 0, false, 4, 1000, -1},    {9500, 2, false, 2, 3000, -1},    {9500, 5, true, 2, 3000, 3000},
  };
  const Policy policy = Policy::token_bucket(1.0, 5).value();
  algo::TokenBucketState state;
  const int64_t start_us = 1'700'000'000'000'000;
  int n = 0;
  for (const Case& c : cases) {
    const algo::Op op = c.quantity == 0 ? algo::Op::kPeek : algo::Op::kAcquire;
    const Decision d = algo::decide(policy, state, start_us + c.at_ms * 1000, c.quantity, op);
    EXPECT_EQ(!d.allowed, c.limited) << "case " << n;
    EXPECT_EQ(d.limit, 5) << "case " << n;
    EXPECT_EQ(d.remaining, c.remaining) << "case " << n;
    EXPECT_EQ(d.reset_after.count(), c.reset_ms * 1000) << "case " << n;
    const bool waits = !d.allowed && d.reason == DecisionReason::kOverLimit;
    EXPECT_EQ(waits ? d.retry_after.count() : -1000, c.retry_ms * 1000) << "case " << n;
    ++n;
  }
}

}  // namespace
}  // namespace ratelimit::server
