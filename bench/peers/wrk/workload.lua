-- bench/peers/wrk/workload.lua — the wrk side of every HTTP workload (nginx limit_req and
-- ratelimitd get byte-for-byte the same client), chosen by environment variables:
--   WRK_MODE=static   wrk's pre-built request to the URL as given (default)
--   WRK_MODE=random   GET <WRK_PREFIX><i>, i uniform in 0 .. WRK_KEYS-1 (nginx /k/<i>)
--   WRK_MODE=acquire  POST /v1/acquire {"key":"k<i>","policy":WRK_POLICY}: with WRK_KEYS=1 a
--                     static request (built once, like nginx's /ip), else a random key per request
-- Each wrk thread seeds its own generator. done() prints one line "WRKJSON {...}" that
-- bench/peers/lib.sh (wrk_json) turns into a result line.
local mode = os.getenv("WRK_MODE") or "static"
local nkeys = tonumber(os.getenv("WRK_KEYS") or "100000")
local prefix = os.getenv("WRK_PREFIX") or "/k/"
local policy = os.getenv("WRK_POLICY") or "bench"

local threads = 0
function setup(thread)
  thread:set("tid", threads)
  threads = threads + 1
end

function init(args)
  math.randomseed(os.time() * 7919 + (tid or 0) * 104729)
end

local function acquire_body(i)
  return '{"key":"k' .. i .. '","policy":"' .. policy .. '"}'
end

if mode == "random" then
  request = function()
    return wrk.format("GET", prefix .. math.random(0, nkeys - 1))
  end
elseif mode == "acquire" then
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  if nkeys <= 1 then
    wrk.body = acquire_body(0)
  else
    request = function()
      return wrk.format(nil, "/v1/acquire", nil, acquire_body(math.random(0, nkeys - 1)))
    end
  end
elseif mode ~= "static" then
  error("WRK_MODE must be static, random or acquire, not " .. mode)
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
