-- library.lua — the Redis Functions library (Redis >= 7): the same entry points as the EVALSHA
-- scripts, registered once when the library is loaded (FUNCTION LOAD REPLACE on connect), so a
-- call builds none of the algorithms' tables and closures again, as every EVALSHA call must.
-- The build prepends `#!lua name=ratelimit_<version>`, common.lua, the algorithm files (with the
-- generated `algorithms` table), entry.lua, multi.lua and distributed.lua, and replaces @V@ by the version (12 hex digits of the SHA1 of the
-- library's text): versions never share a library or function name, so instances running
-- different builds can share one Redis, each calling its own code.
-- Function names: rl@V@_<algorithm> (keys/args of run_single), rl@V@_acquire_all (run_all),
-- rl@V@_batch (run_batch), rl@V@_decide_many (run_many), rl@V@_reserve (run_reserve),
-- rl@V@_add_hits (run_add_hits).
-- `algorithms`, `algorithm_names` and kAlgorithmCount: generated from kAlgorithmTable by the
-- build (embed_lua.cmake). (A numeric loop: Redis 7.0 loads a library with only some globals,
-- and `pairs` is not one.)
for id = 0, kAlgorithmCount - 1 do
  local algorithm = algorithms[id]
  redis.register_function('rl@V@_' .. algorithm_names[id],
                          function(keys, args) return run_single(algorithm, keys, args) end)
end
redis.register_function('rl@V@_acquire_all', run_all)
redis.register_function('rl@V@_batch', run_batch)
redis.register_function('rl@V@_decide_many', run_many)
redis.register_function('rl@V@_reserve', run_reserve)
redis.register_function('rl@V@_add_hits', run_add_hits)
