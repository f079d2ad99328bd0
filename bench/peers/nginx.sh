#!/usr/bin/env bash
# bench/peers/nginx.sh — nginx 1.22 limit_req (Debian's nginx) under wrk: a private nginx
# (nginx/nginx.conf.in, one worker) on a free loopback port pinned to SERVER_CPU, started
# fresh before every run of every workload (fresh limiter state) and stopped by its master pid.
#
# usage: bench/peers/nginx.sh [WORKLOAD...]
#   workloads: http.nolimit http.allow.1key http.allow.100k http.deny.1key (default: all four)
# env: RUNS (3) CLIENT_CPU (0) SERVER_CPU (1) WRK_THREADS (2) WRK_CONNS (100) WRK_DURATION (10s)
#      PEERS_NO_INSTALL=1 skips the package check
# Output: one JSON line per run on stdout (bench/peers/README.md).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
[ "${PEERS_NO_INSTALL:-}" = 1 ] || peers_install
workloads=("$@")
[ ${#workloads[@]} -gt 0 ] || workloads=(http.nolimit http.allow.1key http.allow.100k http.deny.1key)
for wl in "${workloads[@]}"; do
  case $wl in http.nolimit | http.allow.1key | http.allow.100k | http.deny.1key) ;;
    *) die "unknown workload '$wl'" ;; esac
done

RUN=$(mktemp -d)
trap 'nginx_stop; rm -rf "$RUN"' EXIT
nginx_setup "$RUN"
PORT=$NGX_PORT

# Sanity, once: the allow locations admit, /deny denies (the limiter really is in the path).
nginx_start
base=http://127.0.0.1:$PORT
# One curl process (one connection): the three /deny requests come within 100 ms.
codes=$(curl -s -w '%{http_code} ' -o /dev/null -o /dev/null -o /dev/null -o /dev/null -o /dev/null \
  -o /dev/null "$base/nolimit" "$base/ip" "$base/k/1" "$base/deny" "$base/deny" "$base/deny")
nginx_stop
[ "$codes" = "200 200 200 200 429 429 " ] || die "nginx sanity check: got '$codes'"
log "nginx $(nginx -v 2>&1 | sed 's/.*\///') on 127.0.0.1:$PORT: sanity ok"

for ((r = 1; r <= RUNS; r++)); do
  for wl in "${workloads[@]}"; do
    nginx_start
    log "nginx-limit_req $wl, run $r/$RUNS"
    case $wl in
      http.nolimit)    SRV_PIDS=$NGX_WORKER wrk_json nginx-limit_req "$wl" allow "http://127.0.0.1:$PORT/nolimit" ;;
      http.allow.1key) SRV_PIDS=$NGX_WORKER wrk_json nginx-limit_req "$wl" allow "http://127.0.0.1:$PORT/ip" ;;
      http.allow.100k) SRV_PIDS=$NGX_WORKER wrk_json nginx-limit_req "$wl" allow "http://127.0.0.1:$PORT" \
                         WRK_MODE=random WRK_PREFIX=/k/ WRK_KEYS=100000 ;;
      http.deny.1key)  SRV_PIDS=$NGX_WORKER wrk_json nginx-limit_req "$wl" deny "http://127.0.0.1:$PORT/deny" ;;
    esac
    nginx_stop
  done
done
