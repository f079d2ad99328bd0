-- acquire_all.lua — entry point of the all-or-nothing EVALSHA script (appended after common.lua,
-- the five algorithm files, entry.lua and multi.lua). KEYS, ARGV and the reply: run_all in
-- multi.lua.
return run_all(KEYS, ARGV)
