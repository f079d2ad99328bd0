-- sliding_window_counter.lua — mirrors src/core/sliding_window_counter.cc decide() step by
-- step. State: a hash {window_start_us, prev, curr, d} at KEYS[1] (d: state_def in
-- common.lua). Every division is idiv(): prev * (W - elapsed) <= L * W <= 2^53, exact in a
-- double, but its quotient must be floored exactly as int64 division does.
local sliding_window_counter = {}

-- The state at keys[1]; s.foreign when it was written under another definition of the policy's
-- name (foreign_state); s.def, this definition, written with the state when it has none.
function sliding_window_counter.load(keys, policy)
  local def = state_def(algorithm_id.sliding_window_counter, policy, true)
  local v = redis.call('HMGET', keys[1], 'window_start_us', 'prev', 'curr', 'd')
  return {window_start_us = tonumber(v[1]) or 0,
          prev = tonumber(v[2]) or 0,
          curr = tonumber(v[3]) or 0,
          foreign = foreign_state(keys[1], v, def), def = def, has_def = v[4] ~= false}
end

function sliding_window_counter.save(keys, s, ttl_ms)
  if s.has_def then
    redis.call('HSET', keys[1], 'window_start_us', int(s.window_start_us), 'prev', int(s.prev),
             'curr', int(s.curr))
  else
    redis.call('HSET', keys[1], 'window_start_us', int(s.window_start_us), 'prev', int(s.prev),
             'curr', int(s.curr), 'd', s.def)
  end
  if ttl_ms then redis.call('PEXPIRE', keys[1], ttl_ms) end
end

function sliding_window_counter.delete(keys)
  redis.call('DEL', keys[1])
end

function sliding_window_counter.idle_at_us(policy, s)
  if s.curr > 0 then return s.window_start_us + 2 * policy.window_us end
  if s.prev > 0 then return s.window_start_us + policy.window_us end
  return 0
end

-- Smallest elapsed e in [0, W] at which curr + floor(prev * (W - e) / W) + cost <= L, given
-- that x = L - cost - curr >= 0: floor(prev*(W-e)/W) <= x  <=>  prev*(W-e) <= (x+1)*W - 1.
local function first_fit_elapsed(prev, x, window)
  if prev == 0 then return 0 end
  return math.max(0, window - idiv((x + 1) * window - 1, prev))
end

function sliding_window_counter.decide(policy, s, now_us, cost, op)
  local limit = policy.limit
  local window = policy.window_us
  local t = math.max(now_us, s.window_start_us, 0)
  local start = window_start(t, window)
  local prev = 0
  local curr = 0
  if start == s.window_start_us then
    prev = s.prev
    curr = s.curr
  elseif start == s.window_start_us + window then
    prev = s.curr
  end
  local elapsed = t - start
  local est = curr + idiv(prev * (window - elapsed), window)

  -- Until est is 0 with no more traffic: the last window holding units must slide out.
  local function reset_after(p, c)
    if c > 0 then return start + window + first_fit_elapsed(c, 0, window) - t end
    if p > 0 then return math.max(0, start + first_fit_elapsed(p, 0, window) - t) end
    return 0
  end

  local d = new_decision(limit)
  if cost > limit then
    d.reason = kExceedsCapacity
    d.remaining = math.max(0, limit - est)
    d.reset_after = reset_after(prev, curr)
    return d
  end
  if est + cost <= limit then
    d.allowed = true
    d.reason = kWithinLimit
    d.remaining = limit - (est + cost)
    d.reset_after = reset_after(prev, curr + cost)
    if op == kAcquire then
      s.window_start_us, s.prev, s.curr, s.dirty = start, prev, curr + cost, true
    end
    return d
  end
  d.reason = kOverLimit
  if op == kAcquire and policy.count_denied then
    curr = math.min(limit, curr + cost)  -- the attempt counts; retry is from the new state
    s.window_start_us, s.prev, s.curr, s.dirty = start, prev, curr, true
  end
  if limit - cost - curr >= 0 then
    -- The previous window's weight decays enough within this window.
    d.retry_after = start + first_fit_elapsed(prev, limit - cost - curr, window) - t
  else
    -- Only once this window becomes the previous one: prev' = curr, curr' = 0.
    d.retry_after = start + window + first_fit_elapsed(curr, limit - cost, window) - t
  end
  d.remaining = math.max(0, limit - (curr + idiv(prev * (window - elapsed), window)))
  d.reset_after = reset_after(prev, curr)
  return d
end

-- sliding_window_counter.cc record: a report moves the current window's count (rolled as
-- decide rolls it).
function sliding_window_counter.record(policy, s, now_us, cost)
  local window = policy.window_us
  local t = math.max(now_us, s.window_start_us, 0)
  local start = window_start(t, window)
  local prev, curr = 0, 0
  if start == s.window_start_us then
    prev, curr = s.prev, s.curr
  elseif start == s.window_start_us + window then
    prev = s.curr
  end
  s.window_start_us, s.prev, s.dirty = start, prev, true
  s.curr = recorded(curr, cost, max_recorded(policy, true))
end
