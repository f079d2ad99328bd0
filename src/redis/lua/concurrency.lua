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
