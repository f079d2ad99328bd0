-- fixed_window.lua — mirrors src/core/fixed_window.cc decide() step by step, and decides the
-- common acquire in one Redis command (fixed_window.acquire).
--
-- State (layout 3): a hash at KEYS[1] with one field, named by the window's start (µs, '%d')
-- and the definition it counts under: '<start>/<def>' (def: state_def in common.lua), whose
-- value is the count of units in that window (>= 1: a state counting nothing is deleted).
-- Why a field named by its window: an acquire is then HINCRBY key <start>/<def> cost, whose
-- reply (count + cost) is all the decision needs when the field was there — one command
-- instead of HMGET + HSET (+ PEXPIRE), the largest share of what a decision cost Redis. When
-- the field was not there (a new window, a new key, a clock that stepped back, an older
-- layout, or another definition's state) the full state is read and the mirror below decides,
-- so every decision is still src/core's.
-- Why the definition in the name: a field that exists was written under this very definition,
-- so the one-command path needs no check; any other field is seen on the full read, where a
-- field of another definition (another window or counting mode, or another algorithm's
-- fields) makes the call a policy conflict (common.lua conflict_decision), counting nothing.
-- Older layouts are read as this definition's state and replaced by layout 3 on their next
-- write: layout 2 (a field named by the start alone) and layout 1 (fields window_start_us and
-- count).
local fixed_window = {}

-- The state of HGETALL's reply `v` under definition `def`, leaving out field `skip` (the one an
-- acquire just created). s.fields lists every field read, so a write can remove the ones the
-- new state does not use; s.foreign: a field of another definition is there.
-- Several windows in one hash (an older build writing beside this one) read as the latest,
-- with the larger count at equal starts: a count is never invented, never summed past a limit.
local function parse_state(v, skip, def)
  local s = {window_start_us = 0, count = 0, fields = {}, def = def, foreign = false}
  local old_start, old_count
  for i = 1, #v, 2 do
    local name, value = v[i], tonumber(v[i + 1])
    if name ~= skip then
      s.fields[#s.fields + 1] = name
      if name == 'window_start_us' then
        old_start = value
      elseif name == 'count' then
        old_count = value
      else
        local start_text, field_def = string.match(name, '^(%d+)/(.+)$')
        if start_text == nil then start_text, field_def = name, def end  -- layout 2
        local start = tonumber(start_text)
        if field_def ~= def or start == nil then
          s.foreign = true
        elseif value ~= nil and value > 0 and
           (s.count == 0 or start > s.window_start_us or
            (start == s.window_start_us and value > s.count)) then
          s.window_start_us, s.count = start, value
        end
      end
    end
  end
  if old_start ~= nil and old_count ~= nil and old_count > 0 and
     (s.count == 0 or old_start > s.window_start_us or
      (old_start == s.window_start_us and old_count > s.count)) then
    s.window_start_us, s.count = old_start, old_count
  end
  return s
end

-- The definition of `policy`'s states (state_def), kept on the policy for every later item.
local function fixed_window_def(policy)
  if policy.fw_def == nil then policy.fw_def = state_def(algorithm_id.fixed_window, policy, true) end
  return policy.fw_def
end

function fixed_window.load(keys, policy)
  return parse_state(redis.call('HGETALL', keys[1]), nil, fixed_window_def(policy))
end

-- Writes the state's window field, then removes every other field that was read (they are
-- older windows or layout 1). HSET and HDEL keep the key's TTL.
function fixed_window.save(keys, s, ttl_ms)
  local field = int(s.window_start_us) .. '/' .. s.def
  redis.call('HSET', keys[1], field, int(s.count))
  for _, name in ipairs(s.fields) do
    if name ~= field then redis.call('HDEL', keys[1], name) end
  end
  if ttl_ms then redis.call('PEXPIRE', keys[1], ttl_ms) end
end

function fixed_window.delete(keys)
  redis.call('DEL', keys[1])
end

function fixed_window.idle_at_us(policy, s)
  if s.count > 0 then return s.window_start_us + policy.window_us end
  return 0
end

-- Whether fixed_window.acquire may decide an acquire of `cost`: it increments first, so only
-- where src/core changes the state on admission or counts the attempt: cost <= limit (a larger
-- cost changes nothing), or any cost >= 1 when every hit counts (cost 0 only checks).
function fixed_window.fast(policy, cost)
  if policy.every_hit then return cost >= 1 end
  return cost <= policy.limit
end

