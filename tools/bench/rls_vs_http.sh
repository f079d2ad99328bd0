#!/usr/bin/env bash
# rls_vs_http.sh — Envoy's ShouldRateLimit over gRPC beside POST /v1/acquire over HTTP/1.1, on
# ONE ratelimitd (memory store, one worker thread) pinned to SERVER_CPU, the load generators
# pinned to CLIENT_CPU, one hot key that never denies (HTTP: fixed_window 1e9/s; gRPC: a
# descriptor rule of 1e9 per second — the same fixed-window decision on the memory store).
# Per round and in-flight count N:
#   rls.h2load   ShouldRateLimit, h2load (nghttp2: one connection, N streams, the request as a
#                fixed gRPC frame) — the gRPC figure compared with HTTP and with the peer
#   rls.grpc     ShouldRateLimit, ratelimit-bench rls (libgrpc++ client, N calls in flight)
#                (BENCH_CLIENT=0 skips it)
#   rls.http     POST /v1/acquire over HTTP/1.1, wrk, N connections
#   rls.h2c      POST /v1/acquire over h2c on the HTTP port, h2load, N streams on one
#                connection (only when the HTTP port speaks h2c)
#   rls.http_old, rls.h2load_old, rls.h2c_old  the same three runs on OLD_RATELIMITD (a build from
#                before the change), when set — old and new in the same round
#   rls.grpcgo   ShouldRateLimit on bench/peers/grpcgo (the grpc-go floor peer, GOPATH build of
#                Debian's grpc-go), same h2load load, pinned the same (GRPCGO=0 skips it)
#   rls.nginx    nginx limit_req (Debian's nginx, bench/peers/nginx/nginx.conf.in: one worker,
#                a fresh private instance per round on free loopback ports, pinned the same),
#                GET /ip — one key, never denies — over HTTP/1.1 with wrk, N connections
#   rls.nginx_h2c the same location over h2c (nginx's `listen ... http2`), h2load as for rls.h2c
#                (NGINX=0 skips both)
#   rls.floor_epoll, rls.floor_epoll_batch, rls.floor_uring  POST /v1/acquire's bytes answered by bench/floor/http_floor.c
#                (no application: the floor under any HTTP/1.1 server here), epoll with a recv and a
#                send per request as ratelimitd's loop, the same with each turn's sends in one
#                io_uring_enter, and io_uring with one io_uring_enter per turn; wrk as for rls.http, pinned the same (FLOOR=1 adds both)
#   rls.resp     CL.THROTTLE over the Redis protocol (resp_listen), redis-benchmark, N connections
#                one command each (RESP=1 adds both RESP runs; off by default, so a binary from
#                before resp_listen can still be measured)
#   rls.resp_pipe the same, N in flight as pipelines: N/RESP_PIPELINE connections each sending
#                RESP_PIPELINE commands at a time (redis-benchmark -P)
#   rls.redisfn, rls.redisfn_pipe  the same two loads on a private redis-server (pinned the same)
#                running redis-cell's GCRA as a function (bench/peers/redis/cell_gcra.lua, FCALL
#                cl_throttle): the peer where redis-cell itself cannot be loaded (REDISFN=1 adds)
#                CL.THROTTLE's key never denies: max_burst 999999999 at 1,000,000 per second.
# h2load reads no grpc-status, so a gRPC run on ratelimitd is accepted only when its decision
# counter (/metrics) grew by at least the calls h2load counted; the peer is checked once per
# round with a real gRPC call (python3-grpcio) before it is measured. redis-benchmark counts an
# error reply as an answer, so a RESP run on ratelimitd is accepted only when its admitted
# CL.THROTTLE count (/metrics, endpoint resp_throttle, status 200) grew by the requests it sent;
# the function peer must first answer redis-cell's README example as ratelimitd does.
# Every line has client_cpu, server_cpu (fractions of one core over the run: the side near 1.0
# is the limit), steal_s (hypervisor steal on the two pinned cpus over the run) and other_cpu
# (what else ran on the two pinned cpus, lib.sh measure(): a run that shared its cores shows
# it, and its tail latency with it).
# Results: one JSON line per run on stdout; the medians, µs of server CPU per call, and the
# same-round ratios on stderr — of decisions/s, and per core (the other side's server CPU per call
# over ours: what a load generator near 100 % of its core cannot cap); tables with
# bench/peers/summarize.py.
# usage: tools/bench/rls_vs_http.sh > results.jsonl   (inside /work/helpers/quiet-run when shared)
# env: RUNS (3), CLIENT_CPU (0), SERVER_CPU (1), INFLIGHT (100; a list such as "100 10" runs
#      each), MEASURE_SECONDS (10), BENCH_CLIENT (1), GRPCGO (1), OLD_RATELIMITD (unset),
#      OLD_YAML (top-level YAML lines added to OLD_RATELIMITD's configuration: with the same
#      binary as RATELIMITD, an A/B of one setting, e.g. OLD_YAML='io_uring: false'),
#      NGINX (1), RATELIMITD, BENCH (build/bin/...), H2_CONNS (1: h2load's N streams share one connection;
#      4 spreads the same N in flight over 4 connections of N/4 streams — one connection's round
#      trip then no longer paces the run, so the server's CPU becomes the limit), RESP (0),
#      RESP_PIPELINE (10), REDISFN (0) — bench/resp.sh sets both to 1, FLOOR (0)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/bench/peers/lib.sh"
source "$ROOT/scripts/deps.sh"
GRPCGO=${GRPCGO:-1}
BENCH_CLIENT=${BENCH_CLIENT:-1}
NGINX=${NGINX:-1}
RESP=${RESP:-0}
RESP_PIPELINE=${RESP_PIPELINE:-10}
REDISFN=${REDISFN:-0}
FLOOR=${FLOOR:-0}
ratelimit_install_deps wrk curl nghttp2-client $([ "$GRPCGO" = 0 ] || echo golang-go golang-google-grpc-dev) \
  $([ "$NGINX" = 0 ] || echo nginx) $([ "$RESP$REDISFN" = 00 ] || echo redis-tools redis-server) \
  $([ "$FLOOR" = 0 ] || echo gcc liburing-dev)
