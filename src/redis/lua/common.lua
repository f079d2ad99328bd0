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
