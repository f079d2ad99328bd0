#!lua name=ratelimit_4ee65dc9362c
-- common.lua — what every ratelimit script shares: src/core/units.h line for line, the
-- decision record, reading time and policy from ARGV, and writing state back with its TTL.
--
-- Numbers: Lua 5.1 numbers are IEEE doubles. Every integer here stays below 2^53 (Policy
-- guarantees it, see include/ratelimit/policy.h), so +, - and * of integers are exact, and
-- floor(elapsed * rate) is the same bits as in C++. Division is not exact (a / b rounds to the
-- nearest double), so integer division goes through idiv(), which settles on the C++ int64
-- quotient. Integers are written back to Redis with int() ('%d'), never tostring() (14 digits).
-- Redis truncates returned Lua numbers to integers: decisions are returned as integers only.

local kUnit = 1000000  -- micro-units per unit (algorithms.h kUnit)
local kMaxEveryHitCount = 4503599627370496  -- 2^52, policy.h kMaxEveryHitCount
local kMaxDebtLimits = 8  -- algorithms.h kMaxDebtLimits

local kAcquire = 0     -- algo::Op
local kPeek = 1
local kRelease = 2
local kRenew = 3
local kReport = 4

local kWithinLimit = 0 -- DecisionReason, same order as include/ratelimit/decision.h
local kOverLimit = 1
local kExceedsCapacity = 2
local kLeaseNotHeld = 5
local kPolicyConflict = 6

-- In test mode (time given by the caller) TTLs are computed from a fake clock and mean
-- nothing in real time; they are raised to this floor so state cannot expire mid-test.
local kTestModeMinTtlMs = 600000

local function int(x)
  return string.format('%d', x)
end

-- Exact floor(a / b) for integers 0 <= a, 0 < b, below 2^53: C++ int64 division.
local function idiv(a, b)
  local q = math.floor(a / b)
  -- a / b was rounded to the nearest double: at most one step off the exact quotient.
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

-- units.h drained_u: micro-units gained or lost over elapsed_us at rate units per second.
local function drained_u(elapsed_us, rate)
  return math.floor(elapsed_us * rate)
end

-- units.h time_to_drain_us: the least elapsed_us with drained_u(elapsed_us, rate) >= need_u.
local function time_to_drain_us(need_u, rate)
  if need_u <= 0 then return 0 end
  local t = math.ceil(need_u / rate)
  -- The division rounds; settle on the exact boundary of drained_u itself.
  while t > 0 and drained_u(t - 1, rate) >= need_u do t = t - 1 end
  while drained_u(t, rate) < need_u do t = t + 1 end
  return t
end

-- units.h elapsed_since: never negative (a clock stepping back counts as no time).
local function elapsed_since(last_us, now_us)
  return math.max(0, now_us - last_us)
end

-- units.h window_start: start of the window of length window_us containing now_us (>= 0).
local function window_start(now_us, window_us)
  local now_mod_window = now_us - idiv(now_us, window_us) * window_us  -- C++ now_us % window_us
  return now_us - now_mod_window
end

-- units.h ceil_div: ceiling of a / b for a >= 0, b > 0.
local function ceil_div(a, b)
  return idiv(a + b - 1, b)
end

-- algorithms.h recorded: what a report moves `held` to — a positive cost added up to `cap`
-- (never lowering a value above it), a refund taken down to 0 at most.
local function recorded(held, cost, cap)
  if cost < 0 then return math.max(0, held + cost) end
  return math.max(held, math.min(held + cost, cap))
end

-- algorithms.h max_recorded: the most units a key holds after reports. `weighted`: the sliding
-- window counter, whose weighted count must stay below 2^53.
local function max_recorded(policy, weighted)
  if policy.every_hit then return kMaxEveryHitCount end
  local most = (kMaxDebtLimits + 1) * policy.limit
  if weighted then return math.min(most, idiv(9007199254740991, policy.window_us)) end
  return most
end

-- units.h refilled: a bucket's level after draining from last_us to t, never below 0; elapsed
-- capped at kMaxDebtLimits + 1 full drain times (elapsed * rate < 2^53).
local function refilled(policy, level_u, last_us, t)
  local elapsed = math.min(elapsed_since(last_us, t), (kMaxDebtLimits + 1) * policy.window_us)
  return math.max(0, level_u - drained_u(elapsed, policy.rate))
end

