-- acquire_all.lua — several limits on one key, all or nothing: mirrors algo::decide_all in
-- src/core/decide.cc (every limit is peeked; only if all admit is each one acquired). Appended
-- after common.lua and the five algorithm files by the build.
--
-- KEYS: two per limit, in order: its state key and its log key (used by the sliding log only;
--       always passed so every key the script may touch is in KEYS). All share one hash tag.
-- ARGV: now ('-' = server TIME), cost, op (0 acquire, 1 peek), then six per limit:
--       algorithm (0 fixed_window, 1 sliding_window_log, 2 sliding_window_counter,
--       3 token_bucket, 4 leaky_bucket), limit, window_us, rate, shape, count_denied.
-- Returns: six integers per limit, in order (see single.lua).
local algorithms = {[0] = fixed_window, [1] = sliding_window_log, [2] = sliding_window_counter,
                    [3] = token_bucket, [4] = leaky_bucket}
local now_us, test_mode = read_now(ARGV[1])
local cost = tonumber(ARGV[2])
local op = tonumber(ARGV[3])
local limits = {}
for i = 1, (#ARGV - 3) / 6 do
  local base = 3 + (i - 1) * 6
  local algorithm = algorithms[tonumber(ARGV[base + 1])]
  local keys = {KEYS[2 * i - 1], KEYS[2 * i]}
  limits[i] = {algorithm = algorithm, policy = read_policy(ARGV, base + 2), keys = keys,
               state = algorithm.load(keys)}
end

local decisions = {}
local all = true
for i, l in ipairs(limits) do
  decisions[i] = l.algorithm.decide(l.policy, l.state, now_us, cost, kPeek)
  all = all and decisions[i].allowed
end
if all and op == kAcquire then
  for i, l in ipairs(limits) do
    decisions[i] = l.algorithm.decide(l.policy, l.state, now_us, cost, kAcquire)
  end
end

local out = {}
for i, l in ipairs(limits) do
  persist(l.algorithm, l.policy, l.keys, l.state, now_us, test_mode)
  push_decision(out, decisions[i])
end
return out
