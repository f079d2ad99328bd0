# embed_lua.cmake — run at build time (cmake -P) to turn src/redis/lua/*.lua into
# lua_scripts.cc: the text of each script the store loads, and its SHA1 (the EVALSHA name), and
# the Redis Functions library (FUNCTION LOAD) with its version. Nothing is read from disk at run
# time.
#
# A script is assembled from parts: common.lua (the units.h mirror and shared plumbing), the
# algorithm file(s), entry.lua (run_single) and an entry point. One script per algorithm
# (common + <algorithm> + entry + `local algorithm = <algorithm>` + single.lua), plus
# acquire_all (common + all six + entry + multi.lua + acquire_all.lua), batch (the same with
# batch.lua), decide_many (the same with decide_many.lua), and reserve and add_hits (common +
# fixed_window + sliding_window_counter + distributed.lua + reserve.lua / add_hits.lua). Order of kScripts =
# enum ScriptId in lua_scripts.h. The library is `#!lua name=ratelimit_<version>` + common + all
# six + entry + multi + distributed + library.lua, with @V@ replaced by the version: the first 12 hex digits
# of the SHA1 of that text before the replacement.
# The library is also written on its own, as the contract every client loads (docs/
# redis-functions.md): <LIBRARY_DIR>/ratelimit_<version>.lua (FUNCTION LOAD-able as is) and
# <LIBRARY_DIR>/VERSION (the version, one line); older ratelimit_*.lua files there are removed,
# so the directory always holds exactly the library of this build.
# The algorithms and their ids come from the algorithm table, kAlgorithmTable in
# include/ratelimit/policy.h (row i: id i, its name): every script gets `local algorithm_id =
# {fixed_window = 0, ...}` after common.lua, and those with every algorithm also `local
# algorithms = {[0] = fixed_window, ...}` and `local algorithm_names = {[0] = 'fixed_window', ...}`
# after the algorithm files, so no Lua file lists them (algorithm_table_test checks the result).
# Inputs: -DLUA_DIR=<dir> -DTABLE=<policy.h> -DOUT=<file> -DLIBRARY_DIR=<dir>.
file(READ ${TABLE} table_text)
string(REGEX MATCHALL [=[{Algorithm::k[A-Za-z]+, "[a-z_]+", AlgorithmKind::k[A-Za-z]+}]=]
       rows "${table_text}")
set(algorithms "")
foreach(row IN LISTS rows)
  string(REGEX REPLACE [=[^.*"([a-z_]+)".*$]=] [=[\1]=] name "${row}")
  list(APPEND algorithms ${name})
endforeach()
list(LENGTH algorithms algorithm_count)
if(algorithm_count EQUAL 0)
  message(FATAL_ERROR "${TABLE}: found no row of kAlgorithmTable")
endif()
set(ids "")
set(by_id "")
set(names_by_id "")
set(id 0)
foreach(name IN LISTS algorithms)
  string(APPEND ids "${name} = ${id}, ")
  string(APPEND by_id "[${id}] = ${name}, ")
  string(APPEND names_by_id "[${id}] = '${name}', ")
  math(EXPR id "${id} + 1")