-- The record step of both buckets (token_bucket.cc, leaky_bucket.cc record): the level
-- (micro-units taken or queued) and its time after a report of `cost` at now_us.
local function recorded_level(policy, level_u, last_us, now_us, cost)
  local t = math.max(now_us, last_us)
  return recorded(refilled(policy, level_u, last_us, t), cost * kUnit, max_recorded(policy) * kUnit), t
end

local function new_decision(limit)
  return {allowed = false, reason = kOverLimit, limit = limit, remaining = 0,
          reset_after = 0, retry_after = 0, delay = 0}
end

-- ARGV[i] is the caller's time in test mode, '-' for the server's clock.
local function read_now(arg)
  if arg == '-' then
    local t = redis.call('TIME')
    return tonumber(t[1]) * 1000000 + tonumber(t[2]), false
  end
  return tonumber(arg), true
end

-- The policy fields, from ARGV[i] on: limit, window_us, rate, shape (0/1), counting (0 admitted
-- only, 1 count denied, 2 every hit: Policy::fixed_window_every_hit).
-- A bucket's window (rate > 0: token and leaky bucket) is derived here, as Policy derives it
-- (time_to_drain_us of a full bucket), never taken from the caller: every client then needs
-- only burst and rate to call the library, and a caller's rounding cannot change a bucket.
local function read_policy(argv, i)
  local limit, rate = tonumber(argv[i]), tonumber(argv[i + 2])
  local window_us = rate > 0 and time_to_drain_us(limit * kUnit, rate) or tonumber(argv[i + 1])
  return {limit = limit, window_us = window_us, window_arg = argv[i + 1], rate = rate,
          shape = argv[i + 3] == '1', shape_arg = argv[i + 3],
          count_denied = argv[i + 4] == '1', every_hit = argv[i + 4] == '2'}
end

-- The definition a state is written under (Policy::same_state_meaning in src/core/policy.cc):
-- the algorithm's id, the window for the window algorithms (empty for the buckets, whose rate
-- is a capacity: changing it applies to the live state, as changing a limit does) and the
-- counting mode. A state's hash keeps it in field 'd' (fixed_window.lua: in its field names),
-- so a call under another definition of the same policy name is refused (kPolicyConflict)
-- instead of reading the state under another meaning (issue 31: two clients using one name
-- with different algorithms admitted 21 against a limit of 10). The window is the argument as
-- it came (a decimal integer, as every caller sends it): formatting it again costs every call.
local function state_def(id, policy, windowed)
  local counting = '0'
  if policy.every_hit then counting = '2' elseif policy.count_denied then counting = '1' end
  if windowed then return id .. ':' .. policy.window_arg .. ':' .. counting end
  return id .. '::' .. counting
end

-- Whether the state at `key` was written under another definition than `def`: `v` is the HMGET
-- of the algorithm's own fields, then 'd' last. A 'd' says so at once; with none, a state that
-- has one of this algorithm's fields is read as this definition's (written before definitions
-- were kept; it gets one on its next write), and a key with none of them is another
-- algorithm's state if it exists at all (one HLEN, for a fresh key only: HLEN, not EXISTS, as
-- the ACL docs/redis.md documents already allows it).
local function foreign_state(key, v, def)
  local n = #v
  if v[n] then return v[n] ~= def end
  for i = 1, n - 1 do
    if v[i] then return false end
  end
  return redis.call('HLEN', key) > 0
end