RATELIMITD=${RATELIMITD:-$ROOT/build/bin/ratelimitd}
BENCH=${BENCH:-$ROOT/build/bin/ratelimit-bench}
INFLIGHT=${INFLIGHT:-100}
SECONDS_MEASURED=${MEASURE_SECONDS:-10}
H2_CONNS=${H2_CONNS:-1}
HTTP_PORT=$(free_port)
GRPC_PORT=$(free_port)
RESP_PORT=$(free_port)
TMP=$(mktemp -d)
SRV_PID=""
NGX_MASTER=""
stop_srv() {
  if [ -n "$NGX_MASTER" ]; then  # nginx: its master stops the worker (SRV_PID)
    nginx_stop
  else
    stop_pid "$SRV_PID"
  fi
  SRV_PID=""
}
trap 'stop_srv; redis_stop; rm -rf "$TMP"' EXIT
cat > "$TMP/bench.yaml" <<YAML
listen: 127.0.0.1:$HTTP_PORT
grpc_listen: 127.0.0.1:$GRPC_PORT
$([ "$RESP" = 0 ] || echo "resp_listen: 127.0.0.1:$RESP_PORT")
threads: 1
store: { type: memory, max_keys: 1000000 }
policies:
  bench: { algorithm: fixed_window, limit: 1000000000, window: 1s }
domains:
  - domain: bench
    descriptors:
      - key: user
        rate_limit: { unit: second, requests_per_unit: 1000000000 }
YAML
# The gRPC frame h2load sends: no compression, a 4-byte length, then RateLimitRequest
# {domain: "bench", descriptors: [{entries: [{key: "user", value: "hot"}]}]} as protobuf; and
# the JSON body of POST /v1/acquire over h2c.
"$PY" - "$TMP/request.bin" <<'PY'
import sys
def field(number, payload):  # a length-delimited field (wire type 2), payload < 128 bytes
    return bytes([number << 3 | 2, len(payload)]) + payload
