#!/usr/bin/env bash
# bench/distributed.sh — issue 19's benchmark: one hot key, two ratelimitd on one Redis, steady
# load; for each consistency mode (exact, lease, async) the Redis calls per decision (INFO
# commandstats: FCALL + EVALSHA calls) and the Redis CPU per decision (INFO cpu: used_cpu_user +
# used_cpu_sys), medians of RUNS runs, and the ratios lease/exact and async/exact
# (docs/BENCHMARKS.md, docs/distributed.md).
#
# Not a test: a benchmark. It starts its own redis-server (bench/peers/lib.sh: free loopback
# port, no persistence) pinned to SERVER_CPU, two ratelimitd (threads: 1) and two wrk (one per
# ratelimitd, -t1 -c CONNS, POST /v1/acquire of key k0) pinned to CLIENT_CPU, and stops what it
# started (by pid). The limit (10^9 per hour) is never reached: the load is steady admissions.
# Every line carries hypervisor steal on the two cpus (steal_s) over its window.
#
# usage: bench/distributed.sh
# env:   RUNS (3) DURATION (5s) CONNS (32) MODES ("exact lease async") CLIENT_CPU (0)
#        SERVER_CPU (1) RATELIMITD (build/bin/ratelimitd) OUT (also append JSON lines there)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/peers/lib.sh
: "${DURATION:=5s}"
: "${CONNS:=32}"
: "${MODES:=exact lease async}"
: "${RATELIMITD:=build/bin/ratelimitd}"
[ -x "$RATELIMITD" ] || die "$RATELIMITD not found: cmake --build --preset default --target ratelimitd"
command -v wrk > /dev/null || die "wrk not found (apt-get install wrk; scripts/deps.sh RATELIMIT_BENCH_PACKAGES)"

redis_start
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do stop_pid "$p"; done
  redis_stop
  rm -rf "$work"
}
trap cleanup EXIT
log "redis-server pid $REDIS_PID on 127.0.0.1:$REDIS_PORT (cpu $SERVER_CPU); ratelimitd and wrk on cpu $CLIENT_CPU; load $(cut -d' ' -f1-3 /proc/loadavg)"

steal_ticks() {
  awk -v a="cpu$CLIENT_CPU" -v b="cpu$SERVER_CPU" '$1 == a || $1 == b {n += $9} END {print n + 0}' /proc/stat
}
# Script calls Redis answered so far, and its CPU seconds (user + sys).
redis_calls() {
  redis-cli -p "$REDIS_PORT" INFO commandstats |
    awk -F'[:=,]' '/^cmdstat_(fcall|evalsha|fcall_ro):/ {n += $3} END {print n + 0}'
}
redis_cpu() {
  redis-cli -p "$REDIS_PORT" INFO cpu |
    awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.6f", s}'
}

policy_line() {
  case "$1" in
    exact) echo "  bench: { algorithm: fixed_window, limit: 1000000000, window: 1h }" ;;
    lease) echo "  bench: { algorithm: fixed_window, limit: 1000000000, window: 1h, consistency: lease, lease_max: 1000, lease_ttl: 1s }" ;;
    async) echo "  bench: { algorithm: fixed_window, limit: 1000000000, window: 1h, consistency: async, sync_interval: 100ms }" ;;
  esac
}

