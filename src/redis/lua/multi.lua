-- multi.lua — the entry points that need every algorithm: several limits all or nothing
-- (run_all), a batch of independent decisions (run_batch) and all or nothing across several
-- keys (run_many), as plain functions of (keys, args), shared by the acquire_all, batch and
-- decide_many EVALSHA scripts and the function library. Appended after
-- common.lua, the five algorithm files and entry.lua.
local algorithms = {[0] = fixed_window, [1] = sliding_window_log, [2] = sliding_window_counter,
                    [3] = token_bucket, [4] = leaky_bucket}

-- The all-or-nothing step shared by run_all and run_many: mirrors
-- algo::decide_all(std::span<const LimitOp>) in src/core/decide.cc — every item is peeked at its
-- own cost; only if all admit is each acquire item acquired (peek items only take part in the
-- check). Then every state is written back and the decisions appended to the reply in order.
-- items[i]: {algorithm, policy, keys, state, idle_before, cost, op}.
local function decide_items_all_or_nothing(items, now_us, test_mode)
  local decisions = {}
  local all = true
  for i, it in ipairs(items) do
    decisions[i] = it.algorithm.decide(it.policy, it.state, now_us, it.cost, kPeek)
    all = all and decisions[i].allowed
  end
  if all then
    for i, it in ipairs(items) do
      if it.op == kAcquire then
        decisions[i] = it.algorithm.decide(it.policy, it.state, now_us, it.cost, kAcquire)
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
  local state = algorithm.load(ikeys)
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
-- Returns: six integers per limit, in order (as run_single).
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
-- keys: each item's keys in order (2 for the sliding log: state and log; 1 otherwise).
-- args: the number P of distinct policies; six per policy: algorithm, limit, window_us, rate,
--       shape, count_denied; then four per item: its policy (1 ... P), cost, op, now ('-' or
--       test time). A policy's arguments travel once per batch, not once per item: each
--       argument costs Redis more than most of a decision (see batch_call in script_codec.cc).
-- Returns: six integers per item, in order.
local function run_batch(keys, args)
  local npolicies = tonumber(args[1])
  local batch_algorithms, policies = {}, {}
  for p = 1, npolicies do
    local base = 2 + (p - 1) * 6
    batch_algorithms[p] = algorithms[tonumber(args[base])]
    policies[p] = read_policy(args, base + 1)  -- decide() never writes it
  end
  local server_now = nil
  local out = {}
  local k = 1
  local ikeys = {}
  for base = 2 + npolicies * 6, #args, 4 do
    local p = tonumber(args[base])
    local algorithm, policy = batch_algorithms[p], policies[p]
    local cost = tonumber(args[base + 1])
    local op = tonumber(args[base + 2])
    local now_us, test_mode
    if args[base + 3] == '-' then
      if server_now == nil then server_now = read_now('-') end
      now_us, test_mode = server_now, false
    else
      now_us, test_mode = read_now(args[base + 3])
    end
    ikeys[1] = keys[k]
    if algorithm == sliding_window_log then
      ikeys[2] = keys[k + 1]
      k = k + 2
    else
      ikeys[2] = nil
      k = k + 1
    end
    local s = algorithm.load(ikeys)
    local idle_before = algorithm.idle_at_us(policy, s)
    local d = algorithm.decide(policy, s, now_us, cost, op)
    persist(algorithm, policy, ikeys, s, now_us, test_mode, idle_before)
    push_decision(out, d)
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
--       op (0 acquire, 1 peek), limit, window_us, rate, shape, count_denied.
-- Returns: six integers per item, in order (as run_single).
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