msg = field(1, b"bench") + field(2, field(1, field(1, b"user") + field(2, b"hot")))
open(sys.argv[1], "wb").write(b"\0" + len(msg).to_bytes(4, "big") + msg)
PY
printf '{"key":"hot","policy":"bench"}' > "$TMP/acquire.json"
if [ "$GRPCGO" != 0 ]; then
  log "building bench/peers/grpcgo (GOPATH mode, Debian's grpc-go)"
  GOPATH=/usr/share/gocode GO111MODULE=off GOCACHE="$TMP/gocache" \
    go build -o "$TMP/grpcgo" "$ROOT/bench/peers/grpcgo/main.go"
fi

[ "$NGINX" = 0 ] || nginx_setup "$TMP/nginx"
[ "$FLOOR" = 0 ] || gcc -O2 -Wall -o "$TMP/http_floor" "$ROOT/bench/floor/http_floor.c" -luring
start_nginx() {  # SRV_PID: its one worker (what is measured); stop_srv stops it by its master
  nginx_start
  SRV_PID=$NGX_WORKER
}

decisions() {  # the gRPC decisions ratelimitd made so far (policy envoy: every Envoy rule, every outcome)
  curl -s "http://127.0.0.1:$HTTP_PORT/metrics" |
    awk '/^ratelimitd_decisions_total\{policy="envoy"/ {n += $2} END {printf "%d\n", n}'
}
with_cpu() {  # JSON line on stdin + the last measure's CPU and steal figures -> stdout
  "$PY" -c '
import json, sys
d = json.loads(sys.stdin.read()); d["client_cpu"] = float(sys.argv[1]); d["server_cpu"] = float(sys.argv[2])
d["steal_s"] = float(sys.argv[3]); d["other_cpu"] = float(sys.argv[4])
print(json.dumps(d), flush=True)' "$MEAS_CLIENT_CPU" "$MEAS_SERVER_CPU" "$MEAS_STEAL_S" "$MEAS_OTHER_CPU" |
    tee -a "$TMP/all.jsonl"
}
# h2load_run PEER WORKLOAD N URL CHECK H2LOAD_ARGS...: one h2load run (H2_CONNS connections,
# N streams in all) pinned to CLIENT_CPU against SRV_PID; CHECK=decisions compares ratelimitd's gRPC
# decision counter with the calls h2load counted, CHECK=status only h2load's own status counts.
h2load_run() {
  local peer=$1 workload=$2 n=$3 url=$4 check=$5; shift 5
  local before=0 after=0
  [ "$check" = decisions ] && before=$(decisions)
  # h2load appends to --log-file: without this, every run's percentiles were those of all the
  # h2load runs before it in the script (the p99 > 2 ms reported before came from that).
  rm -f "$TMP/h2.log"
  SRV_PIDS=$SRV_PID measure "$TMP/h2.out" timeout $((SECONDS_MEASURED + 30)) h2load -c"$H2_CONNS" \
    -m"$(( (n + H2_CONNS - 1) / H2_CONNS ))" -t1 -D "$SECONDS_MEASURED" --warm-up-time=2 --log-file="$TMP/h2.log" "$@" "$url"
  [ "$check" = decisions ] && after=$(decisions)
  "$PY" - "$TMP/h2.out" "$TMP/h2.log" "$peer" "$workload" "$SECONDS_MEASURED" "$check" $((after - before)) <<'PY' | with_cpu
import json, re, sys
out, log, peer, workload, seconds, check, decided = sys.argv[1:8]
seconds, decided = float(seconds), int(decided)
text = open(out).read()
m = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", text)
if not m:
    sys.exit("h2load printed no summary:\n" + text)
done, ok, failed, errored, timeouts = map(int, m.groups())
lat = sorted(int(line.split("\t")[2]) for line in open(log) if line.count("\t") == 2)
if done == 0 or (check == "decisions" and decided < ok):
    sys.exit(f"h2load: {ok} answered but the server decided {decided}: the calls were refused")
pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] if lat else 0
print(json.dumps({"peer": peer, "workload": workload, "metric": "requests_per_s",
                  "value": round(done / seconds, 1), "unit": "req/s", "requests": done,
                  "seconds": seconds, "p50_us": pct(0.5), "p99_us": pct(0.99),
                  "errors": failed + errored + timeouts + (done - ok)}))
