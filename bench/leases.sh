#!/usr/bin/env bash
# bench/leases.sh — concurrency leases beside the rate path, in the same run: acquire + release
# pairs/s of a `concurrency` policy and acquires/s of a `fixed_window` policy, on the memory
# store and on a private redis-server, with the Redis CPU per pair / per decision; medians of
# RUNS runs (docs/BENCHMARKS.md, "Leases").
#
# Not a test: a benchmark. It starts its own redis-server (bench/peers/lib.sh: free loopback
# port, no persistence) pinned to SERVER_CPU, runs ratelimit-bench pinned to CLIENT_CPU,
# FLUSHALLs before every Redis measurement and stops the server it started (by pid). Every result
# line carries the hypervisor steal of the two cpus over the measurement (steal_s).
# A pair is two store calls (the acquire, then the release of its lease once answered), so its
# latency is both; the rate path is one call per decision. Keys: 100,000 round robin.
#
# usage: bench/leases.sh            (wrap it in /work/helpers/quiet-run or flock -x on a shared host)
# env:   RUNS (3) MEASURE_S (3) WARMUP_S (1) CLIENT_CPU (0) SERVER_CPU (1)
#        INFLIGHT (200: Redis calls in flight)  THREADS (1: memory store callers)
#        BENCH (build/bin/ratelimit-bench)  OUT (also append every JSON line to this file)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/peers/lib.sh
: "${BENCH:=build/bin/ratelimit-bench}"
: "${INFLIGHT:=200}"
: "${THREADS:=1}"
[ -x "$BENCH" ] || die "$BENCH not found: cmake --build --preset default --target ratelimit-bench"

redis_start
results=$(mktemp)
trap 'redis_stop; rm -f "$results"' EXIT
url="redis://127.0.0.1:$REDIS_PORT/0"
log "redis-server $(redis-server --version | awk '{print $3}') pid $REDIS_PID (cpu $SERVER_CPU); bench on cpu $CLIENT_CPU; load average $(cut -d' ' -f1-3 /proc/loadavg)"
hz=$(getconf CLK_TCK)

# One measurement: $1 = label, the rest = ratelimit-bench throughput flags. Appends a JSON line.
one_run() {
  local label=$1
  shift
  local st line
  st=$(steal_ticks)
  line=$(taskset -c "$CLIENT_CPU" "$BENCH" throughput --keys 100000 --seconds "$MEASURE_S" --warmup "$WARMUP_S" \
           --json-peer "$label" "$@" | tail -1)
  python3 -c '
import json, sys
d = json.loads(sys.argv[1]); d["steal_s"] = round((int(sys.argv[3]) - int(sys.argv[2])) / int(sys.argv[4]), 3)
print(json.dumps(d))' "$line" "$st" "$(steal_ticks)" "$hz" >> "$results"
}

for ((r = 1; r <= RUNS; r++)); do
  for algo in fixed_window concurrency; do
    log "memory $algo, run $r/$RUNS"
    one_run "memory-$algo" --store memory --algorithm "$algo" --threads "$THREADS"
    redis-cli -p "$REDIS_PORT" FLUSHALL > /dev/null
    log "redis $algo, run $r/$RUNS"
    one_run "redis-$algo" --store "$url" --algorithm "$algo" --inflight "$INFLIGHT" --server-pid "$REDIS_PID"
  done
done
[ -n "${OUT:-}" ] && cat "$results" >> "$OUT"
cat "$results"
echo
# Medians per label: work units/s (pairs for concurrency), p50/p99 (µs, whole), Redis CPU µs per
# unit (its utime + stime over the window / units), and the largest steal of its runs.
python3 - "$results" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if line:
        d = json.loads(line)
        rows.setdefault(d["peer"], []).append(d)
print(f"{'what':<34} {'units/s':>10} {'p50 us':>7} {'p99 us':>7} {'redis cpu us/unit':>18} {'max steal s':>11}")
for name, rs in rows.items():
    med = lambda f: statistics.median(f(r) for r in rs)
    cpu = med(lambda r: r["server_cpu"] * 1e6 / r["value"]) if all("server_cpu" in r for r in rs) else None
    unit = "pairs" if name.endswith("concurrency") else "decisions"
    print(f"{name + ' (' + unit + ', n=' + str(len(rs)) + ')':<34} {med(lambda r: r['value']):>10.0f} "
          f"{med(lambda r: r['p50_us']):>7.0f} {med(lambda r: r['p99_us']):>7.0f} "
          f"{(f'{cpu:.2f}' if cpu is not None else '-'):>18} {max(r.get('steal_s', 0) for r in rs):>11.3f}")
PY