-- algo::conflict_decision: the answer to a call whose policy does not share the meaning of the
-- live state at `key`: denied, nothing counted, retry_after = reset_after = until that state
-- ends — its TTL, which persist() set to its idle time (ms here; µs in the memory store).
-- PTTL through pcall: an ACL user of an older docs/redis.md has no +pttl, and a conflict must
-- stay an answer, not an error; it then says 1 s (the failure policy's closed retry).
local function conflict_decision(policy, key)
  local d = new_decision(policy.limit)
  d.reason = kPolicyConflict
  local ttl_ms = redis.pcall('PTTL', key)
  local until_idle = 1000000
  if type(ttl_ms) == 'number' and ttl_ms > 0 then until_idle = ttl_ms * 1000 end
  d.reset_after, d.retry_after = until_idle, until_idle
  return d
end

-- The TTL of a state that is idle again at `idle_at` (algo::idle_at_us, > now_us), rounded up
-- to the millisecond; at least kTestModeMinTtlMs in test mode. As a PEXPIRE argument.
local function ttl_ms_arg(idle_at, now_us, test_mode)
  local ttl_ms = ceil_div(idle_at - now_us, 1000)
  if test_mode then ttl_ms = math.max(ttl_ms, kTestModeMinTtlMs) end
  return int(ttl_ms)
end

-- Writes a changed state back with a TTL that ends when the state is idle again
-- (algo::idle_at_us, ttl_ms_arg); an idle state is deleted instead.
-- `idle_before` is idle_at_us of the state as loaded (0 for a missing key): when the write
-- leaves it unchanged (a fixed window counting within its window), the key's TTL already ends
-- there — the write that set that idle time set it — and is left as it is (one command less).
-- algorithm.save(keys, s, ttl_ms) writes the state, and sets the TTL unless ttl_ms is nil.
local function persist(algorithm, policy, keys, s, now_us, test_mode, idle_before)
  if not s.dirty then return end
  local idle_at = algorithm.idle_at_us(policy, s)
  if idle_at <= now_us then
    algorithm.delete(keys)
    return
  end
  if idle_at == idle_before then
    algorithm.save(keys, s, nil)
    return
  end
  algorithm.save(keys, s, ttl_ms_arg(idle_at, now_us, test_mode))
end

-- The reply: four integers per decision — reason, remaining, reset_after_us, and delay_us when
-- allowed, retry_after_us when not. Nothing is lost: allowed is reason == kWithinLimit in every
-- algorithm, a denial has no delay and an admission no retry_after (include/ratelimit/
-- decision.h); every integer returned costs Redis a conversion, so none is sent twice.
-- A decision under an adaptive concurrency policy (d.learned) carries its learned limit in the
-- reason: reason + kLimitShift × limit (reasons are below kLimitShift; script_codec.cc
-- decision_at splits it); every other caller knows its limit already.
local kLimitShift = 16
local function push_decision(out, d)
  local n = #out
  if d.learned then out[n + 1] = d.reason + kLimitShift * d.limit else out[n + 1] = d.reason end
  out[n + 2] = d.remaining
  out[n + 3] = d.reset_after
  if d.allowed then out[n + 4] = d.delay else out[n + 4] = d.retry_after end
end
-- From kAlgorithmTable (include/ratelimit/policy.h), by embed_lua.cmake: each algorithm's id.
local algorithm_id = {fixed_window = 0, sliding_window_log = 1, sliding_window_counter = 2, token_bucket = 3, leaky_bucket = 4, concurrency = 5, }
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
-- adaptive.lua — mirrors src/core/adaptive_limit.cc (the estimators of an adaptive concurrency
-- limit: Gradient2, AIMD, Vegas) rule for rule, so that a concurrency policy with `limit:
-- adaptive` learns ONE limit per policy and key on Redis, from the samples of every instance
-- that shares the key (issue 30). The rules, units and bounds are stated in
-- include/ratelimit/adaptive_limit.h; tests/vectors/adaptive_limit.json holds C++ and this file
-- together (tests/redis/adaptive_lua_test.cc runs every vector here).
-- Arithmetic: integers in Lua doubles, every division through idiv (common.lua), exact while the
-- operands stay below 2^53, as the header's units keep them (limit_m <= 1e8, round trips below
-- 3.6e9 µs, long_rtt_ns below 3.6e12). Vegas' queue is never formed: its comparisons with
-- lg / alpha / beta are made on the products (ceil(a / b) <= k  iff  a <= k·b), whose small side
-- is exact and whose large side, even where rounded, is far from it.
-- Prepended to concurrency.lua by embed_lua.cmake (concurrency.lua is its only user).
local adaptive = {}
adaptive.kMilli = 1000
adaptive.kRetainUs = 600 * 1000000
adaptive.kMaxSampleUs = 3600 * 1000000 - 1
local kWarmupSamples, kLongWindow, kQueueUnits = 10, 600, 4
local kSmoothingM, kToleranceM, kMinGradientM, kBackoffM, kProbeMultiplier = 200, 1500, 500, 900, 30
local kWindowMinSamples, kWindowMinRttUs = 10, 100

local function clamp(x, lo, hi)
  return math.max(lo, math.min(hi, x))
end

-- `from` moved by num/den of (to - from), the step's magnitude floored (toward `from`).
local function approach(from, to, num, den)
  if to >= from then return from + idiv((to - from) * num, den) end
  return from - idiv((from - to) * num, den)
end

