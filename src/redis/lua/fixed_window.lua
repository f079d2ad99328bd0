-- fixed_window.lua — mirrors src/core/fixed_window.cc decide() step by step.
-- State: a hash {window_start_us, count} at KEYS[1].
local fixed_window = {}

function fixed_window.load(keys)
  local v = redis.call('HMGET', keys[1], 'window_start_us', 'count')
  return {window_start_us = tonumber(v[1]) or 0, count = tonumber(v[2]) or 0}
end

function fixed_window.save(keys, s, ttl_ms)
  redis.call('HSET', keys[1], 'window_start_us', int(s.window_start_us), 'count', int(s.count))
  if ttl_ms then redis.call('PEXPIRE', keys[1], ttl_ms) end
end

function fixed_window.delete(keys)
  redis.call('DEL', keys[1])
end

function fixed_window.idle_at_us(policy, s)
  if s.count > 0 then return s.window_start_us + policy.window_us end
  return 0
end

function fixed_window.decide(policy, s, now_us, cost, op)
  local limit = policy.limit
  local window = policy.window_us
  local t = math.max(now_us, s.window_start_us, 0)
  local start = window_start(t, window)
  local count = 0
  if start == s.window_start_us then count = s.count end
  local until_end = start + window - t

  local d = new_decision(limit)
  if policy.every_hit then
    local after = count + cost
    if after > 0 then d.reset_after = until_end else d.reset_after = 0 end
    if after <= limit then
      d.allowed = true
      d.reason = kWithinLimit
      d.remaining = limit - after
    elseif cost > limit then
      d.reason = kExceedsCapacity
    else
      d.reason = kOverLimit
      d.retry_after = until_end
    end
    if op == kAcquire and cost > 0 then
      s.window_start_us, s.count, s.dirty = start, math.min(after, limit + 1), true
    end
    return d
  end
  if cost > limit then
    d.reason = kExceedsCapacity
    d.remaining = limit - count
    if count > 0 then d.reset_after = until_end else d.reset_after = 0 end
    return d
  end
  if count + cost <= limit then
    d.allowed = true
    d.reason = kWithinLimit
    d.remaining = limit - (count + cost)
    d.reset_after = until_end
    if op == kAcquire then
      s.window_start_us, s.count, s.dirty = start, count + cost, true
    end
    return d
  end
  d.reason = kOverLimit
  d.retry_after = until_end
  d.reset_after = until_end  -- count > 0 here: cost <= limit was exceeded
  local kept = count
  if op == kAcquire and policy.count_denied then
    kept = math.min(limit, count + cost)
    s.window_start_us, s.count, s.dirty = start, kept, true
  end
  d.remaining = limit - kept
  return d
end