PY
}
# rb_run PEER WORKLOAD N PIPELINE PORT CHECK COMMAND...: redis-benchmark pinned to CLIENT_CPU
# against SRV_PID, N in flight as ceil(N / PIPELINE) connections each PIPELINE deep, COMMAND on
# one key. A short run first (a warm-up, whose rate sizes the measured run to about
# MEASURE_SECONDS: redis-benchmark counts requests, not time). CHECK=throttled: ratelimitd's
# admitted CL.THROTTLE count must grow by every request of the measured run.
throttled() {
  curl -s "http://127.0.0.1:$HTTP_PORT/metrics" |
    awk '/^ratelimitd_http_requests_total\{endpoint="resp_throttle",status="200"\}/ {n += $2} END {printf "%d\n", n}'
}
rb_csv() {  # FILE -> redis-benchmark's last CSV row as JSON: rps, p50/p99 in µs
  "$PY" -c '
import csv, json, sys
rows = list(csv.reader(open(sys.argv[1])))
if len(rows) < 2:
    sys.exit("redis-benchmark printed no result")
d = dict(zip(rows[0], rows[-1]))
print(json.dumps({"rps": float(d["rps"]), "p50_us": round(float(d["p50_latency_ms"]) * 1000),
                  "p99_us": round(float(d["p99_latency_ms"]) * 1000)}))' "$1"
}
rb_run() {
  local peer=$1 workload=$2 n=$3 pipeline=$4 port=$5 check=$6; shift 6
  local rb=(sh -c 'exec "$@" 2>> "$0"' "$TMP/rb.err" redis-benchmark -h 127.0.0.1 -p "$port"
            -c $(( (n + pipeline - 1) / pipeline )) -P "$pipeline" --csv)
  taskset -c "$CLIENT_CPU" "${rb[@]}" -n 20000 "$@" > "$TMP/rb.out"
  local rate requests before=0 after=0
  rate=$(rb_csv "$TMP/rb.out" | "$PY" -c 'import json, sys; print(int(json.load(sys.stdin)["rps"]))')
  requests=$(( rate * SECONDS_MEASURED > 20000 ? rate * SECONDS_MEASURED : 20000 ))
  [ "$check" = throttled ] && before=$(throttled)
  SRV_PIDS=$SRV_PID measure "$TMP/rb.out" "${rb[@]}" -n "$requests" "$@"
  [ "$check" = throttled ] && after=$(throttled)
  "$PY" - "$peer" "$workload" "$requests" "$MEAS_WALL" "$check" $((after - before)) "$(rb_csv "$TMP/rb.out")" <<'PY' | with_cpu
import json, sys
peer, workload, requests, wall, check, admitted, d = sys.argv[1:8]
requests, admitted, d = int(requests), int(admitted), json.loads(d)
if check == "throttled" and admitted < requests:
    sys.exit(f"redis-benchmark sent {requests} but ratelimitd admitted {admitted}: error replies")
print(json.dumps({"peer": peer, "workload": workload, "metric": "requests_per_s", "value": d["rps"],
                  "unit": "req/s", "requests": requests, "seconds": float(wall), "p50_us": d["p50_us"],
                  "p99_us": d["p99_us"], "errors": 0}))
PY
}
THROTTLE=(CL.THROTTLE hot 999999999 1000000 1 1)  # never denies: 10^9 + 1 tokens, 10^6 per second
GRPC_ARGS=(-H 'content-type: application/grpc' -H 'te: trailers' -d "$TMP/request.bin")
RLS_PATH=/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit

start_ratelimitd() {  # $1: the binary, $2: its configuration (default bench.yaml)
  taskset -c "$SERVER_CPU" "$1" --config "${2:-$TMP/bench.yaml}" 2>> "$TMP/rl.log" &
  SRV_PID=$!
  wait_port 127.0.0.1 "$HTTP_PORT" 10 || { cat "$TMP/rl.log" >&2; die "ratelimitd did not come up"; }
  wait_port 127.0.0.1 "$GRPC_PORT" 10 || { cat "$TMP/rl.log" >&2; die "no gRPC listener"; }
  [ "$RESP" = 0 ] || wait_port 127.0.0.1 "$RESP_PORT" 10 || { cat "$TMP/rl.log" >&2; die "no RESP listener"; }
}