endforeach()
set(generated_ids "-- From kAlgorithmTable (include/ratelimit/policy.h), by embed_lua.cmake: each algorithm's id.
local algorithm_id = {${ids}}
")
set(generated_table "-- From kAlgorithmTable, by embed_lua.cmake: the algorithms by id, and their names.
local algorithms = {${by_id}}
local algorithm_names = {${names_by_id}}
local kAlgorithmCount = ${algorithm_count}
")

file(READ ${LUA_DIR}/common.lua common)
string(APPEND common "${generated_ids}")
file(READ ${LUA_DIR}/entry.lua entry)
file(READ ${LUA_DIR}/multi.lua multi)
file(READ ${LUA_DIR}/single.lua single)
file(READ ${LUA_DIR}/acquire_all.lua acquire_all)
file(READ ${LUA_DIR}/batch.lua batch)
file(READ ${LUA_DIR}/decide_many.lua decide_many)
file(READ ${LUA_DIR}/library.lua library)
file(READ ${LUA_DIR}/distributed.lua distributed)
file(READ ${LUA_DIR}/reserve.lua reserve)
file(READ ${LUA_DIR}/add_hits.lua add_hits)
file(READ ${LUA_DIR}/fixed_window.lua fixed_window_text)
file(READ ${LUA_DIR}/sliding_window_counter.lua sliding_window_counter_text)
# The adaptive estimators (adaptive.lua) go before their one user, concurrency.lua.
file(READ ${LUA_DIR}/adaptive.lua adaptive_text)

set(entries "")
set(all_algorithms "")
foreach(name IN LISTS algorithms)
  file(READ ${LUA_DIR}/${name}.lua text)
  if(name STREQUAL "concurrency")
    string(PREPEND text "${adaptive_text}")
  endif()
  string(APPEND all_algorithms "${text}")
  set(script "${common}${text}${entry}local algorithm = ${name}\n${single}")
  list(APPEND scripts "${name}")
  set(script_${name} "${script}")
endforeach()
string(APPEND all_algorithms "${generated_table}")
set(script_acquire_all "${common}${all_algorithms}${entry}${multi}${acquire_all}")
list(APPEND scripts acquire_all)
set(script_batch "${common}${all_algorithms}${entry}${multi}${batch}")
list(APPEND scripts batch)
set(script_decide_many "${common}${all_algorithms}${entry}${multi}${decide_many}")
list(APPEND scripts decide_many)
# The consistency modes' calls (lease, async): only the two window algorithms they are defined for.
set(distributed_body "${common}${fixed_window_text}${sliding_window_counter_text}${distributed}")
set(script_reserve "${distributed_body}${reserve}")
list(APPEND scripts reserve)
set(script_add_hits "${distributed_body}${add_hits}")
list(APPEND scripts add_hits)

set(library_body "${common}${all_algorithms}${entry}${multi}${distributed}${library}")
string(SHA1 library_sha "${library_body}")
string(SUBSTRING "${library_sha}" 0 12 library_version)
string(REPLACE "@V@" "${library_version}" library_body "${library_body}")
set(library_text "#!lua name=ratelimit_${library_version}\n${library_body}")
string(FIND "${library_text}" ")lua\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "library: text contains the raw-string delimiter )lua\"")
endif()

# Writes `text` to `path` only when it differs, so an unchanged library keeps its timestamp.
function(write_if_changed path text)
  if(EXISTS ${path})
    file(READ ${path} old)
    if(old STREQUAL text)
      return()
    endif()
  endif()
  file(WRITE ${path} "${text}")
endfunction()

if(LIBRARY_DIR)
  file(MAKE_DIRECTORY ${LIBRARY_DIR})
  file(GLOB stale ${LIBRARY_DIR}/ratelimit_*.lua)
  list(REMOVE_ITEM stale ${LIBRARY_DIR}/ratelimit_${library_version}.lua)
  if(stale)
    file(REMOVE ${stale})
  endif()
  write_if_changed(${LIBRARY_DIR}/ratelimit_${library_version}.lua "${library_text}")
  write_if_changed(${LIBRARY_DIR}/VERSION "${library_version}\n")
endif()

set(body "")
foreach(name IN LISTS scripts)
  set(text "${script_${name}}")
  string(FIND "${text}" ")lua\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${name}: script text contains the raw-string delimiter )lua\"")
  endif()
  string(SHA1 sha "${text}")
  string(APPEND body "    {\"${name}\", \"${sha}\", R\"lua(${text})lua\"},\n")
endforeach()

set(out "// Generated by src/redis/embed_lua.cmake from src/redis/lua/*.lua — do not edit.
#include \"lua_scripts.h\"

// The function library is one literal longer than the 65,536 characters the standard requires a
// compiler to accept; GCC and Clang accept far longer ones, and only Clang's -Woverlength-strings
// says so. Splitting it would not help (the limit applies to the concatenated literal).
#if defined(__clang__)
#pragma clang diagnostic ignored \"-Woverlength-strings\"
#endif

namespace ratelimit::redis_detail {

static_assert(kAlgorithmCount == ${algorithm_count}, \"embed_lua.cmake read every row of kAlgorithmTable\");

const LuaScript kLuaScripts[kScriptCount] = {
${body}};

const LuaLibrary kLuaLibrary = {\"ratelimit_${library_version}\", \"${library_version}\",
                                R\"lua(${library_text})lua\"};

}  // namespace ratelimit::redis_detail
")
# Rewrite only on change, so an unchanged script does not recompile the store.
write_if_changed(${OUT} "${out}")
