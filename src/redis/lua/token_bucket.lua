-- token_bucket.lua — mirrors src/core/token_bucket.cc decide() step by step.
-- State: a hash {taken_u, last_us, d} at KEYS[1] (d: state_def in common.lua); a missing key
-- is a full bucket.
local token_bucket = {}

-- The state at keys[1]; s.foreign when it was written under another definition of the policy's
-- name (foreign_state); s.def, this definition, written with the state when it has none.
function token_bucket.load(keys, policy)
  local def = state_def(algorithm_id.token_bucket, policy, false)
  local v = redis.call('HMGET', keys[1], 'taken_u', 'last_us', 'd')
  return {taken_u = tonumber(v[1]) or 0,
          last_us = tonumber(v[2]) or 0,
          foreign = foreign_state(keys[1], v, def), def = def, has_def = v[3] ~= false}
end

function token_bucket.save(keys, s, ttl_ms)
  if s.has_def then
    redis.call('HSET', keys[1], 'taken_u', int(s.taken_u), 'last_us', int(s.last_us))
  else
    redis.call('HSET', keys[1], 'taken_u', int(s.taken_u), 'last_us', int(s.last_us), 'd', s.def)
  end
  if ttl_ms then redis.call('PEXPIRE', keys[1], ttl_ms) end
end

function token_bucket.delete(keys)
  redis.call('DEL', keys[1])
end

function token_bucket.idle_at_us(policy, s)
  if s.taken_u > 0 then return s.last_us + time_to_drain_us(s.taken_u, policy.rate) end
  return 0
end

function token_bucket.decide(policy, s, now_us, cost, op)
  local burst = policy.limit
  local rate = policy.rate
  local t = math.max(now_us, s.last_us)
  local taken = refilled(policy, s.taken_u, s.last_us, t)

  local d = new_decision(burst)
  if cost > burst then
    d.reason = kExceedsCapacity
    d.remaining = math.max(0, burst - ceil_div(taken, kUnit))
    d.reset_after = s.last_us + time_to_drain_us(s.taken_u, rate) - t
    d.reset_after = math.max(d.reset_after, 0)
    return d
  end
  if taken + cost * kUnit <= burst * kUnit then
    local after = taken + cost * kUnit
    d.allowed = true
    d.reason = kWithinLimit
    d.remaining = burst - ceil_div(after, kUnit)
    d.reset_after = time_to_drain_us(after, rate)
    if op == kAcquire then
      s.taken_u, s.last_us, s.dirty = after, t, true
    end
    return d
  end
  d.reason = kOverLimit
  if op == kAcquire and policy.count_denied then
    -- a debt of at most one burst
    s.taken_u, s.last_us, s.dirty = math.min(taken + cost * kUnit, 2 * burst * kUnit), t, true
  end
  -- Wait until the stored debt has drained down to (burst - cost) units, counted from last_us.
  local need = s.taken_u - (burst - cost) * kUnit
  d.retry_after = s.last_us + time_to_drain_us(need, rate) - t
  local taken_now = taken  -- after any recording above
  if s.last_us == t then taken_now = s.taken_u end
  d.remaining = math.max(0, burst - ceil_div(taken_now, kUnit))
  d.reset_after = s.last_us + time_to_drain_us(s.taken_u, rate) - t
  return d
end

-- token_bucket.cc record: a report moves the level (debt: above the burst); a refund never below 0.
function token_bucket.record(policy, s, now_us, cost)
  s.taken_u, s.last_us = recorded_level(policy, s.taken_u, s.last_us, now_us, cost)
  s.dirty = true
end
