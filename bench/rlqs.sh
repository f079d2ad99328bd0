#!/usr/bin/env bash
# bench/rlqs.sh — how many Envoy clients × buckets one core of ratelimitd serves on the Rate
# Limit Quota Service (RLQS) at Envoy's 1 s report interval: ONE ratelimitd (memory store, one
# worker thread) pinned to SERVER_CPU, `ratelimit-bench rlqs` (one thread, one HTTP/2
# connection per stream, as every Envoy keeps its own) pinned to CLIENT_CPU.
# Per round and shape (STREAMS × BUCKETS per report, SPACE distinct buckets):
#   rlqs.max.<shape>   every stream reports again as soon as it is answered: the ceiling, and the
#                      server's CPU per report message and per bucket report (µs)
#   rlqs.paced.<shape> every stream reports once a second, spread over the second (a fleet):
#                      the fraction of the core it costs and the answer's p50/p99
# The shapes span what the division costs: "shared" buckets (every stream reports the same
# BUCKETS buckets, so each bucket divides among STREAMS clients — a fleet sharing a few global
# limits) and "own" buckets (SPACE = STREAMS × BUCKETS: one client per bucket — per-user buckets).
# Each JSON line carries client_cpu, server_cpu (fractions of one core), steal_s and other_cpu
# (lib.sh measure()); stderr gets the medians: µs of server CPU per bucket report, and the
# client × bucket reports one core serves at 1 s (1 / that cost).
# usage: bench/rlqs.sh > results.jsonl   (scripts/quiet-run bench/rlqs.sh when the machine is shared)
# env: RUNS (3), CLIENT_CPU (0), SERVER_CPU (1), MEASURE_SECONDS (10), RATELIMITD, BENCH
#      (build/bin/...), SHAPES (as fast as answered: "100x1:shared 1000x1:shared 100x10:own
#      1000x10:own"; STREAMSxBUCKETS:shared|own), PACED_SHAPES (once a second: "1000x1:shared
#      5000x20:own" — 5,000 Envoys of 20 buckets each is 100,000 bucket reports a second)
# The generator is one thread: in the "max" runs it, not the server, is usually the ceiling
# (client_cpu near 1); the server's CPU per report is what those runs are for.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/bench/peers/lib.sh"
RATELIMITD=${RATELIMITD:-$ROOT/build/bin/ratelimitd}
BENCH=${BENCH:-$ROOT/build/bin/ratelimit-bench}
SECONDS_MEASURED=${MEASURE_SECONDS:-10}
SHAPES=${SHAPES:-"100x1:shared 1000x1:shared 100x10:own 1000x10:own"}
PACED_SHAPES=${PACED_SHAPES:-"1000x1:shared 5000x20:own"}
[ -x "$RATELIMITD" ] && [ -x "$BENCH" ] || die "build ratelimitd and ratelimit-bench first (cmake --build --preset default)"
HTTP_PORT=$(free_port)
GRPC_PORT=$(free_port)
TMP=$(mktemp -d)
SRV_PID=""
trap 'stop_pid "$SRV_PID"; rm -rf "$TMP"' EXIT
# Open files: a stream per connection, and the generator's side of each.
ulimit -n 65536 2> /dev/null || ulimit -n "$(ulimit -Hn)"
cat > "$TMP/rlqs.yaml" <<YAML
listen: 127.0.0.1:$HTTP_PORT
grpc_listen: 127.0.0.1:$GRPC_PORT
threads: 1
store: { type: memory }
rlqs:
  buckets:
    - match: {name: "*"}
      limit: 1000
      unit: second
  max_buckets: 1000000
YAML

start_server() {
  taskset -c "$SERVER_CPU" "$RATELIMITD" --config "$TMP/rlqs.yaml" > "$TMP/server.log" 2>&1 &
  SRV_PID=$!
  wait_port 127.0.0.1 "$GRPC_PORT" 10 || die "ratelimitd did not listen: $(tail -3 "$TMP/server.log")"
}

# run MODE SHAPE: one measured run on a fresh server (no buckets or clients left from the last).
run() {
  local mode=$1 shape=$2 streams buckets kind space interval
  streams=${shape%%x*}; buckets=${shape#*x}; buckets=${buckets%%:*}; kind=${shape##*:}
  space=$([ "$kind" = own ] && echo $((streams * buckets)) || echo "$buckets")
  interval=$([ "$mode" = max ] && echo 0 || echo 1)
  start_server
  SRV_PIDS=$SRV_PID measure "$TMP/out" "$BENCH" rlqs --target "127.0.0.1:$GRPC_PORT" --streams "$streams" \
    --buckets "$buckets" --bucket-space "$space" --interval "$interval" --seconds "$SECONDS_MEASURED" \
    --warmup 3 --json-peer ratelimitd --workload "rlqs.$mode.${streams}x$buckets.$kind" ||
    die "ratelimit-bench rlqs failed: $(cat "$TMP/out")"
  stop_pid "$SRV_PID"; SRV_PID=""
  grep '^{' "$TMP/out" | "$PY" -c '
import json, sys
d = json.loads(sys.stdin.read()); d["client_cpu"] = float(sys.argv[1]); d["server_cpu"] = float(sys.argv[2])
d["steal_s"] = float(sys.argv[3]); d["other_cpu"] = float(sys.argv[4])
d["server_us_per_bucket_report"] = round(d["server_cpu"] * 1e6 / max(1.0, d["bucket_reports_per_s"]), 3)
print(json.dumps(d), flush=True)' "$MEAS_CLIENT_CPU" "$MEAS_SERVER_CPU" "$MEAS_STEAL_S" "$MEAS_OTHER_CPU" |
    tee -a "$TMP/all.jsonl"
}

for ((round = 1; round <= RUNS; round++)); do
  for shape in $SHAPES; do
    log "round $round: $shape as fast as answered"
    run max "$shape"
  done
  for shape in $PACED_SHAPES; do
    log "round $round: $shape once a second"
    run paced "$shape"
  done
done

"$PY" - "$TMP/all.jsonl" <<'PY' >&2
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    by.setdefault(r["workload"], []).append(r)
print(f"{'workload':28} {'reports/s':>10} {'bucket rep/s':>12} {'server cpu':>10} {'us/bucket rep':>13} "
      f"{'client cpu':>10} {'p50 us':>8} {'p99 us':>8} {'steal s':>7}  (medians of {len(next(iter(by.values())))})")
for w, rs in by.items():
    m = lambda k: statistics.median(r[k] for r in rs)
    print(f"{w:28} {m('value'):10.0f} {m('bucket_reports_per_s'):12.0f} {m('server_cpu'):10.2f} "
          f"{m('server_us_per_bucket_report'):13.2f} {m('client_cpu'):10.2f} {m('p50_us'):8.0f} {m('p99_us'):8.0f} "
          f"{max(r['steal_s'] for r in rs):7.2f}")
    if w.startswith("rlqs.max."):
        print(f"{'':28} one core at 1 s: {1e6 / m('server_us_per_bucket_report'):,.0f} client x bucket reports")
PY
