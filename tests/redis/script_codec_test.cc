// script_codec_test.cc — the Redis store's pure half: key names (hash tag, escaping), the
// EVALSHA command layout (KEYS vs ARGV), reply decoding and failure decisions. No Redis here.
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <set>

#include "lua_scripts.h"
#include "script_codec.h"

namespace ratelimit::redis_detail {
namespace {

Policy named(Result<Policy> p, const char* name) { return p->with_name(name).value(); }

TEST(RedisKeys, StateKeyShape) {
  EXPECT_EQ(redis_state_key("rl:", "user:42", "api"), "rl:{user:42}:api");
  EXPECT_EQ(log_key(redis_state_key("rl:", "u", "api")), "rl:{u}:api#log");
}

TEST(RedisKeys, BracesAndPercentAreEscapedSoTheTagCannotBeEscaped) {
  EXPECT_EQ(escape_key("a}b{c%d"), "a%7Db%7Bc%25d");
  const std::string k = redis_state_key("rl:", "}:other{", "api");
  EXPECT_EQ(k, "rl:{%7D:other%7B}:api");
  // The hash tag (first '{' to the next '}') is the whole escaped key.
  const size_t open = k.find('{');
  const size_t close = k.find('}', open);
  EXPECT_EQ(k.substr(open + 1, close - open - 1), escape_key("}:other{"));
}

TEST(RedisKeys, EscapingIsInjective) {
  // Pairs that would collide under a naive or partial escaping.
  const std::vector<std::string> keys = {"a", "a}", "a%7D", "%7D", "}", "{", "%", "%25",
                                         "%2525", "a b", "a\r\nb", std::string("a\0b", 3),
                                         "\xff\xfe", "}:api", "x}:api#log"};
  std::set<std::string> names;
  for (const auto& k : keys) {
    EXPECT_TRUE(names.insert(redis_state_key("rl:", k, "api")).second) << k;
    EXPECT_EQ(escape_key(k).find_first_of("{}"), std::string::npos) << k;
  }
}

// The release feed's message (concurrency.lua: "<lease id> <state key>") read back into the policy
// and the user key, for every key escape_key may produce; other prefixes and malformed messages
// are refused.
TEST(RedisKeys, ReleasedMessagesParseBackToPolicyAndKey) {
  const std::string id = "0123456789abcdef0123456789abcdef";
  for (const std::string key : {"user:42", "a}b{c%d", "}:other{", "%7B", " spaced key "}) {
    const auto r = parse_released("rl:", id + " " + redis_state_key("rl:", key, "db"));
    ASSERT_TRUE(r.has_value()) << key;
    EXPECT_EQ(r->key, key);
    EXPECT_EQ(r->policy, "db");
    EXPECT_EQ(r->lease.to_hex(), id);
  }
  EXPECT_TRUE(parse_released("", id + " " + redis_state_key("", "k", "p")).has_value());
  EXPECT_FALSE(parse_released("other:", id + " " + redis_state_key("rl:", "k", "db")).has_value());
  EXPECT_FALSE(parse_released("rl:", "xyz " + redis_state_key("rl:", "k", "db")).has_value());
  EXPECT_FALSE(parse_released("rl:", id + redis_state_key("rl:", "k", "db")).has_value());
  EXPECT_FALSE(parse_released("rl:", id + " rl:{k}:").has_value());
  EXPECT_FALSE(parse_released("rl:", id + " rl:{k%41}:db").has_value());
  EXPECT_FALSE(parse_released("rl:", id + " rl:{k:db").has_value());
  EXPECT_FALSE(parse_released("rl:", "").has_value());
}

TEST(RedisKeys, LogKeyCannotCollideWithAnotherPolicysStateKey) {
  // '#' is not allowed in policy names, so "<state>#log" is never a state key.
  EXPECT_FALSE(validate_policy_name("api#log").is_ok());
}

TEST(RedisScripts, DecideCallPutsKeysInKeysAndValuesInArgv) {
  auto p = named(Policy::leaky_bucket(2.5, 7, LeakyMode::kShape), "up");
  ScriptCall c = decide_call("rl:", p, "k", 3, algo::Op::kPeek, std::nullopt);
  EXPECT_EQ(c.script, kScriptLeakyBucket);
  EXPECT_EQ(c.keys, std::vector<std::string>{"rl:{k}:up"});
  ASSERT_EQ(c.args.size(), 8u);
  EXPECT_EQ(c.args[0], "-");  // the server's clock
  EXPECT_EQ(c.args[1], "3");
  EXPECT_EQ(c.args[2], "1");  // peek
  EXPECT_EQ(c.args[3], "7");
  EXPECT_EQ(c.args[4], std::to_string(p.window().count()));
  EXPECT_EQ(std::stod(c.args[5]), 2.5);
  EXPECT_EQ(c.args[6], "1");  // shape
  EXPECT_EQ(c.args[7], "0");

  auto log = named(Policy::sliding_window_log(10, std::chrono::seconds(1)), "l");
  ScriptCall lc = decide_call("p:", log, "k", 1, algo::Op::kAcquire, int64_t{1234});
  EXPECT_EQ(lc.keys, (std::vector<std::string>{"p:{k}:l", "p:{k}:l#log"}));
  EXPECT_EQ(lc.args[0], "1234");  // test clock
}

TEST(RedisScripts, RateRoundTripsExactly) {
  for (double rate : {1e-6, 0.1, 1.0 / 3.0, 2.5, 16666666.666666666, 1e9}) {
    auto p = Policy::token_bucket(rate, 5).value();
    ScriptCall c = decide_call("rl:", p, "k", 1, algo::Op::kAcquire, std::nullopt);
    EXPECT_EQ(std::strtod(c.args[5].c_str(), nullptr), rate) << c.args[5];
  }
}

TEST(RedisScripts, AcquireAllKeysShareOneHashTag) {
  std::vector<Policy> ps = {named(Policy::fixed_window(5, std::chrono::seconds(1)), "a"),
                            named(Policy::sliding_window_log(5, std::chrono::seconds(1)), "b")};
  ScriptCall c = acquire_all_call("rl:", ps, "u{1}", 1, algo::Op::kAcquire, std::nullopt);
  EXPECT_EQ(c.script, kScriptAcquireAll);
  ASSERT_EQ(c.keys.size(), 4u);
  for (const auto& k : c.keys) EXPECT_TRUE(k.starts_with("rl:{u%7B1%7D}:")) << k;
  EXPECT_EQ(c.args.size(), 3u + 6u * 2u);
  EXPECT_EQ(c.args[3], "0");  // fixed_window
  EXPECT_EQ(c.args[9], "1");  // sliding_window_log
}

// A batch sends each distinct (algorithm, policy) once and one argument per item: the
// policy's index, with cost and op unless an acquire of 1; the sliding log's two keys stay with
// their item. The clock is one "-" for the batch, or each item's time once a test clock set one.
TEST(RedisScripts, BatchSendsEachPolicyOnceAndOneArgumentPerItem) {
  auto a = named(Policy::fixed_window(5, std::chrono::seconds(1)), "a");
  auto b = named(Policy::sliding_window_log(7, std::chrono::seconds(2)), "b");
  const ScriptCall c1 = decide_call("rl:", a, "x", 1, algo::Op::kAcquire, std::nullopt);
  const ScriptCall c2 = decide_call("rl:", b, "y", 2, algo::Op::kPeek, std::nullopt);
  const ScriptCall c3 = decide_call("rl:", a, "z", 3, algo::Op::kAcquire, std::nullopt);
  const ScriptCall* items[] = {&c1, &c2, &c3};
  const ScriptCall batch = batch_call(items);
  EXPECT_EQ(batch.script, kScriptBatch);
  EXPECT_EQ(batch.keys, (std::vector<std::string>{"rl:{x}:a", "rl:{y}:b", "rl:{y}:b#log", "rl:{z}:a"}));
  const std::vector<std::string> want = {
      "2",                                                   // distinct policies
      "-",                                                   // the server's clock
      "0", "5", std::to_string(a.window().count()), c1.args[5], "0", "0",  // 1: fixed_window a
      "1", "7", std::to_string(b.window().count()), c2.args[5], "0", "0",  // 2: sliding log b
      "1",                                                   // x: policy 1, acquire of 1
      "2:2:1",                                               // y: policy 2, cost 2, peek
      "1:3:0"};                                              // z: policy 1 again, cost 3
  EXPECT_EQ(batch.args, want);

  // A test clock: every item carries its time ("-" where none was given).
  const ScriptCall c4 = decide_call("rl:", a, "w", 1, algo::Op::kAcquire, int64_t{99});
  const ScriptCall* timed[] = {&c1, &c4};
  const ScriptCall t = batch_call(timed);
  ASSERT_EQ(t.args.size(), 2u + 6u + 4u);
  EXPECT_EQ(t.args[1], "t");
  EXPECT_EQ((std::vector<std::string>(t.args.begin() + 8, t.args.end())),
            (std::vector<std::string>{"1", "-", "1", "99"}));

  // The same name with other parameters (a reload) is another policy.
  auto a2 = named(Policy::fixed_window(6, std::chrono::seconds(1)), "a");
  const ScriptCall c5 = decide_call("rl:", a2, "x", 1, algo::Op::kAcquire, std::nullopt);
  const ScriptCall* two[] = {&c1, &c5};
  EXPECT_EQ(batch_call(two).args[0], "2");
}

TEST(RedisScripts, EvalshaEncodingIsBinarySafe) {
  ScriptCall c;
  c.script = kScriptTokenBucket;
  c.keys = {std::string("a\r\n\0b", 5)};
  c.args = {"-"};
  const std::string bytes = encode_evalsha(c);
  redisReader* r = redisReaderCreate();
  ASSERT_EQ(redisReaderFeed(r, bytes.data(), bytes.size()), REDIS_OK);
  void* raw = nullptr;
  ASSERT_EQ(redisReaderGetReply(r, &raw), REDIS_OK);  // a command is an array of bulk strings
  auto* reply = static_cast<redisReply*>(raw);
  ASSERT_EQ(reply->type, REDIS_REPLY_ARRAY);
  ASSERT_EQ(reply->elements, 5u);
  EXPECT_EQ(std::string(reply->element[1]->str, reply->element[1]->len),
            kLuaScripts[kScriptTokenBucket].sha1);
  EXPECT_EQ(std::string(reply->element[2]->str), "1");
  EXPECT_EQ(std::string(reply->element[3]->str, reply->element[3]->len),
            std::string("a\r\n\0b", 5));
  freeReplyObject(reply);
  redisReaderFree(r);
}

// Builds a reply the way Redis would send it, through hiredis' own reader.
redisReply* parse(const std::string& resp) {
  redisReader* r = redisReaderCreate();
  redisReaderFeed(r, resp.data(), resp.size());
  void* raw = nullptr;
  redisReaderGetReply(r, &raw);
  redisReaderFree(r);
  return static_cast<redisReply*>(raw);
}

// Four integers per decision: reason, remaining, reset_after, and retry_after when denied,
// delay when allowed.
TEST(RedisReplies, DecodesFourIntegersPerDecision) {
  redisReply* reply = parse("*8\r\n:1\r\n:3\r\n:900\r\n:450\r\n:0\r\n:4\r\n:800\r\n:250\r\n");
  const int64_t limits[] = {10, 20};
  auto d = decode_decisions(reply, limits);
  freeReplyObject(reply);
  ASSERT_TRUE(d.ok()) << d.status().to_string();
  ASSERT_EQ(d->size(), 2u);
  const Decision& x = d->front();
  EXPECT_FALSE(x.allowed);
  EXPECT_EQ(x.reason, DecisionReason::kOverLimit);
  EXPECT_EQ(x.limit, 10);
  EXPECT_EQ(x.remaining, 3);
  EXPECT_EQ(x.reset_after.count(), 900);
  EXPECT_EQ(x.retry_after.count(), 450);
  EXPECT_EQ(x.delay.count(), 0);
  const Decision& y = d->back();
  EXPECT_TRUE(y.allowed);
  EXPECT_EQ(y.reason, DecisionReason::kWithinLimit);
  EXPECT_EQ(y.limit, 20);
  EXPECT_EQ(y.remaining, 4);
  EXPECT_EQ(y.reset_after.count(), 800);
  EXPECT_EQ(y.retry_after.count(), 0);
  EXPECT_EQ(y.delay.count(), 250);
}

TEST(RedisReplies, RejectsErrorsAndMalformedReplies) {
  const int64_t limits[] = {10};
  for (const char* resp : {"-ERR boom\r\n", "*2\r\n:1\r\n:0\r\n", "$2\r\nok\r\n",
                           "*6\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n:0\r\n",
                           "*4\r\n:7\r\n:0\r\n:0\r\n:0\r\n",
                           "*4\r\n:-1\r\n:0\r\n:0\r\n:0\r\n",
                           "*4\r\n:0\r\n$1\r\n0\r\n:0\r\n:0\r\n"}) {
    redisReply* reply = parse(resp);
    auto d = decode_decisions(reply, limits);
    freeReplyObject(reply);
    EXPECT_FALSE(d.ok()) << resp;
  }
  redisReply* noscript = parse("-NOSCRIPT No matching script. Please use EVAL.\r\n");
  EXPECT_TRUE(is_noscript(noscript));
  freeReplyObject(noscript);
}

TEST(RedisFailure, OpenAdmitsClosedDeniesBothMarked) {
  Decision open = failure_decision(FailurePolicy::kOpen, 10);
  EXPECT_TRUE(open.allowed);
  EXPECT_EQ(open.reason, DecisionReason::kStoreFailedOpen);
  EXPECT_EQ(open.retry_after.count(), 0);
  Decision closed = failure_decision(FailurePolicy::kClosed, 10);
  EXPECT_FALSE(closed.allowed);
  EXPECT_EQ(closed.reason, DecisionReason::kStoreFailedClosed);
  EXPECT_GT(closed.retry_after.count(), 0);
  EXPECT_EQ(closed.limit, 10);
}

TEST(RedisScripts, EmbeddedScriptsCarryTheirSha1) {
  for (const auto& s : kLuaScripts) {
    EXPECT_EQ(std::string(s.sha1).size(), 40u) << s.name;
    EXPECT_FALSE(s.text.empty()) << s.name;
  }
}

}  // namespace
}  // namespace ratelimit::redis_detail
