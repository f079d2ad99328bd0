// lua_scripts.h — the Lua scripts the Redis store runs, embedded at build time
// (embed_lua.cmake assembles src/redis/lua/*.lua into lua_scripts.cc, with each script's SHA1).
//
// Invariants: kLuaScripts[i] is the script for ScriptId i; the first kAlgorithmCount are the
// algorithms', in table order, each named as its row (algorithm_table_test holds embed_lua.cmake's
// list of names to kAlgorithmTable). `sha1` is the SHA1 of
// `text`, the name SCRIPT LOAD answers and EVALSHA takes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "ratelimit/policy.h"

namespace ratelimit::redis_detail {

// The first kAlgorithmCount ids are the algorithms' own scripts, each at its algorithm's index
// (kAlgorithmTable, policy.h): script_of(a). The scripts that take several algorithms follow.
enum ScriptId : size_t {
  kScriptFixedWindow = algorithm_index(Algorithm::kFixedWindow),
  kScriptSlidingWindowLog = algorithm_index(Algorithm::kSlidingWindowLog),
  kScriptSlidingWindowCounter = algorithm_index(Algorithm::kSlidingWindowCounter),
  kScriptTokenBucket = algorithm_index(Algorithm::kTokenBucket),
  kScriptLeakyBucket = algorithm_index(Algorithm::kLeakyBucket),
  kScriptConcurrency = algorithm_index(Algorithm::kConcurrency),
  kScriptAcquireAll = kAlgorithmCount,
  kScriptBatch,
  kScriptDecideMany,  // all or nothing across keys (decide_many.lua)
  kScriptReserve,     // lease: give back, then reserve a slice (distributed.lua)
  kScriptAddHits,     // async: add pushed hits (distributed.lua)
  kScriptCount,
};

// The one-algorithm script (and FCALL function) of algorithm `a`.
constexpr ScriptId script_of(Algorithm a) { return static_cast<ScriptId>(algorithm_index(a)); }

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