for ((r = 1; r <= RUNS; r++)); do
  log "round $r/$RUNS ($(uptime | sed 's/.*load/load/'))"
  start_ratelimitd "$RATELIMITD"
  h2c=0
  h2load -n1 -c1 "http://127.0.0.1:$HTTP_PORT/healthz" 2>/dev/null | grep -q "1 succeeded" && h2c=1
  for n in $INFLIGHT; do
    log "ShouldRateLimit (h2load), $n streams on one connection"
    h2load_run h2load-grpc "rls.h2load.c$n" "$n" "http://127.0.0.1:$GRPC_PORT$RLS_PATH" decisions "${GRPC_ARGS[@]}"
    if [ "$BENCH_CLIENT" != 0 ]; then
      log "ShouldRateLimit (ratelimit-bench rls), $n in flight"
      SRV_PIDS=$SRV_PID measure "$TMP/grpc.out" "$BENCH" rls --target "127.0.0.1:$GRPC_PORT" \
        --domain bench --key user --inflight "$n" --warmup 2 --seconds "$SECONDS_MEASURED" \
        --json-peer ratelimitd-grpc --workload "rls.grpc.c$n"
      grep '^{' "$TMP/grpc.out" | with_cpu
    fi
    log "POST /v1/acquire over HTTP/1.1 (wrk), $n connections"
    SRV_PIDS=$SRV_PID WRK_CONNS=$n WRK_DURATION=${SECONDS_MEASURED}s \
      wrk_json ratelimitd-http "rls.http.c$n" allow "http://127.0.0.1:$HTTP_PORT/v1/acquire" \
      WRK_MODE=acquire WRK_KEYS=1 WRK_POLICY=bench | tee -a "$TMP/all.jsonl"
    if [ "$h2c" = 1 ]; then
      log "POST /v1/acquire over h2c (h2load), $n streams on one connection"
      h2load_run h2load-h2c "rls.h2c.c$n" "$n" "http://127.0.0.1:$HTTP_PORT/v1/acquire" status \
        -H 'content-type: application/json' -d "$TMP/acquire.json"
    fi
    if [ "$RESP" != 0 ]; then
      log "CL.THROTTLE over RESP (redis-benchmark), $n connections, one command each"
      rb_run ratelimitd-resp "rls.resp.c$n" "$n" 1 "$RESP_PORT" throttled "${THROTTLE[@]}"
      log "CL.THROTTLE over RESP (redis-benchmark), $n in flight as pipelines of $RESP_PIPELINE"
      rb_run ratelimitd-resp "rls.resp_pipe.c$n" "$n" "$RESP_PIPELINE" "$RESP_PORT" throttled "${THROTTLE[@]}"
    fi
  done
  stop_srv
  if [ "$REDISFN" != 0 ]; then
    redis_start  # pinned to SERVER_CPU, no persistence
    SRV_PID=$REDIS_PID
    redis-cli -p "$REDIS_PORT" FUNCTION LOAD "$(cat "$ROOT/bench/peers/redis/cell_gcra.lua")" > /dev/null
    readme=$(redis-cli -p "$REDIS_PORT" FCALL cl_throttle 1 user123 15 30 60 1 | tr '\n' ' ')
    [ "$readme" = "0 16 15 -1 2 " ] || die "the GCRA function answered '$readme' to redis-cell's README example"
    for n in $INFLIGHT; do
      log "FCALL cl_throttle on Redis $(redis-server --version | awk '{print $3}') (redis-benchmark), $n connections"
      rb_run redis-function "rls.redisfn.c$n" "$n" 1 "$REDIS_PORT" status FCALL cl_throttle 1 "${THROTTLE[@]:1}"
      log "FCALL cl_throttle (redis-benchmark), $n in flight as pipelines of $RESP_PIPELINE"
      rb_run redis-function "rls.redisfn_pipe.c$n" "$n" "$RESP_PIPELINE" "$REDIS_PORT" status \
        FCALL cl_throttle 1 "${THROTTLE[@]:1}"
    done
    redis_stop
    SRV_PID=""
  fi
  if [ -n "${OLD_RATELIMITD:-}" ]; then
    { cat "$TMP/bench.yaml"; printf '%s\n' "${OLD_YAML:-}"; } > "$TMP/bench_old.yaml"
    start_ratelimitd "$OLD_RATELIMITD" "$TMP/bench_old.yaml"
    for n in $INFLIGHT; do
      log "ShouldRateLimit (h2load) on OLD_RATELIMITD, $n streams"
      h2load_run h2load-grpc-old "rls.h2load_old.c$n" "$n" "http://127.0.0.1:$GRPC_PORT$RLS_PATH" decisions "${GRPC_ARGS[@]}"
      log "POST /v1/acquire over HTTP/1.1 (wrk) on OLD_RATELIMITD, $n connections"
      SRV_PIDS=$SRV_PID WRK_CONNS=$n WRK_DURATION=${SECONDS_MEASURED}s \
        wrk_json ratelimitd-http-old "rls.http_old.c$n" allow "http://127.0.0.1:$HTTP_PORT/v1/acquire" \
        WRK_MODE=acquire WRK_KEYS=1 WRK_POLICY=bench | tee -a "$TMP/all.jsonl"
      if [ "$h2c" = 1 ]; then
        log "POST /v1/acquire over h2c (h2load) on OLD_RATELIMITD, $n streams"
        h2load_run h2load-h2c-old "rls.h2c_old.c$n" "$n" "http://127.0.0.1:$HTTP_PORT/v1/acquire" status \
          -H 'content-type: application/json' -d "$TMP/acquire.json"
      fi
    done
    stop_srv
  fi
  if [ "$NGINX" != 0 ]; then
    start_nginx
    # The limiter is in the path: /ip admits, /deny (10 r/s, no burst) refuses its second request.
    codes=$(curl -s -w '%{http_code} ' -o /dev/null -o /dev/null -o /dev/null \
      "http://127.0.0.1:$NGX_PORT/ip" "http://127.0.0.1:$NGX_PORT/deny" "http://127.0.0.1:$NGX_PORT/deny")
    [ "$codes" = "200 200 429 " ] || die "nginx limit_req sanity check: got '$codes'"
    h2load -n1 -c1 "http://127.0.0.1:$NGX_H2PORT/ip" 2> /dev/null | grep -q "1 succeeded" || die "nginx: no h2c"
    for n in $INFLIGHT; do
      log "nginx limit_req over HTTP/1.1 (wrk), $n connections"
      SRV_PIDS=$SRV_PID WRK_CONNS=$n WRK_DURATION=${SECONDS_MEASURED}s \
        wrk_json nginx-limit_req "rls.nginx.c$n" allow "http://127.0.0.1:$NGX_PORT/ip" | tee -a "$TMP/all.jsonl"
      log "nginx limit_req over h2c (h2load), $n streams"
      h2load_run nginx-limit_req-h2c "rls.nginx_h2c.c$n" "$n" "http://127.0.0.1:$NGX_H2PORT/ip" status
    done
    stop_srv
  fi
  if [ "$FLOOR" != 0 ]; then
    for mode in epoll epoll_batch uring; do
      floor_port=$(free_port)
      taskset -c "$SERVER_CPU" "$TMP/http_floor" "$mode" "$floor_port" 2>> "$TMP/floor.log" &
      SRV_PID=$!
      wait_port 127.0.0.1 "$floor_port" 10 || { cat "$TMP/floor.log" >&2; die "http_floor $mode did not listen"; }
      for n in $INFLIGHT; do
        log "the floor: POST /v1/acquire's answer, no application, $mode (wrk), $n connections"
        SRV_PIDS=$SRV_PID WRK_CONNS=$n WRK_DURATION=${SECONDS_MEASURED}s \
          wrk_json "http-floor-$mode" "rls.floor_$mode.c$n" allow "http://127.0.0.1:$floor_port/v1/acquire" \
          WRK_MODE=acquire WRK_KEYS=1 WRK_POLICY=bench | tee -a "$TMP/all.jsonl"
      done
      # It exits non-zero after a short send: the run measured something else.
      kill -TERM "$SRV_PID"
      wait "$SRV_PID" || die "http_floor $mode sent a short answer: see $TMP/floor.log"
      SRV_PID=""
    done
  fi
  if [ "$GRPCGO" != 0 ]; then
    GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$TMP/grpcgo" -listen "127.0.0.1:$GRPC_PORT" 2>> "$TMP/go.log" &
    SRV_PID=$!
    wait_port 127.0.0.1 "$GRPC_PORT" 10 || { cat "$TMP/go.log" >&2; die "grpcgo did not come up"; }
    "$PY" - "$GRPC_PORT" "$TMP/request.bin" <<'PY' || die "grpcgo did not answer ShouldRateLimit OK"
