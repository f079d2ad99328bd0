// resp_test.cc — the Redis store's own RESP pieces against hiredis' reference implementations:
// encode_command() must produce exactly redisFormatCommandArgv's bytes, and a reader built on a
// ReplyArena must build exactly the reply trees of hiredis' default reader (every type, nesting,
// replies split across reads, replies larger than an arena chunk, many replies in a row).
#include <hiredis/hiredis.h>

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "reply_arena.h"
#include "resp.h"

namespace ratelimit::redis_detail {
namespace {

std::string hiredis_format(const std::vector<std::string>& argv) {
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (const auto& a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  char* cmd = nullptr;
  const auto len = redisFormatCommandArgv(&cmd, static_cast<int>(argv.size()), ptrs.data(),
                                          lens.data());
  std::string out(cmd, static_cast<size_t>(len));
  redisFreeCommand(cmd);
  return out;
}

TEST(Resp, EncodeCommandIsHiredisFormat) {
  std::mt19937 rng(7);
  std::vector<std::vector<std::string>> cases = {
      {"PING"},
      {"SET", "k", ""},
      {"EVALSHA", "abc", "1", std::string("a\r\n\0b", 5), "-"},
      {std::string(1000, 'x'), std::string(123456, '\xff')},
  };
  for (int i = 0; i < 200; ++i) {  // random argument counts, lengths and bytes
    std::vector<std::string> argv(1 + rng() % 40);
    for (auto& a : argv) {
      a.resize(rng() % (i % 10 == 0 ? 5000 : 30));
      for (auto& c : a) c = static_cast<char>(rng());
    }
    cases.push_back(std::move(argv));
  }
  for (const auto& argv : cases) EXPECT_EQ(encode_command(argv), hiredis_format(argv));
}

// The reply tree as text, for comparing two readers' results.
std::string describe(const redisReply* r) {
  if (r == nullptr) return "null";
  std::string out = "t" + std::to_string(r->type);
  switch (r->type) {
    case REDIS_REPLY_INTEGER: return out + ":" + std::to_string(r->integer);
    case REDIS_REPLY_NIL: return out;
    case REDIS_REPLY_ARRAY: {
      out += "[" + std::to_string(r->elements);
      for (size_t i = 0; i < r->elements; ++i) out += "," + describe(r->element[i]);
      return out + "]";
    }
    default: return out + ":" + std::string(r->str, r->len) + "/" + std::to_string(r->len) +
                    (r->str[r->len] == '\0' ? "z" : "NOZ");
  }
}

// Every reply of `stream`, fed in pieces of `piece` bytes, described. `arena` null: hiredis'
// default reader, each reply freed; else a reader on `arena`, reset after each reply as
// RespConnection does.
std::vector<std::string> replies(const std::string& stream, size_t piece, ReplyArena* arena) {
  std::vector<std::string> out;
  redisReader* r = arena != nullptr ? make_arena_reader(*arena) : redisReaderCreate();
  for (size_t at = 0; at < stream.size(); at += piece) {
    EXPECT_EQ(redisReaderFeed(r, stream.data() + at, std::min(piece, stream.size() - at)),
              REDIS_OK);
    for (;;) {
      void* raw = nullptr;
      EXPECT_EQ(redisReaderGetReply(r, &raw), REDIS_OK);
      if (raw == nullptr) break;
      out.push_back(describe(static_cast<redisReply*>(raw)));
      if (arena != nullptr) {
        arena->reset();
      } else {
        freeReplyObject(raw);
      }
    }
  }
  redisReaderFree(r);
  return out;
}

TEST(Resp, ArenaReaderBuildsTheSameRepliesAsHiredis) {
  std::string big_batch = "*6000\r\n";  // 1,000 decisions of six integers: several chunks
  for (int i = 0; i < 6000; ++i) big_batch += ":" + std::to_string(i * 7919 - 3) + "\r\n";
  const std::string info = "$40000\r\n" + std::string(40000, 'i') + "\r\n";  // > one chunk
  const std::string stream =
      "+OK\r\n-ERR boom\r\n:42\r\n:-9223372036854775808\r\n$-1\r\n*-1\r\n$0\r\n\r\n*0\r\n"
      "$5\r\na\r\nbc\r\n*3\r\n*2\r\n:1\r\n$1\r\nx\r\n*0\r\n$-1\r\n"
      "*6\r\n:0\r\n:1\r\n:3\r\n:900\r\n:450\r\n:0\r\n" +
      big_batch + info + "*2\r\n*1\r\n*1\r\n:5\r\n+done\r\n";
  const auto want = replies(stream, stream.size(), nullptr);
  ASSERT_EQ(want.size(), 14u);
  for (size_t piece : {stream.size(), size_t{1}, size_t{7}, size_t{4096}}) {
    ReplyArena arena;
    EXPECT_EQ(replies(stream, piece, &arena), want) << "fed in pieces of " << piece;
  }
}

TEST(Resp, ArenaMemoryIsZeroedAgainAfterReset) {
  ReplyArena arena;
  for (int round = 0; round < 100; ++round) {
    void* p = arena.allocate(100'000);  // a chunk of its own, kept by reset
    ASSERT_NE(p, nullptr);
    const auto* bytes = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < 100'000; i += 997) ASSERT_EQ(bytes[i], 0) << "not zeroed";
    static_cast<unsigned char*>(p)[500] = 0xab;
    arena.reset();
  }
}

}  // namespace
}  // namespace ratelimit::redis_detail
