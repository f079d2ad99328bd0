#!/usr/bin/env bash
# bench/peers/redis_raw.sh — the ceiling of one Redis for rate limiters: redis-benchmark
# (50 clients, 200,000 requests, random keys of 100,000) running INCR and EVALSHA of
# redis/token_bucket.lua (capacity 10^9, refill 10^9 per 60 s), pipeline 1 and 16.
# usage: bench/peers/redis_raw.sh
# env: REDIS_PORT (+ REDIS_PID) for a Redis you started, else a private one pinned to
#      SERVER_CPU; RUNS (3) CLIENT_CPU (0) RB_CLIENTS (50) RB_REQUESTS (200000) PEERS_NO_INSTALL=1
# Output: one JSON line per run (commands_per_s, p50_us, p99_us, client/server CPU).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[ "${PEERS_NO_INSTALL:-}" = 1 ] || peers_install
: "${RB_CLIENTS:=50}" "${RB_REQUESTS:=200000}"
own_redis=0
if [ -z "${REDIS_PORT:-}" ]; then redis_start; own_redis=1; trap redis_stop EXIT; fi
cli=(redis-cli -h 127.0.0.1 -p "$REDIS_PORT")
sha=$("${cli[@]}" SCRIPT LOAD "$(cat "$PEERS_DIR/redis/token_bucket.lua")")
version=$("${cli[@]}" INFO server | sed -n 's/^redis_version:\([^\r]*\).*/\1/p')
out=$(mktemp)
trap 'rm -f "$out"; [ "$own_redis" = 1 ] && redis_stop' EXIT
declare -A command=(
  [incr]="INCR rl:__rand_int__"
  [evalsha_tb]="EVALSHA $sha 1 tb:__rand_int__ 1000000000 16666667 1"
)
for name in incr evalsha_tb; do
  for pipeline in 1 16; do
    for ((r = 1; r <= RUNS; r++)); do
      [ "$own_redis" = 1 ] && "${cli[@]}" FLUSHALL > /dev/null
      log "redis-benchmark $name -P $pipeline, run $r/$RUNS"
      # shellcheck disable=SC2086
      SRV_PIDS=${REDIS_PID:-} measure "$out" redis-benchmark -h 127.0.0.1 -p "$REDIS_PORT" \
        -c "$RB_CLIENTS" -n "$RB_REQUESTS" -P "$pipeline" -r 100000 --csv ${command[$name]}
      "$PY" - "redis-$version-raw" "redis.$name.P$pipeline" "$out" "$MEAS_CLIENT_CPU" \
        "$MEAS_SERVER_CPU" "${REDIS_PID:-}" <<'PY'
import csv, json, sys
peer, workload, path, client_cpu, server_cpu, server_pid = sys.argv[1:]
rows = list(csv.reader(open(path)))
d = dict(zip(rows[0], rows[-1]))
out = {"peer": peer, "workload": workload, "metric": "commands_per_s", "value": float(d["rps"]),
       "unit": "cmd/s", "p50_us": float(d["p50_latency_ms"]) * 1000,
       "p99_us": float(d["p99_latency_ms"]) * 1000, "client_cpu": float(client_cpu)}
if server_pid:
    out["server_cpu"] = float(server_cpu)
print(json.dumps(out), flush=True)
PY
    done
  done
done
