-- multi.lua — the entry points that need every algorithm: several limits all or nothing
-- (run_all), a batch of independent decisions (run_batch) and all or nothing across several
-- keys (run_many), as plain functions of (keys, args), shared by the acquire_all, batch and
-- decide_many EVALSHA scripts and the function library. Appended after
-- common.lua, the algorithm files, the table `algorithms` (id -> algorithm) the build generates
-- from kAlgorithmTable (embed_lua.cmake) and entry.lua.

-- The all-or-nothing step shared by run_all and run_many: mirrors
-- algo::decide_all(std::span<const LimitOp>) in src/core/decide.cc — every item is peeked at its
-- own cost; only if all admit is each acquire item acquired (peek items only take part in the
-- check). Then every state is written back and the decisions appended to the reply in order.
-- items[i]: {algorithm, policy, keys, state, idle_before, cost, op}.
local function decide_items_all_or_nothing(items, now_us, test_mode)
  local decisions = {}
  local all = true
  for i, it in ipairs(items) do
    -- A report is never refused: it takes part in the check as admitted.
    local peek_cost = it.cost
    if it.op == kReport then peek_cost = 0 end
    if it.state.foreign then  -- another definition's state: refused, and so is the whole call
      decisions[i] = conflict_decision(it.policy, it.keys[1])
      all = false
    else
      decisions[i] = it.algorithm.decide(it.policy, it.state, now_us, peek_cost, kPeek)
      all = all and (decisions[i].allowed or it.op == kReport)
    end
  end
  if all then
    for i, it in ipairs(items) do
      if it.op == kAcquire or it.op == kReport then
        decisions[i] = decide_state(it.algorithm, it.policy, it.state, now_us, it.cost, it.op)
      end
    end
  end

  local out = {}
  for i, it in ipairs(items) do
    persist(it.algorithm, it.policy, it.keys, it.state, now_us, test_mode, it.idle_before)
    push_decision(out, decisions[i])
  end
  return out
end

-- One item of an all-or-nothing call: its state loaded, and its idle time before the call.
local function load_item(algorithm, policy, ikeys, cost, op)
  local state = algorithm.load(ikeys, policy)
  return {algorithm = algorithm, policy = policy, keys = ikeys, state = state, cost = cost, op = op,
          idle_before = algorithm.idle_at_us(policy, state)}
end

