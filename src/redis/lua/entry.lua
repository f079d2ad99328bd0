-- entry.lua — run_single, one decision as a plain function of (algorithm, keys, args), which
-- every way of calling the store shares: the one-algorithm EVALSHA scripts (single.lua) and the
-- function library (library.lua), and decide_one, which every item of a batch shares with it.
-- Appended after common.lua and the algorithm file(s).
-- One decision on `keys` (the algorithm's keys), appended to `out`: what run_single and every
-- item of run_batch do. cost_arg is cost as a decimal string (an argument as it came).
-- An algorithm with an `acquire` (fixed_window.lua) decides the acquires its `fast` accepts
-- itself, with fewer commands; one with a `run` (concurrency.lua) works on its keys in place and
-- takes the lease id; every other decision is load + decide + persist, or a policy conflict
-- when the state was written under another definition of the name (load's s.foreign).
-- algo::report (src/core/decide.cc): records a report (cost may be negative: a refund) and
-- answers the state after it as a cost-0 peek sees it, admitted (a report is never refused).
local function report(algorithm, policy, s, now_us, cost)
  algorithm.record(policy, s, now_us, cost)
  local d = algorithm.decide(policy, s, now_us, 0, kPeek)
  d.allowed, d.reason, d.retry_after, d.delay = true, kWithinLimit, 0, 0
  return d
end

-- algo::decide for every op of a rate algorithm: a report through report(), the rest decide().
local function decide_state(algorithm, policy, s, now_us, cost, op)
  if op == kReport then return report(algorithm, policy, s, now_us, cost) end
  return algorithm.decide(policy, s, now_us, cost, op)
end

local function decide_one(algorithm, policy, keys, now_us, test_mode, cost, cost_arg, op, out,
                          lease)
  if algorithm.run ~= nil then
    push_decision(out, algorithm.run(policy, keys, now_us, test_mode, cost, op, lease))
    return
  end
  if algorithm.acquire ~= nil and op == kAcquire and algorithm.fast(policy, cost) then
    algorithm.acquire(policy, keys[1], now_us, test_mode, cost, cost_arg, out)
    return
  end
  local s = algorithm.load(keys, policy)
  if s.foreign then
    push_decision(out, conflict_decision(policy, keys[1]))
    return
  end
  local idle_before = algorithm.idle_at_us(policy, s)
  local d = decide_state(algorithm, policy, s, now_us, cost, op)
  persist(algorithm, policy, keys, s, now_us, test_mode, idle_before)
  push_decision(out, d)
end

-- run_single: one decision.
-- keys: the algorithm's keys (keys[1] its state; the sliding log also keys[2], its entries).
-- args: now ('-' = the server's TIME; an integer µs only in test mode), cost, op (0 acquire,
--       1 peek, 2 release, 3 renew, 4 report), limit, window_us, rate, shape (0/1), count_denied (0/1),
--       and for concurrency the lease id (32 hex digits).
-- Returns: push_decision's four integers (reason, remaining, reset_after_us, delay_us or
--          retry_after_us).
local function run_single(algorithm, keys, args)
  local now_us, test_mode = read_now(args[1])
  local out = {}
  decide_one(algorithm, read_policy(args, 4), keys, now_us, test_mode, tonumber(args[2]), args[2],
             tonumber(args[3]), out, args[9])
  return out
end
