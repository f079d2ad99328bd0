#!/usr/bin/env bash
# bench/peers/node_memory.sh — rate-limiter-flexible's RateLimiterMemory (node/memory.js) on
# inproc.hot, inproc.100k and inproc.mem1m, pinned to CLIENT_CPU, RUNS times each.
# usage: bench/peers/node_memory.sh [hot] [keys] [mem]      (default: all three)
# env: RUNS (3) CLIENT_CPU (0) WARMUP_S (1) MEASURE_S (3) NKEYS (100000) MEM_KEYS (1000000)
#      PEERS_NO_INSTALL=1
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[ "${PEERS_NO_INSTALL:-}" = 1 ] || peers_install
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(hot keys mem)
status=0
for ((r = 1; r <= RUNS; r++)); do
  for m in "${modes[@]}"; do
    case $m in
      hot | keys) flags=() ;;
      mem) flags=(--expose-gc) ;;
      *) die "unknown workload '$m' (hot, keys, mem)" ;;
    esac
    log "node-rlf-memory $m, run $r/$RUNS (cpu $CLIENT_CPU)"
    taskset -c "$CLIENT_CPU" node "${flags[@]}" "$PEERS_DIR/node/memory.js" "$m" || status=1
  done
done
exit $status
