#!/usr/bin/env bash
# bench_vs_nginx.sh — ratelimitd POST /v1/acquire (memory store) under wrk, beside nginx 1.22
# limit_req measured in the same session by the peer harness (../shared/peers), each workload
# run on a freshly started server, runs interleaved, server and wrk pinned to different cores.
# Results: one JSON line per run on stdout (the harness's format); summarise with
#   python3 $HARNESS_DIR/summarize.py results.jsonl
# usage: HARNESS_DIR=/tmp/peers tools/ratelimitd/bench_vs_nginx.sh > results.jsonl
# env: RUNS (3), CLIENT_CPU (0), SERVER_CPU (1), WRK_* (harness defaults: -t2 -c100 -d10s),
#      RATELIMITD (build/bin/ratelimitd), RL_THREADS (1: one I/O thread, like nginx's one worker)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
: "${HARNESS_DIR:?copy ../shared/peers somewhere writable and point HARNESS_DIR at it}"
# shellcheck source=/dev/null
source "$HARNESS_DIR/lib.sh"
RATELIMITD=${RATELIMITD:-$ROOT/build/bin/ratelimitd}
RL_THREADS=${RL_THREADS:-1}
PORT=18088
TMP=$(mktemp -d)
RL_PID=""
stop_rl() {
  if [ -n "$RL_PID" ] && kill -0 "$RL_PID" 2>/dev/null; then kill -TERM "$RL_PID"; wait "$RL_PID" 2>/dev/null || true; fi
  RL_PID=""
}
trap 'stop_rl; rm -rf "$TMP"' EXIT
cat > "$TMP/bench.yaml" <<YAML
listen: 127.0.0.1:$PORT
store: { type: memory, max_keys: 1000000 }
policies:
  # The harness's allow limit: never reached, so no request is denied (a token bucket of
  # capacity 1e9 refilled at 1e9 per 60 s).
  bench: { algorithm: token_bucket, rate: 16666667, burst: 1000000000 }
YAML

start_rl() {
  if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then log "port $PORT in use"; exit 1; fi
  taskset -c "$SERVER_CPU" "$RATELIMITD" --config "$TMP/bench.yaml" --threads "$RL_THREADS" 2>>"$TMP/rl.log" &
  RL_PID=$!
  wait_port 127.0.0.1 "$PORT" 10 || { log "ratelimitd did not come up"; cat "$TMP/rl.log" >&2; exit 1; }
}

rl_run() { # workload keys target
  local wl=$1 keys=$2
  start_rl
  SRV_PIDS=$RL_PID KEYS=$keys measure_cmd "$TMP/out" wrk -t"$WRK_THREADS" -c"$WRK_CONNS" -d"$WRK_DURATION" \
    --timeout 5s -s "$HERE/wrk_acquire_report.lua" "http://127.0.0.1:$PORT/v1/acquire"
  local json; json=$(sed -n 's/^WRKJSON //p' "$TMP/out")
  stop_rl
  "$PY" - "$wl" "$MEAS_CLIENT_CPU" "$MEAS_SERVER_CPU" "$json" <<'PY'
import json, sys
wl, ccpu, scpu, js = sys.argv[1:]
d = json.loads(js)
out = {"peer": "ratelimitd-memory", "workload": wl, "metric": "requests_per_s", "value": d["rps"], "unit": "req/s"}
out.update({k: d[k] for k in ("requests", "seconds", "rps", "non2xx", "ok_per_s", "p50_us", "p99_us", "max_us")})
out["socket_errors"] = d["err_connect"] + d["err_read"] + d["err_write"] + d["err_timeout"]
out["client_cpu"] = float(ccpu)
out["server_cpu"] = float(scpu)
print(json.dumps(out), flush=True)
PY
}

for ((r = 1; r <= RUNS; r++)); do
  log "round $r/$RUNS"
  rl_run http.allow.1key 1
  RUNS=1 HTTP_WORKLOADS="http.allow.1key http.allow.100k" "$HARNESS_DIR/nginx_bench.sh"
  rl_run http.allow.100k 100000
done
