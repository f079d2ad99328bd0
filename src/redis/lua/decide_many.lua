-- decide_many.lua — entry point of the EVALSHA script for all or nothing across several keys
-- (appended after common.lua, the five algorithm files, entry.lua and multi.lua). KEYS, ARGV and
-- the reply: run_many in multi.lua.
return run_many(KEYS, ARGV)
