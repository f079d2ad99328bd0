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
MASTER=""
stop_nginx() {
  if [ -n "$MASTER" ]; then
    kill -TERM "$MASTER" 2> /dev/null || true
    wait "$MASTER" 2> /dev/null || true
    MASTER=""
  fi
}
trap 'stop_nginx; rm -rf "$RUN"' EXIT
PORT=$(free_port)
H2PORT=$(free_port)
sed -e "s#@RUN@#$RUN#g" -e "s#@WWW@#$PEERS_DIR/nginx/www#g" -e "s#@PORT@#$PORT#g" -e "s#@H2PORT@#$H2PORT#g" \
  "$PEERS_DIR/nginx/nginx.conf.in" > "$RUN/nginx.conf"
nginx -t -q -p "$RUN/" -c "$RUN/nginx.conf" 2> "$RUN/test.log" || { cat "$RUN/test.log" >&2; die "nginx -t"; }

start_nginx() {
  taskset -c "$SERVER_CPU" nginx -p "$RUN/" -c "$RUN/nginx.conf" -g 'daemon off;' \
    >> "$RUN/stdout.log" 2>&1 &
  MASTER=$!
  wait_port 127.0.0.1 "$PORT" 10 || { cat "$RUN/error.log" >&2; die "nginx did not listen on $PORT"; }
  local i
  WORKER=""
  for ((i = 0; i < 50; i++)); do
    WORKER=$(pgrep -P "$MASTER" | head -1 || true)
    [ -n "$WORKER" ] && break
    sleep 0.1
  done
  [ -n "$WORKER" ] || die "nginx started no worker"
}

# Sanity, once: the allow locations admit, /deny denies (the limiter really is in the path).
start_nginx
base=http://127.0.0.1:$PORT
# One curl process (one connection): the three /deny requests come within 100 ms.
codes=$(curl -s -w '%{http_code} ' -o /dev/null -o /dev/null -o /dev/null -o /dev/null -o /dev/null \
  -o /dev/null "$base/nolimit" "$base/ip" "$base/k/1" "$base/deny" "$base/deny" "$base/deny")
stop_nginx
[ "$codes" = "200 200 200 200 429 429 " ] || die "nginx sanity check: got '$codes'"
log "nginx $(nginx -v 2>&1 | sed 's/.*\///') on 127.0.0.1:$PORT: sanity ok"

for ((r = 1; r <= RUNS; r++)); do
  for wl in "${workloads[@]}"; do
    start_nginx
    log "nginx-limit_req $wl, run $r/$RUNS"
    case $wl in
      http.nolimit)    SRV_PIDS=$WORKER wrk_json nginx-limit_req "$wl" allow "http://127.0.0.1:$PORT/nolimit" ;;
      http.allow.1key) SRV_PIDS=$WORKER wrk_json nginx-limit_req "$wl" allow "http://127.0.0.1:$PORT/ip" ;;
      http.allow.100k) SRV_PIDS=$WORKER wrk_json nginx-limit_req "$wl" allow "http://127.0.0.1:$PORT" \
                         WRK_MODE=random WRK_PREFIX=/k/ WRK_KEYS=100000 ;;
      http.deny.1key)  SRV_PIDS=$WORKER wrk_json nginx-limit_req "$wl" deny "http://127.0.0.1:$PORT/deny" ;;
    esac
    stop_nginx
  done
done
