-- sliding_window_log.lua — mirrors src/core/sliding_window_log.cc decide() step by step.
--
-- State: KEYS[1] a hash {units, seq, d}: the sum of cost over live entries, the last entry
-- number handed out and the definition (state_def in common.lua); KEYS[2] a sorted set, one member per admitted request, score = admission
-- time (µs), member = "<seq>:<cost>". seq makes members unique per request: two requests in the
-- same microsecond are two members and both count. Admission times never decrease
-- (t = max(now, newest)), so score order is the C++ vector's order; members that share a score
-- share their time, so their order never changes a decision.
-- The log is read through Redis commands (O(log n) per step), never loaded whole.
local sliding_window_log = {}

local function entry_cost(member)
  return tonumber(string.match(member, ':(%d+)$'))
end

local function entry_seq(member)
  return string.match(member, '^(%d+):')
end

-- The state (s.foreign, s.def and s.has_def as token_bucket.load's).
function sliding_window_log.load(keys, policy)
  local def = state_def(algorithm_id.sliding_window_log, policy, true)
  local meta = redis.call('HMGET', keys[1], 'units', 'seq', 'd')
  local s = {keys = keys, foreign = foreign_state(keys[1], meta, def), def = def,
             has_def = meta[3] ~= false}
  s.units = tonumber(meta[1]) or 0
  s.seq = tonumber(meta[2]) or 0
  if s.foreign then return s end
  local last = redis.call('ZRANGE', keys[2], -1, -1, 'WITHSCORES')
  if last[2] then s.newest = tonumber(last[2]) end  -- nil when the log is empty
  return s
end

function sliding_window_log.save(keys, s, ttl_ms)
  if s.has_def then
    redis.call('HSET', keys[1], 'units', int(s.units), 'seq', int(s.seq))
  else
    redis.call('HSET', keys[1], 'units', int(s.units), 'seq', int(s.seq), 'd', s.def)
  end
  if ttl_ms then
    redis.call('PEXPIRE', keys[1], ttl_ms)
    redis.call('PEXPIRE', keys[2], ttl_ms)
  end
end

function sliding_window_log.delete(keys)
  redis.call('DEL', keys[1], keys[2])
end

function sliding_window_log.idle_at_us(policy, s)
  if s.units > 0 then return s.newest + policy.window_us end
  return 0
end

-- Drops entries admitted at or before `t - window`.
local function expire(s, t, window)
  local gone = redis.call('ZRANGEBYSCORE', s.keys[2], '-inf', int(t - window))
  if #gone == 0 then return end
  for _, member in ipairs(gone) do s.units = s.units - entry_cost(member) end
  redis.call('ZREMRANGEBYSCORE', s.keys[2], '-inf', int(t - window))
  s.dirty = true
end

local function push(s, t, cost)
  s.seq = s.seq + 1
  redis.call('ZADD', s.keys[2], int(t), int(s.seq) .. ':' .. int(cost))
  s.units = s.units + cost
  s.newest = t
  s.dirty = true
end

-- Keeps only the newest `limit` units (count-denied mode bounds the log this way).
local function trim_to(s, limit)
  while s.units > limit do
    local oldest = redis.call('ZRANGE', s.keys[2], 0, 0, 'WITHSCORES')
    local member, at_us = oldest[1], oldest[2]
    local c = entry_cost(member)
    local excess = s.units - limit
    redis.call('ZREM', s.keys[2], member)
    if c <= excess then
      s.units = s.units - c
    else
      redis.call('ZADD', s.keys[2], at_us, entry_seq(member) .. ':' .. int(c - excess))
      s.units = limit
    end
  end
end

function sliding_window_log.decide(policy, s, now_us, cost, op)
  local limit = policy.limit
  local window = policy.window_us
  local newest = s.newest or 0
  local t = math.max(now_us, newest, 0)
  -- Expiry only forgets what no decision can see any more, so peek may do it too.
  expire(s, t, window)

  local d = new_decision(limit)
  if cost > limit then
    d.reason = kExceedsCapacity
    d.remaining = math.max(0, limit - s.units)
    if s.units > 0 then d.reset_after = s.newest + window - t else d.reset_after = 0 end
    return d
  end
  if s.units + cost <= limit then
    d.allowed = true
    d.reason = kWithinLimit
    d.remaining = limit - (s.units + cost)
    -- The unit admitted now is the last to leave (a cost-0 peek admits none).
    if cost > 0 then
      d.reset_after = window
    elseif s.units > 0 then
      d.reset_after = s.newest + window - t
    else
      d.reset_after = 0
    end
    if op == kAcquire then push(s, t, cost) end
    return d
  end
  d.reason = kOverLimit
  if op == kAcquire and policy.count_denied then
    push(s, t, cost)
    trim_to(s, limit)
  end
  -- The request fits once `need` of the oldest units have left the window. Entries are read
  -- oldest first, a few at a time: each holds at least one unit, so at most `need` are read.
  local need = s.units + cost - limit
  local freed = 0
  local first = 0
  while d.retry_after == 0 do
    local batch = redis.call('ZRANGE', s.keys[2], first, first + math.min(need, 64) - 1,
                             'WITHSCORES')
    if #batch == 0 then break end  -- unreachable: need <= units
    for i = 1, #batch, 2 do
      freed = freed + entry_cost(batch[i])
      if freed >= need then
        d.retry_after = tonumber(batch[i + 1]) + window - t
        break
      end
    end
    first = first + #batch / 2
  end
  d.remaining = math.max(0, limit - s.units)
  d.reset_after = s.newest + window - t
  return d
end

-- sliding_window_log.cc record: a report is an entry at t (C++ merges it into an entry of the
-- same time; here it is its own member: entries of one time never differ in a decision); a
-- refund takes units from the newest entries first.
function sliding_window_log.record(policy, s, now_us, cost)
  local window = policy.window_us
  local t = math.max(now_us, s.newest or 0, 0)
  expire(s, t, window)
  local after = recorded(s.units, cost, max_recorded(policy))
  if after > s.units then
    push(s, t, after - s.units)
    return
  end
  local give = s.units - after
  while give > 0 do
    local last = redis.call('ZRANGE', s.keys[2], -1, -1, 'WITHSCORES')
    local member, at_us = last[1], last[2]
    local c = entry_cost(member)
    redis.call('ZREM', s.keys[2], member)
    if c > give then
      redis.call('ZADD', s.keys[2], at_us, entry_seq(member) .. ':' .. int(c - give))
      give = 0
    else
      give = give - c
    end
  end
  s.units = after
  local newest = redis.call('ZRANGE', s.keys[2], -1, -1, 'WITHSCORES')
  s.newest = tonumber(newest[2])
  s.dirty = true
end