local function log10_floor_at_least_1(n)
  local lg = 0
  while n >= 10 do
    n = idiv(n, 10)
    lg = lg + 1
  end
  return math.max(1, lg)
end

local function app_limited(s, inflight)
  return inflight * 2 * adaptive.kMilli < s.limit_m
end

local function gradient2(s, x, rtt_us)
  if x.dropped then return idiv(s.limit_m * kBackoffM, adaptive.kMilli) end
  local rtt_ns = rtt_us * adaptive.kMilli
  if s.samples < kWarmupSamples then
    s.samples = s.samples + 1
    s.long_rtt_ns = approach(s.long_rtt_ns, rtt_ns, 1, s.samples)
  else
    s.long_rtt_ns = approach(s.long_rtt_ns, rtt_ns, 2, kLongWindow + 1)
  end
  if s.long_rtt_ns > 2 * rtt_ns then s.long_rtt_ns = idiv(s.long_rtt_ns * 95, 100) end
  if app_limited(s, x.inflight) then return s.limit_m end
  local g_m = clamp(idiv(kToleranceM * s.long_rtt_ns, rtt_us * adaptive.kMilli), kMinGradientM, adaptive.kMilli)
  local target_m = idiv(s.limit_m * g_m, adaptive.kMilli) + kQueueUnits * adaptive.kMilli
  return idiv(s.limit_m * (adaptive.kMilli - kSmoothingM) + target_m * kSmoothingM, adaptive.kMilli)
end

local function aimd(s, x)
  if x.dropped then return idiv(s.limit_m * kBackoffM, adaptive.kMilli) end
  if app_limited(s, x.inflight) then return s.limit_m end
  return s.limit_m + adaptive.kMilli
end

local function vegas(s, x, rtt_us)
  local whole = idiv(s.limit_m, adaptive.kMilli)
  local lg = log10_floor_at_least_1(whole)
  if x.dropped then return s.limit_m - lg * adaptive.kMilli end
  s.probe_count = s.probe_count + 1
  if s.probe_count >= kProbeMultiplier * math.max(1, whole) then
    s.probe_count = 0
    s.noload_rtt_us = rtt_us
    return s.limit_m
  end
  if s.noload_rtt_us == 0 or rtt_us < s.noload_rtt_us then
    s.noload_rtt_us = rtt_us
    return s.limit_m
  end
  if app_limited(s, x.inflight) then return s.limit_m end
  -- queue = ceil(num / den); queue <= k  iff  num <= k·den.
  local num = s.limit_m * (rtt_us - s.noload_rtt_us)
  local den = rtt_us * adaptive.kMilli
  local alpha, beta = 3 * lg, 6 * lg
  if num <= lg * den then return s.limit_m + beta * adaptive.kMilli end
  if num <= (alpha - 1) * den then return s.limit_m + lg * adaptive.kMilli end
  if num > beta * den then return s.limit_m - lg * adaptive.kMilli end
  return s.limit_m
end

local estimators = {gradient2 = 0, aimd = 1, vegas = 2}

-- A policy's adaptive settings from the `shape` argument of an adaptive concurrency policy:
-- "a:<estimator 0 gradient2, 1 aimd, 2 vegas>:<min>:<initial>:<max>:<window_us>"
-- (script_codec.cc append_policy_args); nil for anything else.
function adaptive.read_config(arg)
  if string.sub(arg, 1, 2) ~= 'a:' then return nil end
  local e, lo, init, hi, w = string.match(arg, '^a:(%d):(%d+):(%d+):(%d+):(%d+)$')
  if e == nil then error('bad adaptive policy argument: ' .. arg) end
  return {estimator = tonumber(e), min_limit = tonumber(lo), initial_limit = tonumber(init),
          max_limit = tonumber(hi), window_us = tonumber(w)}
end
adaptive.estimators = estimators

-- AdaptiveState's fields, in the order the hash keeps them (concurrency.lua).
adaptive.fields = {'limit_m', 'long_rtt_ns', 'samples', 'noload_rtt_us', 'probe_count', 'window_end_us',
                   'window_count', 'window_rtt_sum_us', 'window_max_inflight', 'window_dropped',
                   'last_sample_us'}

function adaptive.initial_state(c)
  local s = {}
  for _, f in ipairs(adaptive.fields) do s[f] = 0 end
  s.limit_m = c.initial_limit * adaptive.kMilli
  return s
end

function adaptive.limit(s)
  return idiv(s.limit_m, adaptive.kMilli)
