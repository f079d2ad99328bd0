-- distributed.lua — mirrors src/core/consistency.cc (reserve, add_hits) line for line: the one
-- atomic call of the lease and async consistency modes. Appended after common.lua,
-- fixed_window.lua and sliding_window_counter.lua (and, in the library, the other algorithms).
-- State is the algorithm's own (fixed_window.lua, sliding_window_counter.lua), so exact calls
-- and these calls share one count. tests/vectors/distributed.json holds this file and the core
-- together.
local distributed_algorithms = {[algorithm_id.fixed_window] = fixed_window,
                               [algorithm_id.sliding_window_counter] = sliding_window_counter}

-- A reserve or a push on a state written under another definition of the name (load's
-- s.foreign) is refused as an error: these calls answer a SharedView, which has no reason to
-- carry it, and the store answers an error by its failure policy.
local kPolicyConflictError = 'POLICY_CONFLICT the key holds live state of another definition of this policy name'

-- consistency.cc roll(): the state read the way decide() reads it.
local function roll(id, policy, s, now_us)
  local window = policy.window_us
  local t = math.max(now_us, s.window_start_us, 0)
  local start = window_start(t, window)
  if id == algorithm_id.fixed_window then
    local curr = 0
    if start == s.window_start_us then curr = s.count end
    return {t = t, start = start, prev = 0, curr = curr}
  end
  if start == s.window_start_us then return {t = t, start = start, prev = s.prev, curr = s.curr} end
  if start == s.window_start_us + window then return {t = t, start = start, prev = s.curr, curr = 0} end
  return {t = t, start = start, prev = 0, curr = 0}
end

-- consistency.cc weighed().
local function weighed(id, policy, r)
  if id == algorithm_id.fixed_window then return r.curr end
  local window = policy.window_us
  return r.curr + idiv(r.prev * (window - (r.t - r.start)), window)
end

-- consistency.cc take_back(); true when something was taken back.
local function take_back(id, policy, r, window_us, units)
  if units <= 0 then return false end
  if window_us == r.start then
    r.curr = math.max(0, r.curr - units)
    return true
  elseif id == algorithm_id.sliding_window_counter and window_us == r.start - policy.window_us then
    r.prev = math.max(0, r.prev - units)
    return true
  end
  return false
end

-- consistency.cc add(): returns whether something was added and the units the limit left out.
local function add(id, policy, r, window_us, units)
  if units <= 0 then return false, 0 end
  local limit = policy.limit
  if window_us == r.start then
    local dropped = math.max(0, r.curr + units - limit)
    r.curr = math.min(limit, r.curr + units)
    return true, dropped
  elseif id == algorithm_id.sliding_window_counter and window_us == r.start - policy.window_us then
    local dropped = math.max(0, r.prev + units - limit)
    r.prev = math.min(limit, r.prev + units)
    return true, dropped
  end
  return false, 0
end

-- Writes the rolled state back (persist: TTL until idle, deleted when idle) if it changed.
local function store_rolled(id, policy, keys, s, r, changed, now_us, test_mode, idle_before)
  if not changed then return end
  if id == algorithm_id.fixed_window then
    s.window_start_us, s.count = r.start, r.curr
  else
    s.window_start_us, s.prev, s.curr = r.start, r.prev, r.curr
  end
  s.dirty = true
  persist(distributed_algorithms[id], policy, keys, s, now_us, test_mode, idle_before)
end

-- run_reserve: gives back, then reserves (consistency.h reserve()).
-- keys: the state key. args: now ('-' or test µs), algorithm id (0 fixed_window, 2
-- sliding_window_counter), want, give_back_window_us, give_back, then the policy fields
-- (read_policy: limit, window_us, rate, shape, counting).
-- Returns the SharedView: now_us, window_start_us, prev, curr, granted, dropped (0).
local function run_reserve(keys, args)
  local now_us, test_mode = read_now(args[1])
  local id = tonumber(args[2])
  local algorithm = distributed_algorithms[id]
  local policy = read_policy(args, 6)
  local s = algorithm.load(keys, policy)
  if s.foreign then return redis.error_reply(kPolicyConflictError) end
  local idle_before = algorithm.idle_at_us(policy, s)
  local r = roll(id, policy, s, now_us)
  local changed = take_back(id, policy, r, tonumber(args[4]), tonumber(args[5]))
  local granted = math.min(tonumber(args[3]), math.max(0, policy.limit - weighed(id, policy, r)))
  r.curr = r.curr + granted
  store_rolled(id, policy, keys, s, r, changed or granted > 0, now_us, test_mode, idle_before)
  return {r.t, r.start, r.prev, r.curr, granted, 0}
end

-- run_add_hits: adds pushed hits (consistency.h add_hits()).
-- args: now, algorithm id, window_us, hits, then the policy fields. Returns as run_reserve.
local function run_add_hits(keys, args)
  local now_us, test_mode = read_now(args[1])
  local id = tonumber(args[2])
  local algorithm = distributed_algorithms[id]
  local policy = read_policy(args, 5)
  local s = algorithm.load(keys, policy)
  if s.foreign then return redis.error_reply(kPolicyConflictError) end
  local idle_before = algorithm.idle_at_us(policy, s)
  local r = roll(id, policy, s, now_us)
  local changed, dropped = add(id, policy, r, tonumber(args[3]), tonumber(args[4]))
  store_rolled(id, policy, keys, s, r, changed, now_us, test_mode, idle_before)
  return {r.t, r.start, r.prev, r.curr, 0, dropped}
end
