#!/usr/bin/env bash
# bench/peers/node_redis.sh — rate-limiter-flexible's RateLimiterRedis (ioredis, one connection)
# on the workloads remote.c<CONC>.hot, remote.c<CONC>.100k and exact.10of200 (README.md here).
#
# usage: [REDIS_PORT=P] bench/peers/node_redis.sh [hot] [keys] [exact]     (default: all three)
# env:   REDIS_PORT   a Redis already listening on 127.0.0.1:P, which is used as it is (the
#                     script does not flush it: every run has its own key prefix); without it a
#                     private redis-server is started on a free port pinned to SERVER_CPU,
#                     FLUSHALLed before every run, and stopped at the end
#        REDIS_PID    the pid of that Redis, to report its CPU use as server_cpu (optional)
#        CONC (50) RUNS (3) CLIENT_CPU (0) SERVER_CPU (1) WARMUP_S (1) MEASURE_S (3) NKEYS (100000)
#        PEERS_NO_INSTALL=1 skips the package check (apt, npm ci)
# Output: one JSON line per run on stdout: decisions_per_s with p50_us / p99_us, or allowed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[ "${PEERS_NO_INSTALL:-}" = 1 ] || peers_install
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(hot keys exact)
for m in "${modes[@]}"; do
  case $m in hot | keys | exact) ;; *) die "unknown workload '$m' (hot, keys, exact)" ;; esac
done

own_redis=0
if [ -z "${REDIS_PORT:-}" ]; then
  redis_start
  own_redis=1
  trap redis_stop EXIT
  log "private redis-server pid $REDIS_PID on 127.0.0.1:$REDIS_PORT (cpu $SERVER_CPU)"
fi
redis-cli -p "$REDIS_PORT" ping > /dev/null 2>&1 || die "no Redis answers on 127.0.0.1:$REDIS_PORT"
export REDIS_PORT CONC="${CONC:-50}" NKEYS="${NKEYS:-100000}"
export SERVER_PIDS=${REDIS_PID:-}

status=0
for ((r = 1; r <= RUNS; r++)); do
  for m in "${modes[@]}"; do
    [ "$own_redis" = 1 ] && redis-cli -p "$REDIS_PORT" FLUSHALL > /dev/null
    log "node-rlf-redis $m, run $r/$RUNS (client cpu $CLIENT_CPU)"
    taskset -c "$CLIENT_CPU" node "$PEERS_DIR/node/redis.js" "$m" || status=1
  done
done
exit $status