import sys, grpc  # Debian's python3-grpcio
port, frame = sys.argv[1], open(sys.argv[2], "rb").read()
with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
    call = ch.unary_unary("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
                          request_serializer=lambda b: b, response_deserializer=lambda b: b)
    resp = call(frame[5:], timeout=5)
assert resp[:2] == b"\x08\x01", resp  # overall_code OK
PY
    for n in $INFLIGHT; do
      log "ShouldRateLimit on the grpc-go peer (h2load), $n streams on one connection"
      h2load_run grpcgo "rls.grpcgo.c$n" "$n" "http://127.0.0.1:$GRPC_PORT$RLS_PATH" status "${GRPC_ARGS[@]}"
    done
    stop_srv
  fi
done
# Per in-flight count: the medians, server CPU per call, and the same-round ratios.
"$PY" - "$TMP/all.jsonl" <<'PY' >&2
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
by = {}
for d in rows:
    kind, n = d["workload"].split(".")[1], d["workload"].split(".c")[-1]
    by.setdefault((n, kind), []).append(d)
kinds = ("h2load", "h2load_old", "grpc", "http", "http_old", "h2c", "h2c_old", "grpcgo", "nginx", "nginx_h2c",
         "resp", "resp_pipe", "redisfn", "redisfn_pipe", "floor_epoll", "floor_epoll_batch", "floor_uring")
