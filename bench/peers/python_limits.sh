#!/usr/bin/env bash
# bench/peers/python_limits.sh — Debian's python3-limits: MemoryStorage and RedisStorage with
# the fixed-window and moving-window strategies, on the workloads of python/limits_peer.py.
#
# usage: bench/peers/python_limits.sh [memory] [redis]      (default: both)
# env: REDIS_PORT (a Redis you started, used as it is) or none (a private one, flushed before
#      every run, stopped at the end); RUNS (3) CLIENT_CPU (0) SERVER_CPU (1) WARMUP_S MEASURE_S
#      STRATEGIES ("fixed moving") WORKLOADS ("hot keys exact exact-stress") PEERS_NO_INSTALL=1
# Output: one JSON line per run on stdout. Redis runs also measure remote.c1.*.samecore (the
# client on the server's core: on this VM a cross-core wake-up costs far more than the work).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[ "${PEERS_NO_INSTALL:-}" = 1 ] || peers_install
storages=("$@")
[ ${#storages[@]} -gt 0 ] || storages=(memory redis)
read -r -a strategies <<< "${STRATEGIES:-fixed moving}"
read -r -a workloads <<< "${WORKLOADS:-hot keys exact exact-stress}"

own_redis=0
for s in "${storages[@]}"; do
  case $s in memory) ;; redis)
    if [ -z "${REDIS_PORT:-}" ]; then redis_start; own_redis=1; trap redis_stop EXIT; fi ;;
    *) die "unknown storage '$s' (memory, redis)" ;; esac
done
export REDIS_URL=redis://127.0.0.1:${REDIS_PORT:-0}/0

status=0
peer() { # cpu storage strategy workload [env...]
  local cpu=$1 storage=$2; shift 2
  [ "$storage" = redis ] && [ "$own_redis" = 1 ] && redis-cli -p "$REDIS_PORT" FLUSHALL > /dev/null
  local pids=""
  [ "$storage" = redis ] && pids=${REDIS_PID:-}
  SERVER_PIDS=$pids taskset -c "$cpu" "$PY" "$PEERS_DIR/python/limits_peer.py" "$storage" "$@" || status=1
}
for ((r = 1; r <= RUNS; r++)); do
  for storage in "${storages[@]}"; do
    for strategy in "${strategies[@]}"; do
      for wl in "${workloads[@]}"; do
        log "py-limits-$storage-$strategy $wl, run $r/$RUNS"
        peer "$CLIENT_CPU" "$storage" "$strategy" "$wl"
        if [ "$storage" = redis ] && { [ "$wl" = hot ] || [ "$wl" = keys ]; }; then
          WORKLOAD_SUFFIX=.samecore peer "$SERVER_CPU" "$storage" "$strategy" "$wl"
        fi
      done
    done
  done
done
exit $status
