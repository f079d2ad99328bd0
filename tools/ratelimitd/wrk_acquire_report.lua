-- wrk script for ratelimitd: POST /v1/acquire, plus the JSON summary line the peer harness
-- (../shared/peers, nginx/wrk_report.lua) prints, so both sides are reported identically.
-- KEYS=1: a static request (wrk builds it once, like nginx's /ip workload);
-- KEYS=N: a random key in k0 .. k(N-1) per request (a Lua request() hook, like nginx's /k/<i>).
local n = tonumber(os.getenv("KEYS") or "1")
local policy = os.getenv("POLICY") or "bench"
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
if n <= 1 then
  wrk.body = '{"key":"k0","policy":"' .. policy .. '"}'
else
  request = function()
    return wrk.format(nil, "/v1/acquire", nil,
                      '{"key":"k' .. math.random(0, n - 1) .. '","policy":"' .. policy .. '"}')
  end
end

done = function(summary, latency, requests)
  local s = summary.duration / 1e6
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"seconds":%.6f,"rps":%.3f,"non2xx":%d,"non2xx_per_s":%.3f,' ..
    '"ok_per_s":%.3f,"p50_us":%d,"p99_us":%d,"max_us":%d,"err_connect":%d,"err_read":%d,' ..
    '"err_write":%d,"err_timeout":%d}\n',
    summary.requests, s, summary.requests / s, e.status, e.status / s,
    (summary.requests - e.status) / s, latency:percentile(50), latency:percentile(99),
    latency.max, e.connect, e.read, e.write, e.timeout))
end