end

-- update(): one sample {rtt_us, inflight, dropped} moves the state; returns limit(s).
function adaptive.update(c, s, x)
  local lo, hi = c.min_limit * adaptive.kMilli, c.max_limit * adaptive.kMilli
  s.limit_m = clamp(s.limit_m, lo, hi)
  local rtt_us = clamp(x.rtt_us, 1, adaptive.kMaxSampleUs)
  local nxt
  if c.estimator == estimators.aimd then
    nxt = aimd(s, x)
  elseif c.estimator == estimators.vegas then
    nxt = vegas(s, x, rtt_us)
  else
    nxt = gradient2(s, x, rtt_us)
  end
  s.limit_m = clamp(nxt, lo, hi)
  return adaptive.limit(s)
end

-- update_at(): per window (c.window_us > 0) or per sample (0), the sample ended at now_us.
function adaptive.update_at(c, s, x, now_us)
  if c.window_us == 0 then return adaptive.update(c, s, x) end
  if x.rtt_us < kWindowMinRttUs and not x.dropped then return adaptive.limit(s) end
  if s.window_count == 0 then s.window_end_us = now_us + c.window_us end
  s.window_count = s.window_count + 1
  s.window_rtt_sum_us = s.window_rtt_sum_us + clamp(x.rtt_us, 0, adaptive.kMaxSampleUs)
  s.window_max_inflight = math.max(s.window_max_inflight, x.inflight)
  if x.dropped then s.window_dropped = 1 end
  if now_us < s.window_end_us then return adaptive.limit(s) end
  local merged = {rtt_us = idiv(s.window_rtt_sum_us, s.window_count), inflight = s.window_max_inflight,
                  dropped = s.window_dropped == 1}
  local ready = s.window_count >= kWindowMinSamples
  s.window_end_us, s.window_count, s.window_rtt_sum_us, s.window_max_inflight, s.window_dropped = 0, 0, 0, 0, 0
  if ready then return adaptive.update(c, s, merged) end
  return adaptive.limit(s)
