#!/usr/bin/env bash
# rls_vs_http.sh — Envoy's ShouldRateLimit over gRPC (ratelimit-bench rls) beside POST
# /v1/acquire over HTTP/1.1 (wrk with bench/peers/wrk/workload.lua), on ONE ratelimitd (memory
# store, one I/O thread, one gRPC completion queue) pinned to SERVER_CPU, the load generators
# pinned to CLIENT_CPU; each round runs both against the same process, one after the other, on
# one hot key that never denies (HTTP: fixed_window 1e9/s; gRPC: a descriptor rule of 1e9 per
# second — the same fixed-window decision on the memory store).
# A second gRPC client, h2load (nghttp2, one connection, INFLIGHT streams, the request as a
# fixed gRPC frame), checks that ratelimit-bench is not the ceiling: it costs about half the
# server's CPU per call. h2load reads no grpc-status, so its run is accepted only when the
# server's decision counter (/metrics) grew by at least the calls h2load counted.
# Every line has client_cpu and server_cpu (fractions of one core over the run): the side near
# 1.0 is the limit.
# Results: one JSON line per run on stdout (workloads rls.grpc.c<N>, rls.h2load.c<N>,
# rls.http.c<N>); a summary with the same-round ratios on stderr; tables with
# bench/peers/summarize.py.
# usage: tools/bench/rls_vs_http.sh > results.jsonl
# env: RUNS (3), CLIENT_CPU (0), SERVER_CPU (1), INFLIGHT (100: gRPC calls in flight = wrk
#      connections; a list such as "100 50 10" runs each), MEASURE_SECONDS (10), H2LOAD (1; 0
#      skips it), RATELIMITD, BENCH (build/bin/...)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
source "$ROOT/bench/peers/lib.sh"
source "$ROOT/scripts/deps.sh"
H2LOAD=${H2LOAD:-1}
ratelimit_install_deps wrk curl $([ "$H2LOAD" = 0 ] || echo nghttp2-client)
RATELIMITD=${RATELIMITD:-$ROOT/build/bin/ratelimitd}
BENCH=${BENCH:-$ROOT/build/bin/ratelimit-bench}
INFLIGHT=${INFLIGHT:-100}
SECONDS_MEASURED=${MEASURE_SECONDS:-10}
HTTP_PORT=$(free_port)
GRPC_PORT=$(free_port)
TMP=$(mktemp -d)
RL_PID=""
stop_rl() {
  stop_pid "$RL_PID"
  RL_PID=""
}
trap 'stop_rl; rm -rf "$TMP"' EXIT
cat > "$TMP/bench.yaml" <<YAML
listen: 127.0.0.1:$HTTP_PORT
grpc_listen: 127.0.0.1:$GRPC_PORT
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
# {domain: "bench", descriptors: [{entries: [{key: "user", value: "hot"}]}]} as protobuf.
"$PY" - "$TMP/request.bin" <<'PY'
import sys
def field(number, payload):  # a length-delimited field (wire type 2), payload < 128 bytes
    return bytes([number << 3 | 2, len(payload)]) + payload
msg = field(1, b"bench") + field(2, field(1, field(1, b"user") + field(2, b"hot")))
open(sys.argv[1], "wb").write(b"\0" + len(msg).to_bytes(4, "big") + msg)
PY
decisions() {  # the gRPC decisions ratelimitd made so far (policy envoy: every Envoy rule, every outcome)
  curl -s "http://127.0.0.1:$HTTP_PORT/metrics" |
    awk '/^ratelimitd_decisions_total\{policy="envoy"/ {n += $2} END {printf "%d\n", n}'
}
with_cpu() {  # JSON line on stdin + the last measure's CPU figures -> stdout
  "$PY" -c '
import json, sys
d = json.loads(sys.stdin.read()); d["client_cpu"] = float(sys.argv[1]); d["server_cpu"] = float(sys.argv[2])
print(json.dumps(d), flush=True)' "$MEAS_CLIENT_CPU" "$MEAS_SERVER_CPU" | tee -a "$TMP/all.jsonl"
}

