-- single.lua — entry point of a one-algorithm EVALSHA script (appended after common.lua, the
-- algorithm's file, entry.lua and the line `local algorithm = <name>` by the build, see
-- embed_lua.cmake). KEYS, ARGV and the reply: run_single in entry.lua.
return run_single(algorithm, KEYS, ARGV)
