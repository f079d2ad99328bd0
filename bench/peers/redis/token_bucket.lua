-- bench/peers/redis/token_bucket.lua — the token bucket that Lua-based limiters typically run
-- (HMGET, refill from Redis TIME in milliseconds, HSET, PEXPIRE; answers 1 or 0), for
-- redis_raw.sh: the ceiling of one Redis for such a script, beside plain INCR.
-- KEYS[1] bucket; ARGV[1] capacity, ARGV[2] refill per second, ARGV[3] cost.
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'last')
local tokens = tonumber(state[1]) or capacity
local last = tonumber(state[2]) or now
if now > last then
  tokens = math.min(capacity, tokens + (now - last) * rate / 1000)
end
local allowed = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'last', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(capacity / rate * 1000) + 1000)
return allowed
