-- concurrency.lua — mirrors src/core/concurrency.cc decide() step by step: at most `limit` units
-- held at once per key, by leases released by id or expiring after lease_ttl (policy.window_us).
-- State: a sorted set at KEYS[2] (lease id -> expires_us: expired leases are a prefix, and the
-- soonest to expire come first, the order of the C++ vector) and a hash at KEYS[1] holding
-- `held` (units held) and the weight of each lease whose weight is not 1 (1 when absent: the
-- usual lease costs no hash field). Both keys share the user key's hash tag and one TTL, ending
-- when the last lease expires; with no lease held both are deleted.
-- Unlike the rate algorithms this one works on Redis' structures in place instead of loading the
-- whole state: a decision costs O(log n) plus the leases that expire, not O(n).
-- A release that frees a lease publishes "<lease id> <KEYS[1]>" on channel `ratelimit:released`
-- in the same call, so every ratelimitd subscribed to this Redis wakes the waiters of that key
-- at once (RedisStore::watch_releases, src/redis/subscriber.h). Plain PUBLISH, not SPUBLISH: in
-- a Cluster it reaches every node (one subscriber connection per process hears all shards),
-- where a sharded channel must hash to the key's slot and would need one subscription per
-- waiting key.
local concurrency = {}
concurrency.released_channel = 'ratelimit:released'

local function lease_weight(h, id)
  return tonumber(redis.call('HGET', h, id)) or 1
end

-- Forgets a lease's weight (only a weight other than 1 has a field).
local function drop_weight(h, id, weight)
  if weight ~= 1 then redis.call('HDEL', h, id) end
end

-- One decision; `lease` is the id (32 hex digits) for acquire, release and renew.
function concurrency.run(policy, keys, now_us, test_mode, cost, op, lease)
  local limit = policy.limit
  local h, z = keys[1], keys[2]
  local held = tonumber(redis.call('HGET', h, 'held')) or 0
  local dirty = false
  -- Leases whose time has come free themselves (a prefix: the set is in expiry order).
  local expired = redis.call('ZRANGEBYSCORE', z, '-inf', int(now_us))
  if #expired > 0 then
    for _, id in ipairs(expired) do
      local weight = lease_weight(h, id)
      held = held - weight
      drop_weight(h, id, weight)
    end
    redis.call('ZREMRANGEBYSCORE', z, '-inf', int(now_us))
    dirty = true
  end

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
  d.remaining = math.max(0, limit - held)
  local last = redis.call('ZRANGE', z, -1, -1, 'WITHSCORES')
  if #last > 0 then d.reset_after = tonumber(last[2]) - now_us end
  if dirty then
    if #last == 0 then
      redis.call('DEL', h, z)
    else
      local ttl_ms = ttl_ms_arg(tonumber(last[2]), now_us, test_mode)
      redis.call('HSET', h, 'held', int(held))
      redis.call('PEXPIRE', h, ttl_ms)
      redis.call('PEXPIRE', z, ttl_ms)
    end
  end
  return d
end