-- An acquire (fixed_window.fast(policy, cost)) of `cost` (cost_arg: the same as a decimal
-- string) on `key` at now_us; appends the decision to `out` (push_decision's four integers).
-- Equivalent to load + decide + persist: if HINCRBY's reply r is above cost, the window's field
-- was there with count c = r - cost >= 1, so the state is {start, c} with start = window_start(
-- max(now, 0)) (a hash holds one window, and never one later than its field), t = max(now, 0),
-- and decide() reduces to the lines below; the state it writes is r, or, for a denial, what
-- one more HINCRBY puts back. The TTL already ends at start + W. If r == cost the field is new:
-- a key holding nothing else (HLEN 1) was missing, a fresh state, which decide() treats as
-- count 0 at the same start and t — the same lines with c = 0 — and whose TTL is new;
-- anything else (another window, layout 1) is decided in full (acquire_other).
-- The window's start, its field and the time to its end are kept on `policy` for the next item
-- at the same now_us (a batch's items share the server's clock). A hash holding a field of
-- another definition is never decided here: r == cost, HLEN > 1, and acquire_other refuses it.
function fixed_window.acquire(policy, key, now_us, test_mode, cost, cost_arg, out)
  if policy.fw_now ~= now_us then
    local t = math.max(now_us, 0)
    local start = window_start(t, policy.window_us)
    policy.fw_now, policy.fw_start = now_us, start
    policy.fw_field = int(start) .. '/' .. fixed_window_def(policy)
    policy.fw_until_end = start + policy.window_us - t
  end
  local field = policy.fw_field
  local r = redis.call('HINCRBY', key, field, cost_arg)
  if r == cost then
    if redis.call('HLEN', key) ~= 1 then
      return fixed_window.acquire_other(policy, key, field, now_us, test_mode, cost, out)
    end
    redis.call('PEXPIRE', key, ttl_ms_arg(policy.fw_start + policy.window_us, now_us, test_mode))
  end
  local limit, until_end = policy.limit, policy.fw_until_end
  local n = #out
  if r <= limit then  -- admitted, every hit counting or not
    out[n + 1], out[n + 2], out[n + 3], out[n + 4] = kWithinLimit, limit - r, until_end, 0
    return
  end
  if policy.every_hit then
    -- count after = r, never cut at a limit (one counter serves every limit of a descriptor);
    -- it stops at kMaxEveryHitCount as in src/core.
    if r > kMaxEveryHitCount then redis.call('HINCRBY', key, field, int(kMaxEveryHitCount - r)) end
    if cost > limit then
      out[n + 1], out[n + 2], out[n + 3], out[n + 4] = kExceedsCapacity, 0, until_end, 0
    else
      out[n + 1], out[n + 2], out[n + 3], out[n + 4] = kOverLimit, 0, until_end, until_end
    end
    return
  end
  -- Denied (so c >= 1: cost <= limit): the count is c again, or the limit when denied attempts
  -- count (c + cost > limit).
  local kept = r - cost
  if policy.count_denied then kept = limit end
  redis.call('HINCRBY', key, field, int(kept - r))
  out[n + 1], out[n + 2], out[n + 3], out[n + 4] = kOverLimit, math.max(0, limit - kept), until_end, until_end
end

-- fixed_window.acquire when HINCRBY created `field` (holding cost) in a key that holds another
-- window (or an older layout, or another definition's state): the state without the new field
-- is decided in full; the field stays only if it is part of the new state, which replaces
-- every other field. Another definition's state is left as it was (the field removed again)
-- and the call answered with a policy conflict.
function fixed_window.acquire_other(policy, key, field, now_us, test_mode, cost, out)
  local s = parse_state(redis.call('HGETALL', key), field, fixed_window_def(policy))
  if s.foreign then
    redis.call('HDEL', key, field)
    push_decision(out, conflict_decision(policy, key))
    return
  end
  local idle_before = fixed_window.idle_at_us(policy, s)
  local d = fixed_window.decide(policy, s, now_us, cost, kAcquire)
  if s.dirty then
    s.fields[#s.fields + 1] = field
    persist(fixed_window, policy, {key}, s, now_us, test_mode, idle_before)
  else
    redis.call('HDEL', key, field)
  end
  push_decision(out, d)
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
      s.window_start_us, s.count, s.dirty = start, math.min(after, kMaxEveryHitCount), true
    end
    return d
  end
  if cost > limit then
    d.reason = kExceedsCapacity
    d.remaining = math.max(0, limit - count)
    if count > 0 then d.reset_after = until_end else d.reset_after = 0 end
    return d
  end
  if count + cost <= limit then
    d.allowed = true
    d.reason = kWithinLimit
    d.remaining = limit - (count + cost)
    if count + cost > 0 then d.reset_after = until_end else d.reset_after = 0 end
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
  d.remaining = math.max(0, limit - kept)
  return d
end

-- fixed_window.cc record: a report moves the current window's count (debt: above the limit).
function fixed_window.record(policy, s, now_us, cost)
  local t = math.max(now_us, s.window_start_us, 0)
  local start = window_start(t, policy.window_us)
  local count = 0
  if start == s.window_start_us then count = s.count end
  s.window_start_us, s.count, s.dirty = start, recorded(count, cost, max_recorded(policy)), true
end
