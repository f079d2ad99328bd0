-- entry.lua — run_single, one decision as a plain function of (algorithm, keys, args), which
-- every way of calling the store shares: the one-algorithm EVALSHA scripts (single.lua) and the
-- function library (library.lua). Appended after common.lua and the algorithm file(s).
-- keys: the algorithm's keys (keys[1] its state; the sliding log also keys[2], its entries).
-- args: now ('-' = the server's TIME; an integer µs only in test mode), cost, op (0 acquire,
--       1 peek), limit, window_us, rate, shape (0/1), count_denied (0/1).
-- Returns: allowed (0/1), reason, remaining, reset_after_us, retry_after_us, delay_us.
local function run_single(algorithm, keys, args)
  local now_us, test_mode = read_now(args[1])
  local cost = tonumber(args[2])
  local op = tonumber(args[3])
  local policy = read_policy(args, 4)
  local s = algorithm.load(keys)
  local idle_before = algorithm.idle_at_us(policy, s)
  local d = algorithm.decide(policy, s, now_us, cost, op)
  persist(algorithm, policy, keys, s, now_us, test_mode, idle_before)
  local out = {}
  push_decision(out, d)
  return out
end