-- Several limits on one key, all or nothing, at one cost and one op (acquire: all acquired if
-- all admit; peek: each only checked).
-- keys: two per limit, in order: its state key and its log key (used by the sliding log only;
--       always passed so every key the script may touch is in keys). All share one hash tag.
-- args: now, cost, op, then six per limit: algorithm (0 fixed_window, 1 sliding_window_log,
--       2 sliding_window_counter, 3 token_bucket, 4 leaky_bucket), limit, window_us, rate,
--       shape, count_denied.
-- Returns: four integers per limit, in order (as run_single).
local function run_all(keys, args)
  local now_us, test_mode = read_now(args[1])
  local cost = tonumber(args[2])
  local op = tonumber(args[3])
  local items = {}
  for i = 1, (#args - 3) / 6 do
    local base = 3 + (i - 1) * 6
    items[i] = load_item(algorithms[tonumber(args[base + 1])], read_policy(args, base + 2),
                         {keys[2 * i - 1], keys[2 * i]}, cost, op)
  end
  return decide_items_all_or_nothing(items, now_us, test_mode)
end

-- A batch of independent decisions, each exactly run_single's, in order (a later item on the
-- same key sees the earlier one's effect, as pipelined calls would). The server's clock is read
-- once for the whole batch: every item is decided at that instant.
-- keys: each item's keys in order (2 for the sliding log: state and log, and for concurrency:
--       hash and leases; 1 otherwise).
-- args: the number P of distinct policies; the clock: '-' (the server's TIME, one argument per
--       item) or 't' (test mode: two per item, the second its time in µs); six per policy:
--       algorithm, limit, window_us, rate, shape, counting; then per item its policy (1 ... P)
--       when it acquires at cost 1, else "<policy>:<cost>:<op>", and for a concurrency policy
--       "<policy>:<cost>:<op>:<lease id>". A policy's arguments travel
--       once per batch and an item's usual case is one number: each argument costs Redis more
--       than most of a decision (see batch_call in script_codec.cc).
-- Returns: push_decision's four integers per item, in order.
local function run_batch(keys, args)
  local npolicies = tonumber(args[1])
  local timed = args[2] == 't'
  local batch_algorithms, policies = {}, {}
  -- The usual item, an acquire of 1, is its policy's index as a string: looked up by that
  -- string (no tonumber per item), and sent straight to the algorithm's acquire where it has
  -- one that decides such an item (fast1).
  local by_arg, fast1 = {}, {}
  for p = 1, npolicies do
    local base = 3 + (p - 1) * 6
    local algorithm = algorithms[tonumber(args[base])]
    local policy = read_policy(args, base + 1)  -- decide() never writes it (acquire caches on it)
    batch_algorithms[p], policies[p] = algorithm, policy
    by_arg[tostring(p)] = p
    fast1[p] = algorithm.acquire ~= nil and algorithm.fast(policy, 1)
  end
  local now_us, test_mode = nil, false
  local step = 1
  if timed then step = 2 else now_us = read_now('-') end
  local out = {}
  local k = 1
  local ikeys = {}
  for base = 3 + npolicies * 6, #args, step do
    local item = args[base]
    local p = by_arg[item]
    if timed then now_us, test_mode = read_now(args[base + 1]) end
    if p ~= nil and fast1[p] then
      batch_algorithms[p].acquire(policies[p], keys[k], now_us, test_mode, 1, '1', out)
      k = k + 1
    else
      local cost, op, cost_arg, lease = 1, kAcquire, '1', nil
      if p == nil then
        local ps, cs, os, ls = string.match(item, '^(%d+):(-?%d+):(%d):?([%x,%-]*)$')
        p, cost, op, cost_arg, lease = tonumber(ps), tonumber(cs), tonumber(os), cs, ls
      end
      local algorithm = batch_algorithms[p]
      ikeys[1] = keys[k]
      if algorithm == sliding_window_log or algorithm == concurrency then
        ikeys[2] = keys[k + 1]
        k = k + 2
      else
        ikeys[2] = nil
        k = k + 1
      end
      decide_one(algorithm, policies[p], ikeys, now_us, test_mode, cost, cost_arg, op, out, lease)
    end
  end
  return out
end

-- All or nothing across several keys, each with its own policy, cost and op
-- (Store::decide_many_async with Atomicity::kAllOrNothing): mirrors
-- algo::decide_all(std::span<const LimitOp>) in src/core/decide.cc — every item is peeked at its
-- own cost; only if all admit is each acquire item acquired (peek items only take part in the
-- check).
-- keys: two per item, in order: its state key and its log key (used by the sliding log only;
--       always passed so every key the script may touch is in keys). In Redis Cluster they must
--       share one slot (the store refuses the call otherwise).
-- args: now ('-' = server TIME), then eight per item: algorithm (0 fixed_window,
--       1 sliding_window_log, 2 sliding_window_counter, 3 token_bucket, 4 leaky_bucket), cost,
--       op (0 acquire, 1 peek, 4 report), limit, window_us, rate, shape, count_denied.
-- Returns: four integers per item, in order (as run_single).
local function run_many(keys, args)
  local now_us, test_mode = read_now(args[1])
  local items = {}
  for i = 1, (#args - 1) / 8 do
    local base = 1 + (i - 1) * 8
    items[i] = load_item(algorithms[tonumber(args[base + 1])], read_policy(args, base + 4),
                         {keys[2 * i - 1], keys[2 * i]}, tonumber(args[base + 2]),
                         tonumber(args[base + 3]))
  end
  return decide_items_all_or_nothing(items, now_us, test_mode)
end
