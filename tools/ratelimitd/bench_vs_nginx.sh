#!/usr/bin/env bash
# bench_vs_nginx.sh — ratelimitd POST /v1/acquire (memory store) under wrk, beside nginx 1.22
# limit_req (bench/peers/nginx.sh) in the same session: each workload on a freshly started
# server, runs interleaved, server and wrk pinned to different cores, the same wrk client
# (bench/peers/wrk/workload.lua) for both.
# Results: one JSON line per run on stdout; summarise with bench/peers/summarize.py.
# usage: tools/ratelimitd/bench_vs_nginx.sh > results.jsonl
# env: RUNS (3), CLIENT_CPU (0), SERVER_CPU (1), WRK_THREADS (2), WRK_CONNS (100),
#      WRK_DURATION (10s), RATELIMITD (build/bin/ratelimitd), RL_THREADS (1: one I/O thread,
#      like nginx's one worker)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/bench/peers/lib.sh"
peers_install
RATELIMITD=${RATELIMITD:-$ROOT/build/bin/ratelimitd}
RL_THREADS=${RL_THREADS:-1}
PORT=$(free_port)
TMP=$(mktemp -d)
RL_PID=""
stop_rl() {
  stop_pid "$RL_PID"
  RL_PID=""
}
trap 'stop_rl; rm -rf "$TMP"' EXIT
cat > "$TMP/bench.yaml" <<YAML
listen: 127.0.0.1:$PORT
store: { type: memory, max_keys: 1000000 }
policies:
  # The peers' allow limit: never reached, so no request is denied (a token bucket of
  # capacity 1e9 refilled at 1e9 per 60 s).
  bench: { algorithm: token_bucket, rate: 16666667, burst: 1000000000 }
YAML

rl_run() { # workload keys
  taskset -c "$SERVER_CPU" "$RATELIMITD" --config "$TMP/bench.yaml" --threads "$RL_THREADS" 2>> "$TMP/rl.log" &
  RL_PID=$!
  wait_port 127.0.0.1 "$PORT" 10 || { cat "$TMP/rl.log" >&2; die "ratelimitd did not come up"; }
  log "ratelimitd-memory $1"
  SRV_PIDS=$RL_PID wrk_json ratelimitd-memory "$1" allow "http://127.0.0.1:$PORT/v1/acquire" \
    WRK_MODE=acquire WRK_KEYS="$2" WRK_POLICY=bench
  stop_rl
}

for ((r = 1; r <= RUNS; r++)); do
  log "round $r/$RUNS"
  rl_run http.allow.1key 1
  RUNS=1 PEERS_NO_INSTALL=1 "$ROOT/bench/peers/nginx.sh" http.allow.1key http.allow.100k
  rl_run http.allow.100k 100000
done