results="$work/results"
: > "$results"
for mode in $MODES; do
  for run in $(seq 1 "$RUNS"); do
    cfg="$work/$mode-$run.yaml"
    printf 'threads: 1\nstore: { type: redis, url: "redis://127.0.0.1:%s/0", key_prefix: "b:%s:%s:" }\npolicies:\n%s\n' \
      "$REDIS_PORT" "$mode" "$run" "$(policy_line "$mode")" > "$cfg"
    ports=()
    pids=()
    for i in 1 2; do
      port=$(free_port)
      taskset -c "$CLIENT_CPU" "$RATELIMITD" --config "$cfg" --listen "127.0.0.1:$port" > "$work/d$i.log" 2>&1 &
      pids+=($!)
      ports+=("$port")
      wait_port 127.0.0.1 "$port" 10 || { cat "$work/d$i.log" >&2; die "ratelimitd did not listen"; }
    done
    # Warm-up: connections, functions loaded, the first slices / views.
    for port in "${ports[@]}"; do
      WRK_MODE=acquire WRK_KEYS=1 WRK_POLICY=bench taskset -c "$CLIENT_CPU" \
        wrk -t1 -c"$CONNS" -d1s -s bench/peers/wrk/workload.lua "http://127.0.0.1:$port/v1/acquire" > /dev/null
    done
    c0=$(redis_calls); u0=$(redis_cpu); st0=$(steal_ticks)
    outs=()
    wrks=()
    for i in 0 1; do
      out="$work/wrk-$mode-$run-$i"
      outs+=("$out")
      WRK_MODE=acquire WRK_KEYS=1 WRK_POLICY=bench taskset -c "$CLIENT_CPU" \
        wrk -t1 -c"$CONNS" -d"$DURATION" --timeout 5s -s bench/peers/wrk/workload.lua \
        "http://127.0.0.1:${ports[$i]}/v1/acquire" > "$out" &
      wrks+=($!)
    done
    for w in "${wrks[@]}"; do wait "$w"; done
    c1=$(redis_calls); u1=$(redis_cpu); st1=$(steal_ticks)
    for p in "${pids[@]}"; do stop_pid "$p"; done
    pids=()
    python3 - "$mode" "$run" "$c0" "$c1" "$u0" "$u1" "$st0" "$st1" "$(getconf CLK_TCK)" "${outs[@]}" <<'PY' | tee -a "$results"
import json, sys
mode, run, c0, c1, u0, u1, st0, st1, hz = sys.argv[1:10]
reqs = non2xx = 0
secs = 0.0
for path in sys.argv[10:]:
    line = [l for l in open(path) if l.startswith("WRKJSON ")][0]
    d = json.loads(line[len("WRKJSON "):])
    reqs += d["requests"]; non2xx += d["non2xx"]; secs = max(secs, d["seconds"])
calls = int(c1) - int(c0)
cpu = float(u1) - float(u0)
print(json.dumps({"mode": mode, "run": int(run), "decisions": reqs, "non2xx": non2xx,
                  "decisions_per_s": round(reqs / secs), "redis_calls": calls,
                  "calls_per_decision": round(calls / reqs, 6),
                  "redis_cpu_s": round(cpu, 3), "redis_cpu_us_per_decision": round(cpu * 1e6 / reqs, 4),
                  "steal_s": round((int(st1) - int(st0)) / int(hz), 3)}), flush=True)
PY
  done
done
[ -n "${OUT:-}" ] && cat "$results" >> "$OUT"
python3 - "$results" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
med = {}
for mode in dict.fromkeys(r["mode"] for r in rows):
    rs = [r for r in rows if r["mode"] == mode]
    med[mode] = {k: statistics.median(r[k] for r in rs)
                 for k in ("decisions_per_s", "calls_per_decision", "redis_cpu_us_per_decision", "steal_s")}
print("| mode | decisions/s | Redis calls / decision | Redis CPU µs / decision | calls vs exact | CPU vs exact | steal s (max) |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for mode, m in med.items():
    ex = med.get("exact")
    rc = f'{m["calls_per_decision"] / ex["calls_per_decision"]:.4f}x' if ex and ex["calls_per_decision"] else "-"
    ru = f'{m["redis_cpu_us_per_decision"] / ex["redis_cpu_us_per_decision"]:.4f}x' if ex and ex["redis_cpu_us_per_decision"] else "-"
    steal = max(r["steal_s"] for r in rows if r["mode"] == mode)
    print(f'| {mode} | {m["decisions_per_s"]:.0f} | {m["calls_per_decision"]:.5f} | {m["redis_cpu_us_per_decision"]:.3f} | {rc} | {ru} | {steal} |')
PY
