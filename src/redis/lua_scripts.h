// lua_scripts.h — the Lua scripts the Redis store runs, embedded at build time
// (embed_lua.cmake assembles src/redis/lua/*.lua into lua_scripts.cc, with each script's SHA1).
//
// Invariants: kLuaScripts[i] is the script for ScriptId i; the first six follow the order of
// ratelimit::Algorithm, so a policy's algorithm is its script's index. `sha1` is the SHA1 of
// `text`, the name SCRIPT LOAD answers and EVALSHA takes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ratelimit::redis_detail {

enum ScriptId : size_t {
  kScriptFixedWindow = 0,
  kScriptSlidingWindowLog = 1,
  kScriptSlidingWindowCounter = 2,
  kScriptTokenBucket = 3,
  kScriptLeakyBucket = 4,
  kScriptConcurrency = 5,
  kScriptAcquireAll = 6,
  kScriptBatch = 7,
  kScriptDecideMany = 8,  // all or nothing across keys (decide_many.lua)
  kScriptReserve = 9,     // lease: give back, then reserve a slice (distributed.lua)
  kScriptAddHits = 10,    // async: add pushed hits (distributed.lua)
  kScriptCount = 11,
};

struct LuaScript {
  const char* name;  // "token_bucket", ..., "acquire_all", "batch", "decide_many", "reserve", "add_hits"
  const char* sha1;  // 40 lower-case hex digits
  std::string_view text;
};

extern const LuaScript kLuaScripts[kScriptCount];

// The same code as one Redis Functions library (Redis >= 7): FUNCTION LOAD REPLACE `text`
// registers `function_name(id)` for every ScriptId. `version` is
// 12 hex digits of the SHA1 of the library's text, part of every name, so two builds never
// share a name.
struct LuaLibrary {
  const char* name;     // "ratelimit_<version>"
  const char* version;  // 12 lower-case hex digits
  std::string_view text;
};
extern const LuaLibrary kLuaLibrary;

// "rl<version>_<script name>": the function FCALL names for a script (every ScriptId).
std::string function_name(ScriptId id);

}  // namespace ratelimit::redis_detail
