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
-- keys: each item's keys in order (1, or 2 for the sliding log).
-- args: ten per item: now ('-' or test time), algorithm, cost, op, limit, window_us, rate,
--       shape, count_denied, and the number of keys it takes (1 or 2).
-- Returns: six integers per item, in order.
local function run_batch(keys, args)
  local server_now = nil
  local out = {}
  local k = 1
  local ikeys = {}
  local policy, p1, p2, p3, p4, p5  -- the previous item's policy and its five arguments
  for base = 1, #args, 10 do
    local now_us, test_mode
    if args[base] == '-' then
      if server_now == nil then server_now = read_now('-') end
      now_us, test_mode = server_now, false
    else
      now_us, test_mode = read_now(args[base])
    end
    local algorithm = algorithms[tonumber(args[base + 1])]
    local cost = tonumber(args[base + 2])
    local op = tonumber(args[base + 3])
    -- Consecutive items mostly share a policy: its table is built once (Lua strings are
    -- interned, so comparing the arguments is comparing pointers). decide() never writes it.
    if policy == nil or args[base + 4] ~= p1 or args[base + 5] ~= p2 or args[base + 6] ~= p3 or
       args[base + 7] ~= p4 or args[base + 8] ~= p5 then
      policy = read_policy(args, base + 4)
      p1, p2, p3, p4, p5 = args[base + 4], args[base + 5], args[base + 6], args[base + 7],
                           args[base + 8]
    end
    local n = tonumber(args[base + 9])
    ikeys[1] = keys[k]
    ikeys[2] = keys[k + 1]
    if n == 1 then ikeys[2] = nil end
    k = k + n
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
