// lua_scripts.h — the Lua scripts the Redis store runs, embedded at build time
// (embed_lua.cmake assembles src/redis/lua/*.lua into lua_scripts.cc, with each script's SHA1).
//
// Invariants: kLuaScripts[i] is the script for ScriptId i; the first five follow the order of
// ratelimit::Algorithm, so a policy's algorithm is its script's index. `sha1` is the SHA1 of
// `text`, the name SCRIPT LOAD answers and EVALSHA takes.
#pragma once

#include <cstddef>
#include <string_view>

namespace ratelimit::redis_detail {

enum ScriptId : size_t {
  kScriptFixedWindow = 0,
  kScriptSlidingWindowLog = 1,
  kScriptSlidingWindowCounter = 2,
  kScriptTokenBucket = 3,
  kScriptLeakyBucket = 4,
  kScriptAcquireAll = 5,
  kScriptCount = 6,
};

struct LuaScript {
  const char* name;  // "token_bucket", ..., "acquire_all"
  const char* sha1;  // 40 lower-case hex digits
  std::string_view text;
};

extern const LuaScript kLuaScripts[kScriptCount];

}  // namespace ratelimit::redis_detail
