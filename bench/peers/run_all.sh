#!/usr/bin/env bash
# bench/peers/run_all.sh — every peer of docs/BENCHMARKS.md in one session: installs them,
# runs each section RUNS times (servers on SERVER_CPU, clients on CLIENT_CPU), writes the JSON
# lines to OUT (default bench/peers/results-<UTC stamp>.jsonl, git-ignored) and prints the
# tables of summarize.py. Each section starts and stops its own servers (by pid).
# usage: bench/peers/run_all.sh
# env: ONLY="node_memory node_redis python nginx redis_raw" (sections, default all), RUNS (3),
#      CLIENT_CPU (0), SERVER_CPU (1), WARMUP_S (1), MEASURE_S (3), WRK_DURATION (10s), OUT
set -euo pipefail
source "$(dirname "$0")/lib.sh"
peers_install
read -r -a sections <<< "${ONLY:-node_memory node_redis python nginx redis_raw}"
OUT=${OUT:-$PEERS_DIR/results-$(date -u +%Y%m%dT%H%M%SZ).jsonl}
: > "$OUT"
export PEERS_NO_INSTALL=1
log "machine: $(nproc) cpus, load $(cut -d' ' -f1-3 /proc/loadavg); results: $OUT"
status=0
for s in "${sections[@]}"; do
  case $s in
    node_memory) "$PEERS_DIR/node_memory.sh" >> "$OUT" || status=1 ;;
    node_redis) "$PEERS_DIR/node_redis.sh" >> "$OUT" || status=1 ;;
    python) "$PEERS_DIR/python_limits.sh" >> "$OUT" || status=1 ;;
    nginx) "$PEERS_DIR/nginx.sh" >> "$OUT" || status=1 ;;
    redis_raw) "$PEERS_DIR/redis_raw.sh" >> "$OUT" || status=1 ;;
    *) die "unknown section '$s'" ;;
  esac
done
"$PY" "$PEERS_DIR/summarize.py" "$OUT"
exit $status
