-- leaky_bucket.lua — mirrors src/core/leaky_bucket.cc decide() step by step (GCRA: a virtual
-- queue level that leaks at `rate`). State: a hash {level_u, last_us, d} at KEYS[1]
-- (d: state_def in common.lua).
local leaky_bucket = {}

-- The state at keys[1]; s.foreign when it was written under another definition of the policy's
-- name (foreign_state); s.def, this definition, written with the state when it has none.
function leaky_bucket.load(keys, policy)
  local def = state_def(algorithm_id.leaky_bucket, policy, false)
  local v = redis.call('HMGET', keys[1], 'level_u', 'last_us', 'd')
  return {level_u = tonumber(v[1]) or 0,
          last_us = tonumber(v[2]) or 0,
          foreign = foreign_state(keys[1], v, def), def = def, has_def = v[3] ~= false}
end

function leaky_bucket.save(keys, s, ttl_ms)
  if s.has_def then
    redis.call('HSET', keys[1], 'level_u', int(s.level_u), 'last_us', int(s.last_us))
  else
    redis.call('HSET', keys[1], 'level_u', int(s.level_u), 'last_us', int(s.last_us), 'd', s.def)
  end
  if ttl_ms then redis.call('PEXPIRE', keys[1], ttl_ms) end
end

function leaky_bucket.delete(keys)
  redis.call('DEL', keys[1])
end

function leaky_bucket.idle_at_us(policy, s)
  if s.level_u > 0 then return s.last_us + time_to_drain_us(s.level_u, policy.rate) end
  return 0
end

function leaky_bucket.decide(policy, s, now_us, cost, op)
  local burst = policy.limit
  local rate = policy.rate
  local t = math.max(now_us, s.last_us)
  local level = refilled(policy, s.level_u, s.last_us, t)
  -- floor(level / kUnit) + cost <= burst  <=>  level <= (burst - cost + 1) * kUnit - 1.
  local max_level = (burst - cost + 1) * kUnit - 1

  local d = new_decision(burst)
  if cost > burst then
    d.reason = kExceedsCapacity
    d.remaining = math.max(0, burst - idiv(level, kUnit))
    d.reset_after = math.max(0, s.last_us + time_to_drain_us(s.level_u, rate) - t)
    return d
  end
  if level <= max_level then
    local after = level + cost * kUnit
    d.allowed = true
    d.reason = kWithinLimit
    d.remaining = math.max(0, burst - idiv(after, kUnit))
    d.reset_after = time_to_drain_us(after, rate)
    if policy.shape then d.delay = time_to_drain_us(level, rate) end
    if op == kAcquire then
      s.level_u, s.last_us, s.dirty = after, t, true
    end
    return d
  end
  d.reason = kOverLimit
  if op == kAcquire and policy.count_denied then
    -- at most one burst of debt
    s.level_u, s.last_us, s.dirty = math.min(level + cost * kUnit, 2 * burst * kUnit), t, true
  end
  local level_now = level  -- after any recording above
  if s.last_us == t then level_now = s.level_u end
  d.retry_after = s.last_us + time_to_drain_us(s.level_u - max_level, rate) - t
  d.remaining = math.max(0, burst - idiv(level_now, kUnit))
  d.reset_after = s.last_us + time_to_drain_us(s.level_u, rate) - t
  return d
end

-- leaky_bucket.cc record: a report moves the level (debt: above the burst); a refund never below 0.
function leaky_bucket.record(policy, s, now_us, cost)
  s.level_u, s.last_us = recorded_level(policy, s.level_u, s.last_us, now_us, cost)
  s.dirty = true
end
