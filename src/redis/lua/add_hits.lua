-- add_hits.lua — entry point of the add_hits EVALSHA script (common.lua, fixed_window.lua,
-- sliding_window_counter.lua, distributed.lua before it). KEYS, ARGV, reply: run_add_hits.
return run_add_hits(KEYS, ARGV)
