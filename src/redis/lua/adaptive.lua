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
