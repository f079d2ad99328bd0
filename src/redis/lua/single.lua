-- single.lua — entry point of a one-algorithm script (appended after common.lua, the
-- algorithm's file and the line `local algorithm = <name>` by the build, see CMakeLists.txt).
--
-- KEYS: the algorithm's keys (KEYS[1] its state; the sliding log also KEYS[2], its entries).
-- ARGV: now ('-' = the server's TIME; an integer µs only in test mode), cost, op (0 acquire,
--       1 peek), limit, window_us, rate, shape (0/1), count_denied (0/1).
-- Returns: allowed (0/1), reason, remaining, reset_after_us, retry_after_us, delay_us.
local now_us, test_mode = read_now(ARGV[1])
local cost = tonumber(ARGV[2])
local op = tonumber(ARGV[3])
local policy = read_policy(ARGV, 4)
local s = algorithm.load(KEYS)
local d = algorithm.decide(policy, s, now_us, cost, op)
persist(algorithm, policy, KEYS, s, now_us, test_mode)
local out = {}
push_decision(out, d)
return out