for n in sorted({k[0] for k in by}, key=int, reverse=True):
    for kind in kinds:
        rs = by.get((n, kind), [])
        if not rs:
            continue
        med = lambda key: statistics.median(d[key] for d in rs)
        us = statistics.median(d["server_cpu"] / d["value"] * 1e6 for d in rs if d["value"] > 0)
        print(f"{n:>4} in flight {kind:10} {med('value'):>9,.0f} req/s  p50 {med('p50_us') / 1000:.2f} ms"
              f"  p99 {med('p99_us') / 1000:.2f} ms  server CPU {med('server_cpu') * 100:.0f} %"
              f" ({us:.1f} µs/call)  client CPU {med('client_cpu') * 100:.0f} %"
              f"  steal max {max(d.get('steal_s', 0) for d in rs):.2f} s"
              f"  other CPU max {max(d.get('other_cpu', 0) for d in rs) * 100:.0f} %")
    for a, b in (("h2load", "http"), ("grpc", "http"), ("h2load", "grpcgo"), ("h2c", "http"), ("http", "http_old"), ("h2load", "h2load_old"), ("h2c", "h2c_old"),
             ("http", "nginx"), ("h2c", "nginx_h2c"), ("h2c", "nginx"), ("resp", "http"), ("resp_pipe", "http"),
             ("resp_pipe", "h2c"), ("resp", "redisfn"), ("resp_pipe", "redisfn_pipe"),
             ("floor_epoll", "http"), ("floor_epoll", "nginx"), ("floor_epoll_batch", "floor_epoll"), ("floor_uring", "floor_epoll"), ("floor_uring", "http")):
        g, h = by.get((n, a), []), by.get((n, b), [])
        if g and len(g) == len(h):
            ratios = [x["value"] / y["value"] for x, y in zip(g, h)]
            print(f"{n:>4} in flight {a} / {b}, same rounds: " +
                  ", ".join(f"{x:.2f}" for x in ratios) + f"; median {statistics.median(ratios):.2f}")
            # Per core: the other side's server CPU per call over ours. The line above is also
            # bounded by the load generator (wrk near 100 % of its core caps both servers alike);
            # this one is not, and is what "N× per core" means.
            per_call = lambda d: d["server_cpu"] / d["value"] if d["value"] > 0 else float("inf")
            cores = [per_call(y) / per_call(x) for x, y in zip(g, h)]
            print(f"{n:>4} in flight {a} / {b}, per core (server CPU per call, {b} / {a}): " +
                  ", ".join(f"{x:.2f}" for x in cores) + f"; median {statistics.median(cores):.2f}")
PY