for ((r = 1; r <= RUNS; r++)); do
  log "round $r/$RUNS ($(uptime | sed 's/.*load/load/'))"
  taskset -c "$SERVER_CPU" "$RATELIMITD" --config "$TMP/bench.yaml" 2>> "$TMP/rl.log" &
  RL_PID=$!
  wait_port 127.0.0.1 "$HTTP_PORT" 10 || { cat "$TMP/rl.log" >&2; die "ratelimitd did not come up"; }
  wait_port 127.0.0.1 "$GRPC_PORT" 10 || { cat "$TMP/rl.log" >&2; die "no gRPC listener"; }
  for n in $INFLIGHT; do
    log "grpc ShouldRateLimit (ratelimit-bench rls), $n in flight"
    SRV_PIDS=$RL_PID measure "$TMP/grpc.out" "$BENCH" rls --target "127.0.0.1:$GRPC_PORT" \
      --domain bench --key user --inflight "$n" --warmup 2 --seconds "$SECONDS_MEASURED" \
      --json-peer ratelimitd-grpc --workload "rls.grpc.c$n"
    grep '^{' "$TMP/grpc.out" | with_cpu
    if [ "$H2LOAD" != 0 ]; then
      log "grpc ShouldRateLimit (h2load), $n streams on one connection"
      before=$(decisions)
      SRV_PIDS=$RL_PID measure "$TMP/h2.out" timeout $((SECONDS_MEASURED + 30)) h2load -c1 \
        -m"$n" -t1 -D "$SECONDS_MEASURED" --warm-up-time=2 --log-file="$TMP/h2.log" \
        -H 'content-type: application/grpc' -H 'te: trailers' -d "$TMP/request.bin" \
        "http://127.0.0.1:$GRPC_PORT/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
      after=$(decisions)
      "$PY" - "$TMP/h2.out" "$TMP/h2.log" "$n" "$SECONDS_MEASURED" $((after - before)) <<'PY' | with_cpu
import json, re, sys
out, log, n, seconds, decided = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
text = open(out).read()
m = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout", text)
if not m:
    sys.exit("h2load printed no summary:\n" + text)
done, ok, failed, errored, timeouts = map(int, m.groups())
lat = sorted(int(line.split("\t")[2]) for line in open(log) if line.count("\t") == 2)
if done == 0 or decided < ok:
    sys.exit(f"h2load: {ok} answered but the server decided {decided}: the calls were refused")
pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] if lat else 0
print(json.dumps({"peer": "h2load-grpc", "workload": f"rls.h2load.c{n}", "metric": "requests_per_s",
                  "value": round(done / seconds, 1), "unit": "req/s", "requests": done,
                  "seconds": seconds, "p50_us": pct(0.5), "p99_us": pct(0.99),
                  "errors": failed + errored + timeouts + (done - ok)}))
PY
    fi
    log "http POST /v1/acquire, $n connections"
    SRV_PIDS=$RL_PID WRK_CONNS=$n WRK_DURATION=${SECONDS_MEASURED}s \
      wrk_json ratelimitd-http "rls.http.c$n" allow "http://127.0.0.1:$HTTP_PORT/v1/acquire" \
      WRK_MODE=acquire WRK_KEYS=1 WRK_POLICY=bench | tee -a "$TMP/all.jsonl"
  done
  stop_rl
done
# Per in-flight count: the medians, server CPU per call, and gRPC / HTTP of each round.
"$PY" - "$TMP/all.jsonl" <<'PY' >&2
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
by = {}
for i, d in enumerate(rows):
    kind, n = d["workload"].split(".")[1], d["workload"].split(".c")[-1]
    by.setdefault((n, kind), []).append(d)
for n in sorted({k[0] for k in by}, key=int, reverse=True):
    for kind in ("grpc", "h2load", "http"):
        rs = by.get((n, kind), [])
        if not rs:
            continue
        med = lambda key: statistics.median(d[key] for d in rs)
        us = statistics.median(d["server_cpu"] / d["value"] * 1e6 for d in rs if d["value"] > 0)
        print(f"{n:>4} in flight {kind:7} {med('value'):>9,.0f} req/s  p50 {med('p50_us') / 1000:.2f} ms"
              f"  p99 {med('p99_us') / 1000:.2f} ms  server CPU {med('server_cpu') * 100:.0f} %"
              f" ({us:.1f} µs/call)  client CPU {med('client_cpu') * 100:.0f} %")
    for kind in ("grpc", "h2load"):
        g, h = by.get((n, kind), []), by.get((n, "http"), [])
        if g and len(g) == len(h):
            ratios = [a["value"] / b["value"] for a, b in zip(g, h)]
            print(f"{n:>4} in flight {kind} / http, same rounds: " +
                  ", ".join(f"{x:.2f}" for x in ratios) + f"; median {statistics.median(ratios):.2f}")
PY
