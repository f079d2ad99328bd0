-- examples/haproxy/ratelimit.lua — forward-auth for HAProxy (2.5+, Lua with core.httpclient):
-- `http-request lua.ratelimit POLICY` asks ratelimitd's /v1/forward-auth about each request and
-- leaves the answer in variables that haproxy.cfg turns into the client's 429 (or the
-- RateLimit headers on a 200). Why Lua: HAProxy has no native forward-auth / subrequest.
-- The client is named by its source address (X-Forwarded-For is set from `src`, whatever the
-- client sent), so ratelimitd must trust this HAProxy's address (trusted_proxies).
-- If ratelimitd cannot be asked, txn.rl_error is set and nothing else: haproxy.cfg decides.
local url = os.getenv("RATELIMITD_URL") or "http://127.0.0.1:8080"

local function first(headers, name)
  local v = headers[name]
  if v == nil then return nil end
  return v[0] or v[1]
end

core.register_action("ratelimit", { "http-req" }, function(txn, policy)
  local res = core.httpclient():get({
    url = url .. "/v1/forward-auth?policy=" .. policy,
    headers = { ["x-forwarded-for"] = { txn.sf:src() } },
    timeout = 1000,
  })
  if res == nil or res.status == nil or res.status == 0 then
    txn:set_var("txn.rl_error", true)
    return
  end
  local h = res.headers or {}
  txn:set_var("txn.rl", first(h, "ratelimit") or "")
  txn:set_var("txn.rl_policy", first(h, "ratelimit-policy") or "")
  if res.status == 429 then
    txn:set_var("txn.rl_denied", true)
    txn:set_var("txn.rl_retry_after", first(h, "retry-after") or "1")
  elseif res.status ~= 200 then
    txn:set_var("txn.rl_error", true)
  end
end, 1)
