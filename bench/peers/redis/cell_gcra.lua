#!lua name=cell_gcra
-- bench/peers/redis/cell_gcra.lua — redis-cell's CL.THROTTLE as a Redis 7 function, the peer of
-- ratelimitd's resp_listen where redis-cell itself cannot be loaded (managed Redis, no modules):
--
--   FCALL cl_throttle 1 <key> <max_burst> <count per period> <period s> [<quantity>]
--
-- answers redis-cell's five integers (limited, limit, remaining, retry_after s, reset_after s),
-- by redis-cell's GCRA (redis-cell-impl rate_limit): emission interval = period / count, delay
-- variation tolerance = interval × (max_burst + 1), the key holds the theoretical arrival time
-- (TAT); a request of `quantity` passes when max(TAT, now) + interval × quantity − tolerance is
-- not after now, and then stores the new TAT with a TTL of how long it matters. Quantity 0
-- peeks. Times in integer microseconds (a Lua number holds them exactly, unlike nanoseconds);
-- seconds are rounded up as ratelimitd's CL.THROTTLE does, so both answer `0 16 15 -1 2` to
-- `user123 15 30 60 1` on a fresh key (bench/resp.sh checks that before measuring).
-- One GET, at most one SET, and TIME per call: what a Lua rate limiter on Redis costs.
local function seconds_up(us)
  return math.ceil(us / 1000000)
end

local function cl_throttle(keys, args)
  local max_burst, count, period = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
  local quantity = tonumber(args[4] or '1')
  if not (max_burst and count and period and quantity) or max_burst < 0 or count <= 0 or period <= 0 or quantity < 0 then
    return redis.error_reply('ERR invalid arguments')
  end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  local interval = period * 1000000 / count
  local limit = max_burst + 1
  local tolerance = interval * limit
  local increment = interval * quantity
  local stored = redis.call('GET', keys[1])
  local tat = now
  if stored then tat = math.max(tonumber(stored), now) end
  local new_tat = tat + increment
  local diff = now - (new_tat - tolerance)
  local limited, retry, ttl = 0, -1, 0
  if diff < 0 then
    limited = 1
    if increment <= tolerance then retry = seconds_up(-diff) end
    ttl = tat - now
  else
    ttl = new_tat - now
    if quantity > 0 then
      redis.call('SET', keys[1], string.format('%d', new_tat), 'PX', math.max(1, math.ceil(ttl / 1000)))
    end
  end
  local remaining = 0
  local left = tolerance - ttl
  if left > -interval then remaining = math.max(0, math.floor(left / interval)) end
  return {limited, limit, remaining, retry, seconds_up(ttl)}
end

redis.register_function('cl_throttle', cl_throttle)
