#!/usr/bin/env bash
# bench/clients/python_vs_limits.sh — the Python client (clients/python) beside Debian's
# python3-limits (fixed and moving window, RedisStorage) in the same run on the same private
# redis-server pinned to SERVER_CPU, every client pinned to CLIENT_CPU, FLUSHALL before each
# measurement: decisions/s at CONC in flight, Redis CPU µs per decision, p50/p99, medians of RUNS
# and the ratios to each limits strategy (bench/peers/pair_table.py), hypervisor steal per run
# (steal_s). Not a test: a benchmark.
# usage: bench/clients/python_vs_limits.sh
# env:   RUNS (3) MEASURE_S (3) WARMUP_S (1) CLIENT_CPU (0) SERVER_CPU (1) CONC (50)
#        KEYSETS ("hot keys") NKEYS (10000) LIMITERS ("ours-async ours-threads limits-fixed limits-moving")
#        MAX_IN_FLIGHT (ours; unset = the limiter's default)
#        HIREDIS (1)  0: redis-py parses replies in Python for every limiter (as without
#                  python3-hiredis); 1: with hiredis, which redis-py picks up when installed
#        OUT (also append every JSON line here)
set -euo pipefail
cd "$(dirname "$0")/../.."
source bench/peers/lib.sh
: "${KEYSETS:=hot keys}"
: "${LIMITERS:=ours-async ours-threads limits-fixed limits-moving}"
export CONC=${CONC:-50} NKEYS=${NKEYS:-10000} PYTHONPATH=$PWD/clients/python
export RATELIMIT_REDIS_LIBRARY=${RATELIMIT_REDIS_LIBRARY:-$PWD/build/share/ratelimit/redis}
source scripts/deps.sh
ratelimit_install_deps python3-limits python3-redis python3-hiredis
redis_start
results=$(mktemp)
trap 'redis_stop; rm -f "$results"' EXIT
export REDIS_URL=redis://127.0.0.1:$REDIS_PORT/0
log "redis-server pid $REDIS_PID on 127.0.0.1:$REDIS_PORT (cpu $SERVER_CPU); clients on cpu $CLIENT_CPU; load average $(cut -d' ' -f1-3 /proc/loadavg)"
status=0
for ((r = 1; r <= RUNS; r++)); do
  for keyset in $KEYSETS; do
    for l in $LIMITERS; do
      redis-cli -p "$REDIS_PORT" FLUSHALL > /dev/null
      log "$l $keyset c$CONC, run $r/$RUNS"
      st=$(steal_ticks)
      line=$(SERVER_PIDS=$REDIS_PID taskset -c "$CLIENT_CPU" /usr/bin/python3 bench/clients/python_client.py \
        "$l" "$keyset" | tail -1) || status=1
      with_steal "$st" <<< "$line" >> "$results" || { echo "$line" >> "$results"; status=1; }
    done
  done
done
[ -n "${OUT:-}" ] && cat "$results" >> "$OUT"
cat "$results"
for peer in py-limits-fixed py-limits-moving; do
  echo
  echo "ratios to $peer:"
  python3 bench/peers/pair_table.py "$results" "$peer"
done
exit $status
