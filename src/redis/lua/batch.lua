-- batch.lua — entry point of the batch EVALSHA script (appended after common.lua, the five
-- algorithm files, entry.lua and multi.lua). KEYS, ARGV and the reply: run_batch in multi.lua.
return run_batch(KEYS, ARGV)