end
-- concurrency.lua — mirrors src/core/concurrency.cc decide() step by step: at most `limit` units
-- held at once per key, by leases released by id or expiring after lease_ttl (policy.window_us).
-- State: a sorted set at KEYS[2] (lease id -> expires_us: expired leases are a prefix, and the
-- soonest to expire come first, the order of the C++ vector) and a hash at KEYS[1] holding
-- `held` (units held), `d` (the definition: common.lua state_def) and the weight of each lease
-- whose weight is not 1 (1 when absent: the usual lease costs no hash field). Both keys share the user key's hash tag and one TTL, ending
-- when the last lease expires; with no lease held both are deleted.
-- Unlike the rate algorithms this one works on Redis' structures in place instead of loading the
-- whole state: a decision costs O(log n) plus the leases that expire, not O(n).
-- A release that frees a lease publishes "<lease id> <KEYS[1]>" on channel `ratelimit:released`
-- in the same call, so every ratelimitd subscribed to this Redis wakes the waiters of that key
-- at once (RedisStore::watch_releases, src/redis/subscriber.h). Plain PUBLISH, not SPUBLISH: in
-- a Cluster it reaches every node (one subscriber connection per process hears all shards),
-- where a sharded channel must hash to the key's slot and would need one subscription per
-- waiting key.
-- Adaptive policies (`limit: adaptive`, the policy's shape argument "a:...", adaptive.lua): the
-- limit is the key's learned one, kept in the same hash (fields "a:<AdaptiveState field>") and
-- moved by every instance's samples in the call that frees the lease, as src/core/concurrency.cc
-- does: each lease feeds exactly one sample — its release (the round trip from its grant, or the
-- latency its release reported; dropped when the release said so) or its expiry (a drop whose
-- round trip is its whole life). A lease keeps "g<id>" = "<granted_us>:<inflight>" for that. A
-- lease granted before the policy became adaptive has none and feeds no sample. The learned
-- limit outlives the leases by kRetainUs after its last sample (then the key starts again from
-- initial_limit). The decision's limit travels in the reply's reason integer (push_decision).
local concurrency = {}
concurrency.released_channel = 'ratelimit:released'

local function lease_weight(h, id)
  return tonumber(redis.call('HGET', h, id)) or 1
end

-- Forgets a lease's weight (only a weight other than 1 has a field).
local function drop_weight(h, id, weight)
  if weight ~= 1 then redis.call('HDEL', h, id) end
end

-- The adaptive state of hash h (limit_m 0: none yet).
local function load_adaptive(h)
  local names = {}
  for i, f in ipairs(adaptive.fields) do names[i] = 'a:' .. f end
  local values = redis.call('HMGET', h, unpack(names))
  local s = {}
  for i, f in ipairs(adaptive.fields) do s[f] = tonumber(values[i]) or 0 end
  return s
end

local function save_adaptive(h, s)
  local args = {}
  for _, f in ipairs(adaptive.fields) do
    args[#args + 1] = 'a:' .. f
    args[#args + 1] = int(s[f])
  end
  redis.call('HSET', h, unpack(args))
end

-- One lease's round trip as a sample at now_us (concurrency.cc sample()); the lease's grant
-- record is forgotten with it. False when the lease has none (granted under a fixed limit).
-- rtt_us nil: from its grant to `ended_us` (a release: now; an expiry: its expiry, so its whole
-- life, as concurrency.cc expire()).
local function sample(c, s, h, id, now_us, rtt_us, dropped, ended_us)
  local grant = redis.call('HGET', h, 'g' .. id)
  if not grant then return false end
  redis.call('HDEL', h, 'g' .. id)
  local granted, inflight = string.match(grant, '^(%d+):(%d+)$')
  if rtt_us == nil then rtt_us = ended_us - tonumber(granted) end
  if s.limit_m == 0 then
    local fresh = adaptive.initial_state(c)
    for k, v in pairs(fresh) do s[k] = v end
  end
  adaptive.update_at(c, s, {rtt_us = math.max(0, math.min(rtt_us, adaptive.kMaxSampleUs)),
                            inflight = tonumber(inflight), dropped = dropped}, now_us)
  s.last_sample_us = now_us
  return true
end

-- algo::concurrency_limit: the fixed limit, or the key's learned one (initial_limit before any).
local function current_limit(policy, c, s)
  if not c then return policy.limit end
  if s.limit_m == 0 then return c.initial_limit end
  return math.max(c.min_limit, math.min(c.max_limit, adaptive.limit(s)))
end

-- One decision; `lease` is the id (32 hex digits) for acquire, release and renew — for a
-- release under an adaptive policy "<id>,<dropped 0|1>,<latency_us, -1: none>".
function concurrency.run(policy, keys, now_us, test_mode, cost, op, lease)
  if policy.adaptive == nil then policy.adaptive = adaptive.read_config(policy.shape_arg) or false end
  local c = policy.adaptive
  local dropped, latency = false, nil
  if lease ~= nil and #lease > 32 then
    local id, dr, la = string.match(lease, '^(%x+),([01]),(-?%d+)$')
    lease, dropped = id, dr == '1'
    if tonumber(la) >= 0 then latency = tonumber(la) end
  end
  local h, z = keys[1], keys[2]
  -- The hash's definition (state_def: the algorithm alone, as Policy::same_state_meaning has
  -- it) is written beside `held`. Another one, or a hash with neither that a rate algorithm
  -- wrote (fixed_window.lua keeps its definition in its field names), is a policy conflict.
  local def = algorithm_id.concurrency .. '::'
  local meta = redis.call('HMGET', h, 'held', 'd')
  if (meta[2] and meta[2] ~= def) or (not meta[1] and not meta[2] and redis.call('HLEN', h) > 0) then
    return conflict_decision(policy, h)
  end
  local held = tonumber(meta[1]) or 0
  local s = c and load_adaptive(h)
  local dirty = false
  -- Leases whose time has come free themselves (a prefix: the set is in expiry order); under an
  -- adaptive policy each is a drop whose round trip is its whole life.
  local expired = redis.call('ZRANGEBYSCORE', z, '-inf', int(now_us), 'WITHSCORES')
  if #expired > 0 then
    for i = 1, #expired, 2 do
      local id = expired[i]
      local weight = lease_weight(h, id)
      held = held - weight
      drop_weight(h, id, weight)
      if c then sample(c, s, h, id, now_us, nil, true, tonumber(expired[i + 1])) end
    end
    redis.call('ZREMRANGEBYSCORE', z, '-inf', int(now_us))
    dirty = true
  end
  local limit = current_limit(policy, c, s)

  local d = new_decision(limit)
  if op == kReport then  -- refused before it gets here (a concurrency policy takes no reports)
    d.allowed = true
    d.reason = kWithinLimit
  elseif op == kRelease or op == kRenew then
    local expires = redis.call('ZSCORE', z, lease)
    if not expires then
      d.reason = kLeaseNotHeld
    else
      d.allowed = true
      d.reason = kWithinLimit
      if op == kRelease then
        local weight = lease_weight(h, lease)
        held = held - weight
        drop_weight(h, lease, weight)
        redis.call('ZREM', z, lease)
        if c then sample(c, s, h, lease, now_us, latency, dropped, now_us) end
        redis.call('PUBLISH', concurrency.released_channel, lease .. ' ' .. h)
      else
        -- Never shortens a lease (a clock stepping back, a policy redefined with a shorter TTL).
        redis.call('ZADD', z, int(math.max(tonumber(expires), now_us + policy.window_us)), lease)
      end
      dirty = true
    end
  else
    if cost > limit then
      d.reason = kExceedsCapacity
    elseif held + cost <= limit then
      d.allowed = true
      d.reason = kWithinLimit
      if op == kAcquire then
        redis.call('ZADD', z, int(now_us + policy.window_us), lease)
        if cost ~= 1 then redis.call('HSET', h, lease, int(cost)) end
        held = held + cost
        if c then redis.call('HSET', h, 'g' .. lease, int(now_us) .. ':' .. int(held)) end
        dirty = true
      end
    else
      -- Denied: wait until enough leases expire (soonest first) for the request to fit. Every
      -- weight is >= 1, so the first held + cost - limit leases are enough.
      d.reason = kOverLimit
      local first = redis.call('ZRANGE', z, 0, held + cost - limit - 1, 'WITHSCORES')
      local freed = 0
      for i = 1, #first, 2 do
        freed = freed + lease_weight(h, first[i])
        if held - freed + cost <= limit then
          d.retry_after = tonumber(first[i + 1]) - now_us
          break
        end
      end
    end
  end
  if op == kRelease and c then
    limit = current_limit(policy, c, s)  -- this release's sample may have moved it
    d.limit = limit
  end
  d.remaining = math.max(0, limit - held)
  local last = redis.call('ZRANGE', z, -1, -1, 'WITHSCORES')
  if #last > 0 then d.reset_after = tonumber(last[2]) - now_us end
  if dirty then
    -- The state is idle when the last lease expires, or an adaptive key's learned limit
    -- kRetainUs after its last sample, whichever is later (algo::idle_at_us).
    local idle_at = 0
    if #last > 0 then idle_at = tonumber(last[2]) end
    if c and s.limit_m ~= 0 then idle_at = math.max(idle_at, s.last_sample_us + adaptive.kRetainUs) end
    if idle_at <= now_us then
      redis.call('DEL', h, z)
    else
      local ttl_ms = ttl_ms_arg(idle_at, now_us, test_mode)
      redis.call('HSET', h, 'held', int(held), 'd', def)
      if c and s.limit_m ~= 0 then save_adaptive(h, s) end
      redis.call('PEXPIRE', h, ttl_ms)
      if #last > 0 then redis.call('PEXPIRE', z, ttl_ms) end
    end
  end
  d.learned = c and true
  return d
end
-- From kAlgorithmTable, by embed_lua.cmake: the algorithms by id, and their names.
local algorithms = {[0] = fixed_window, [1] = sliding_window_log, [2] = sliding_window_counter, [3] = token_bucket, [4] = leaky_bucket, [5] = concurrency, }
local algorithm_names = {[0] = 'fixed_window', [1] = 'sliding_window_log', [2] = 'sliding_window_counter', [3] = 'token_bucket', [4] = 'leaky_bucket', [5] = 'concurrency', }
local kAlgorithmCount = 6
-- entry.lua — run_single, one decision as a plain function of (algorithm, keys, args), which
-- every way of calling the store shares: the one-algorithm EVALSHA scripts (single.lua) and the
-- function library (library.lua), and decide_one, which every item of a batch shares with it.
-- Appended after common.lua and the algorithm file(s).
-- One decision on `keys` (the algorithm's keys), appended to `out`: what run_single and every
-- item of run_batch do. cost_arg is cost as a decimal string (an argument as it came).
-- An algorithm with an `acquire` (fixed_window.lua) decides the acquires its `fast` accepts
-- itself, with fewer commands; one with a `run` (concurrency.lua) works on its keys in place and
-- takes the lease id; every other decision is load + decide + persist, or a policy conflict
-- when the state was written under another definition of the name (load's s.foreign).
-- algo::report (src/core/decide.cc): records a report (cost may be negative: a refund) and
-- answers the state after it as a cost-0 peek sees it, admitted (a report is never refused).
local function report(algorithm, policy, s, now_us, cost)
  algorithm.record(policy, s, now_us, cost)
  local d = algorithm.decide(policy, s, now_us, 0, kPeek)
  d.allowed, d.reason, d.retry_after, d.delay = true, kWithinLimit, 0, 0
  return d
end

-- algo::decide for every op of a rate algorithm: a report through report(), the rest decide().
local function decide_state(algorithm, policy, s, now_us, cost, op)
  if op == kReport then return report(algorithm, policy, s, now_us, cost) end
  return algorithm.decide(policy, s, now_us, cost, op)
end

local function decide_one(algorithm, policy, keys, now_us, test_mode, cost, cost_arg, op, out,
                          lease)
  if algorithm.run ~= nil then
    push_decision(out, algorithm.run(policy, keys, now_us, test_mode, cost, op, lease))
    return
  end
  if algorithm.acquire ~= nil and op == kAcquire and algorithm.fast(policy, cost) then
    algorithm.acquire(policy, keys[1], now_us, test_mode, cost, cost_arg, out)
    return
  end
  local s = algorithm.load(keys, policy)
  if s.foreign then
    push_decision(out, conflict_decision(policy, keys[1]))
    return
  end
  local idle_before = algorithm.idle_at_us(policy, s)
  local d = decide_state(algorithm, policy, s, now_us, cost, op)
  persist(algorithm, policy, keys, s, now_us, test_mode, idle_before)
  push_decision(out, d)
end

-- run_single: one decision.
-- keys: the algorithm's keys (keys[1] its state; the sliding log also keys[2], its entries).
-- args: now ('-' = the server's TIME; an integer µs only in test mode), cost, op (0 acquire,
--       1 peek, 2 release, 3 renew, 4 report), limit, window_us, rate, shape (0/1), count_denied (0/1),
--       and for concurrency the lease id (32 hex digits).
-- Returns: push_decision's four integers (reason, remaining, reset_after_us, delay_us or
--          retry_after_us).
local function run_single(algorithm, keys, args)
  local now_us, test_mode = read_now(args[1])
  local out = {}
  decide_one(algorithm, read_policy(args, 4), keys, now_us, test_mode, tonumber(args[2]), args[2],
             tonumber(args[3]), out, args[9])
  return out
end
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
-- library.lua — the Redis Functions library (Redis >= 7): the same entry points as the EVALSHA
-- scripts, registered once when the library is loaded (FUNCTION LOAD REPLACE on connect), so a
-- call builds none of the algorithms' tables and closures again, as every EVALSHA call must.
-- The build prepends `#!lua name=ratelimit_<version>`, common.lua, the algorithm files (with the
-- generated `algorithms` table), entry.lua, multi.lua and distributed.lua, and replaces 4ee65dc9362c by the version (12 hex digits of the SHA1 of the
-- library's text): versions never share a library or function name, so instances running
-- different builds can share one Redis, each calling its own code.
-- Function names: rl4ee65dc9362c_<algorithm> (keys/args of run_single), rl4ee65dc9362c_acquire_all (run_all),
-- rl4ee65dc9362c_batch (run_batch), rl4ee65dc9362c_decide_many (run_many), rl4ee65dc9362c_reserve (run_reserve),
-- rl4ee65dc9362c_add_hits (run_add_hits).
-- `algorithms`, `algorithm_names` and kAlgorithmCount: generated from kAlgorithmTable by the
-- build (embed_lua.cmake). (A numeric loop: Redis 7.0 loads a library with only some globals,
-- and `pairs` is not one.)
for id = 0, kAlgorithmCount - 1 do
  local algorithm = algorithms[id]
  redis.register_function('rl4ee65dc9362c_' .. algorithm_names[id],
                          function(keys, args) return run_single(algorithm, keys, args) end)
end
redis.register_function('rl4ee65dc9362c_acquire_all', run_all)
redis.register_function('rl4ee65dc9362c_batch', run_batch)
redis.register_function('rl4ee65dc9362c_decide_many', run_many)
redis.register_function('rl4ee65dc9362c_reserve', run_reserve)
redis.register_function('rl4ee65dc9362c_add_hits', run_add_hits)
