-- reserve.lua — entry point of the reserve EVALSHA script (common.lua, fixed_window.lua,
-- sliding_window_counter.lua, distributed.lua before it). KEYS, ARGV, reply: run_reserve.
return run_reserve(KEYS, ARGV)
