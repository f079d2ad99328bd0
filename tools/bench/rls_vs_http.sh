#!/usr/bin/env bash
# rls_vs_http.sh — Envoy's ShouldRateLimit over gRPC (ratelimit-bench rls) beside POST
# /v1/acquire over HTTP/1.1 (wrk with bench/peers/wrk/workload.lua), on ONE ratelimitd (memory
# store, one I/O thread, one gRPC completion queue) pinned to SERVER_CPU, the load generators
# pinned to CLIENT_CPU; each round runs both against the same process, one after the other, on
# one hot key that never denies (HTTP: fixed_window 1e9/s; gRPC: a descriptor rule of 1e9 per
# second — the same fixed-window decision on the memory store).
# Results: one JSON line per run on stdout (workloads rls.grpc.c<N>, rls.http.c<N>); summarise
# with bench/peers/summarize.py.
# usage: tools/bench/rls_vs_http.sh > results.jsonl
# env: RUNS (3), CLIENT_CPU (0), SERVER_CPU (1), INFLIGHT (100: gRPC calls in flight = wrk
#      connections), MEASURE_SECONDS (10), RATELIMITD, BENCH (build/bin/...)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/bench/peers/lib.sh"
source "$ROOT/scripts/deps.sh"
ratelimit_install_deps wrk
RATELIMITD=${RATELIMITD:-$ROOT/build/bin/ratelimitd}
BENCH=${BENCH:-$ROOT/build/bin/ratelimit-bench}
INFLIGHT=${INFLIGHT:-100}
SECONDS_MEASURED=${MEASURE_SECONDS:-10}
HTTP_PORT=$(free_port)
GRPC_PORT=$(free_port)
TMP=$(mktemp -d)
RL_PID=""
stop_rl() {
  if [ -n "$RL_PID" ]; then kill -TERM "$RL_PID" 2> /dev/null || true; wait "$RL_PID" 2> /dev/null || true; fi
  RL_PID=""
}
trap 'stop_rl; rm -rf "$TMP"' EXIT
cat > "$TMP/bench.yaml" <<YAML
listen: 127.0.0.1:$HTTP_PORT
grpc_listen: 127.0.0.1:$GRPC_PORT
threads: 1
store: { type: memory, max_keys: 1000000 }
policies:
  bench: { algorithm: fixed_window, limit: 1000000000, window: 1s }
domains:
  - domain: bench
    descriptors:
      - key: user
        rate_limit: { unit: second, requests_per_unit: 1000000000 }
YAML

for ((r = 1; r <= RUNS; r++)); do
  log "round $r/$RUNS"
  taskset -c "$SERVER_CPU" "$RATELIMITD" --config "$TMP/bench.yaml" 2>> "$TMP/rl.log" &
  RL_PID=$!
  wait_port 127.0.0.1 "$HTTP_PORT" 10 || { cat "$TMP/rl.log" >&2; die "ratelimitd did not come up"; }
  wait_port 127.0.0.1 "$GRPC_PORT" 10 || { cat "$TMP/rl.log" >&2; die "no gRPC listener"; }
  log "grpc ShouldRateLimit, $INFLIGHT in flight"
  SRV_PIDS=$RL_PID measure "$TMP/grpc.out" "$BENCH" rls --target "127.0.0.1:$GRPC_PORT" \
    --domain bench --key user --inflight "$INFLIGHT" --warmup 2 --seconds "$SECONDS_MEASURED" \
    --json-peer ratelimitd-grpc --workload "rls.grpc.c$INFLIGHT"
  grep '^{' "$TMP/grpc.out" | "$PY" -c '
import json, sys
d = json.loads(sys.stdin.read()); d["client_cpu"] = float(sys.argv[1]); d["server_cpu"] = float(sys.argv[2])
print(json.dumps(d), flush=True)' "$MEAS_CLIENT_CPU" "$MEAS_SERVER_CPU"
  log "http POST /v1/acquire, $INFLIGHT connections"
  SRV_PIDS=$RL_PID WRK_CONNS=$INFLIGHT WRK_DURATION=${SECONDS_MEASURED}s \
    wrk_json ratelimitd-http "rls.http.c$INFLIGHT" allow "http://127.0.0.1:$HTTP_PORT/v1/acquire" \
    WRK_MODE=acquire WRK_KEYS=1 WRK_POLICY=bench
  stop_rl
done
