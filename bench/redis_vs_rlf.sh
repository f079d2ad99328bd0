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
#        PEER_AUTOPIPE ("0")  the peer's ioredis enableAutoPipelining per peer run: "0", "1",
#                  or "0 1" for both (the second is reported as node-rlf-redis-autopipe)
#        CLIENTS   "node": also the Node client of clients/node (bench/clients/node_client.js,
#                  compiled into build/clients/node/dist by ctest client_node) in every round
#        SKIP_OURS 1 skips ratelimit-bench (only the clients and the peer)
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
[ "${SKIP_OURS:-0}" = 1 ] || [ -x "$BENCH" ] || die "$BENCH not found: cmake --build --preset default --target ratelimit-bench"
[ "$PEER" = 1 ] && peers_install

redis_start
trap redis_stop EXIT
results=$(mktemp)
trap 'redis_stop; rm -f "$results"' EXIT
url="redis://127.0.0.1:$REDIS_PORT/0"
log "redis-server $(redis-server --version | awk '{print $3}') pid $REDIS_PID on 127.0.0.1:$REDIS_PORT (cpu $SERVER_CPU); clients on cpu $CLIENT_CPU; load average $(cut -d' ' -f1-3 /proc/loadavg)"

# Hypervisor steal on the two pinned cpus (with_steal, bench/peers/lib.sh): every result line
# carries it (steal_s, warm-up included) and the table shows the largest per limiter.

IFS=';' read -r -a variants <<< "$VARIANTS"
status=0
for ((r = 1; r <= RUNS; r++)); do
  for keyset in $KEYSETS; do
    nkeys=1
    [ "$keyset" = keys ] && nkeys=100000
    for conc in $CONCS; do
      for v in "${variants[@]}"; do
        [ "${SKIP_OURS:-0}" = 1 ] && break
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
      if [[ " ${CLIENTS:-} " == *" node "* ]]; then
        redis-cli -p "$REDIS_PORT" FLUSHALL > /dev/null
        log "node-client $keyset c$conc, run $r/$RUNS"
        st=$(steal_ticks)
        line=$(REDIS_PORT=$REDIS_PORT CONC=$conc SERVER_PIDS=$REDIS_PID NKEYS=100000 \
          RATELIMIT_REDIS_LIBRARY=${RATELIMIT_REDIS_LIBRARY:-build/share/ratelimit/redis} \
          taskset -c "$CLIENT_CPU" node bench/clients/node_client.js "$keyset" | tail -1) || status=1
        with_steal "$st" <<< "$line" >> "$results" || { echo "$line" >> "$results"; status=1; }
      fi
      for ap in ${PEER_AUTOPIPE:-0}; do
        [ "$PEER" = 1 ] || break
        redis-cli -p "$REDIS_PORT" FLUSHALL > /dev/null
        log "node-rlf-redis (autopipelining $ap) $keyset c$conc, run $r/$RUNS"
        st=$(steal_ticks)
        line=$(REDIS_PORT=$REDIS_PORT CONC=$conc SERVER_PIDS=$REDIS_PID NKEYS=100000 PEER_AUTOPIPELINE=$ap \
          taskset -c "$CLIENT_CPU" node bench/peers/node/redis.js "$keyset" | tail -1) || status=1
        with_steal "$st" <<< "$line" >> "$results" || { echo "$line" >> "$results"; status=1; }
      done
    done
  done
done
[ -n "${OUT:-}" ] && cat "$results" >> "$OUT"
cat "$results"
echo
for ap in ${PEER_AUTOPIPE:-0}; do
  peer=node-rlf-redis
  [ "$ap" = 1 ] && peer=node-rlf-redis-autopipe
  echo; echo "ratios to $peer:"
  python3 bench/peers/pair_table.py "$results" "$peer"
done
exit $status
