#!/usr/bin/env bash
# bench/redis_vs_rlf.sh — RedisStore beside rate-limiter-flexible's RateLimiterRedis (ioredis),
# in the same run, on the same private redis-server: decisions/s, Redis CPU µs per decision,
# p50/p99, medians of RUNS runs and the ratios ours / peer (docs/benchmarks/redis.md).
#
# Not a test: a benchmark. It starts its own redis-server (bench/peers/lib.sh: free loopback
# port, no persistence) pinned to SERVER_CPU, runs every client pinned to CLIENT_CPU, FLUSHALLs
# before every measurement, and stops the server it started (by pid). The peer is installed from
# the pinned bench/peers/node/package-lock.json (npm ci, once).
#
# Workloads (bench/peers/README.md): a cost-1 acquire under an allow limit of 10^9 per 60 s
# (fixed window on both sides: rate-limiter-flexible's RateLimiterRedis is a fixed window), on
# 1 key (hot) and on 100,000 keys round-robin (keys), with CONC decisions in flight.
# Redis CPU per decision = utime + stime of the Redis pid (/proc/PID/stat) over the measured
# window / decisions completed in it.
#
# usage: bench/redis_vs_rlf.sh
# env:   RUNS (3) MEASURE_S (3) WARMUP_S (1) CLIENT_CPU (0) SERVER_CPU (1)
#        CONCS ("50 500")  KEYSETS ("hot keys")  ALGORITHM (fixed_window)
#        BENCH (build/bin/ratelimit-bench)
#        VARIANTS  our configurations, "name:flags;name:flags" where flags are extra
#                  `ratelimit-bench throughput` flags (default "ratelimit:" = default options)
#        PEER (1)  0 skips rate-limiter-flexible (then no ratios)
#        OUT       also append every JSON line to this file
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/peers/lib.sh
: "${CONCS:=50 500}"
: "${KEYSETS:=hot keys}"
: "${ALGORITHM:=fixed_window}"
: "${BENCH:=build/bin/ratelimit-bench}"
: "${VARIANTS:=ratelimit:}"
: "${PEER:=1}"
[ -x "$BENCH" ] || die "$BENCH not found: cmake --build --preset default --target ratelimit-bench"
[ "$PEER" = 1 ] && peers_install

redis_start
trap redis_stop EXIT
results=$(mktemp)
trap 'redis_stop; rm -f "$results"' EXIT
url="redis://127.0.0.1:$REDIS_PORT/0"
log "redis-server $(redis-server --version | awk '{print $3}') pid $REDIS_PID on 127.0.0.1:$REDIS_PORT (cpu $SERVER_CPU); clients on cpu $CLIENT_CPU; load average $(cut -d' ' -f1-3 /proc/loadavg)"

# Hypervisor steal on the two pinned cpus (/proc/stat, in clock ticks): on a VM it, more than
# other work, explains a slow run, so every result line carries it (steal_s, warm-up included)
# and the table shows the largest per limiter.
steal_ticks() {
  awk -v a="cpu$CLIENT_CPU" -v b="cpu$SERVER_CPU" '$1 == a || $1 == b {n += $9} END {print n + 0}' /proc/stat
}
hz=$(getconf CLK_TCK)
with_steal() {  # JSON line on stdin, steal ticks at the start as $1 -> the line with steal_s
  python3 -c '
import json, sys
line = sys.stdin.read().strip()
d = json.loads(line); d["steal_s"] = round((int(sys.argv[2]) - int(sys.argv[1])) / int(sys.argv[3]), 3)
print(json.dumps(d))' "$1" "$(steal_ticks)" "$hz"
}

IFS=';' read -r -a variants <<< "$VARIANTS"
status=0
for ((r = 1; r <= RUNS; r++)); do
  for keyset in $KEYSETS; do
    nkeys=1
    [ "$keyset" = keys ] && nkeys=100000
    for conc in $CONCS; do
      for v in "${variants[@]}"; do
        name=${v%%:*}
        read -r -a flags <<< "${v#*:}"
        redis-cli -p "$REDIS_PORT" FLUSHALL > /dev/null
        log "$name $keyset c$conc, run $r/$RUNS"
        st=$(steal_ticks)
        line=$(taskset -c "$CLIENT_CPU" "$BENCH" throughput --store "$url" \
                 --algorithm "$ALGORITHM" --keys "$nkeys" --inflight "$conc" \
                 --seconds "$MEASURE_S" --warmup "$WARMUP_S" --server-pid "$REDIS_PID" \
                 --json-peer "$name" "${flags[@]}" | tail -1) || status=1
        with_steal "$st" <<< "$line" >> "$results" || { echo "$line" >> "$results"; status=1; }
      done
      if [ "$PEER" = 1 ]; then
        redis-cli -p "$REDIS_PORT" FLUSHALL > /dev/null
        log "node-rlf-redis $keyset c$conc, run $r/$RUNS"
        st=$(steal_ticks)
        line=$(REDIS_PORT=$REDIS_PORT CONC=$conc SERVER_PIDS=$REDIS_PID NKEYS=100000 \
          taskset -c "$CLIENT_CPU" node bench/peers/node/redis.js "$keyset" | tail -1) || status=1
        with_steal "$st" <<< "$line" >> "$results" || { echo "$line" >> "$results"; status=1; }
      fi
    done
  done
done
[ -n "${OUT:-}" ] && cat "$results" >> "$OUT"
cat "$results"
echo
python3 - "$results" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith('{'):
        continue
    j = json.loads(line)
    if j.get('metric') != 'decisions_per_s':
        continue
    us = j['server_cpu'] * 1e6 / j['value'] if j.get('server_cpu') is not None and j['value'] else float('nan')
    rows.setdefault((j['workload'], j['peer']), []).append(
        (j['value'], us, j['p50_us'], j['p99_us'], j.get('denied', 0) + j.get('errors', 0),
         j.get('steal_s', float('nan'))))
med = lambda xs: statistics.median(xs)
print('| workload | limiter | decisions/s (median) | Redis CPU µs/decision | p50 / p99 µs | runs (decisions/s) | denied+errors | steal s (max of runs) |')
print('| --- | --- | --- | --- | --- | --- | --- | --- |')
summary = {}
for (w, p), v in sorted(rows.items()):
    d = med(x[0] for x in v); us = med(x[1] for x in v)
    p50 = med(x[2] for x in v); p99 = med(x[3] for x in v)
    summary[(w, p)] = (d, us, p99)
    runs = ', '.join(f'{x[0]:.0f}' for x in v)
    print(f'| {w} | {p} | {d:,.0f} | {us:.2f} | {p50:.0f} / {p99:.0f} | {runs} | {sum(x[4] for x in v)} | '
          f'{max(x[5] for x in v):.2f} |')
peer = 'node-rlf-redis'
ratios = [(w, p) for (w, p) in summary if p != peer and (w, peer) in summary]
if ratios:
    print()
    print('| workload | limiter | decisions/s ratio (ours / peer) | Redis CPU per decision ratio | p99 ratio |')
    print('| --- | --- | --- | --- | --- |')
    for w, p in sorted(ratios):
        o, q = summary[(w, p)], summary[(w, peer)]
        print(f'| {w} | {p} | {o[0] / q[0]:.2f} | {o[1] / q[1]:.2f} | {o[2] / q[2]:.2f} |')
PY
exit $status
