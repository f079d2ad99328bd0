#!/usr/bin/env bash
# bench/every_way_in.sh — one run, one core, every way into a decision (issue 34): the library
# (MemoryStore, in process), and ratelimitd over HTTP/1.1, h2c, gRPC and the Redis protocol,
# beside nginx `limit_req` (HTTP/1.1 and h2c), the grpc-go floor peer and a Redis running
# redis-cell's GCRA as a function — all in the same session, so the figures can share a table
# (docs/BENCHMARKS.md, "Every way in"). Not a test: a benchmark.
#
# What runs:
#   1. ratelimit_microbench pinned to SERVER_CPU: store/hot/fixed_window (the decision the
#      servers below make), store/hot/token_bucket and store_manual_clock/hot/token_bucket, one
#      thread, LIB_REPETITIONS repetitions (median). One line each: peer "library".
#   2. tools/bench/rls_vs_http.sh with RESP=1 REDISFN=1 NGINX=1 GRPCGO=1: every server pinned
#      to SERVER_CPU, every load generator to CLIENT_CPU, INFLIGHT in flight on one hot key that
#      never denies (its header has each line's fields and the checks a figure must pass).
#   3. bench/peers/every_way_table.py: the table (markdown, stderr) — decisions/s, µs of server
#      CPU per decision and decisions per core for each way in, and the same-round ratio to the
#      peer on the same protocol.
# The library's figure is CPU time on one core already (one thread doing nothing else), so its
# "decisions per core" is 10⁹ / ns; a server's is 10⁶ / (µs of server CPU per decision).
#
# The quiet lock: as bench/resp.sh — the run holds `flock -x` on QUIET_LOCK through
# scripts/quiet-run; QUIET_LOCK= (empty) runs without it: a correctness check, never figures.
#
# usage: bench/every_way_in.sh > results.jsonl      (progress and the table on stderr)
# env:   RUNS (3) MEASURE_SECONDS (10) INFLIGHT (100) LIB_REPETITIONS (5) CLIENT_CPU (0)
#        SERVER_CPU (1) MICROBENCH (build/bin/ratelimit_microbench) RATELIMITD QUIET_LOCK ...
# Tiny correctness run (a minute): QUIET_LOCK= RUNS=1 MEASURE_SECONDS=1 INFLIGHT=10 LIB_REPETITIONS=1 bench/every_way_in.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/bench/peers/lib.sh"
under_quiet_lock "$0" "$@"
MICROBENCH=${MICROBENCH:-$ROOT/build/bin/ratelimit_microbench}
SERVER_CPU=${SERVER_CPU:-1}
LIB_REPETITIONS=${LIB_REPETITIONS:-5}
[ -x "$MICROBENCH" ] || die "no $MICROBENCH: build the target ratelimit_microbench first"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
log "ratelimitd $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?'); load average $(cut -d' ' -f1-3 /proc/loadavg)"

log "the library: ratelimit_microbench on cpu $SERVER_CPU, $LIB_REPETITIONS repetitions"
steal0=$(steal_ticks)
taskset -c "$SERVER_CPU" "$MICROBENCH" --benchmark_format=json --benchmark_repetitions="$LIB_REPETITIONS" \
  --benchmark_filter='^(store/hot/(fixed_window|token_bucket)|store_manual_clock/hot/token_bucket)/real_time/threads:1$' \
  > "$TMP/lib.json"
steal1=$(steal_ticks)
"$PY" - "$TMP/lib.json" $((steal1 - steal0)) "$CLK_TCK" <<'PY' | tee "$TMP/all.jsonl"
import json, statistics, sys
runs, steal_s = json.load(open(sys.argv[1]))["benchmarks"], int(sys.argv[2]) / int(sys.argv[3])
by = {}
for b in runs:
    if b.get("run_type", "iteration") == "iteration":
        by.setdefault(b["run_name"], []).append(b["real_time"] if b["time_unit"] == "ns" else None)
if len(by) != 3 or any(None in v for v in by.values()):
    sys.exit(f"ratelimit_microbench: expected 3 benchmarks in ns, got {sorted(by)}")
for name, ns in sorted(by.items()):
    print(json.dumps({"peer": "library", "workload": "lib." + name.split("/real_time")[0].replace("/", "."),
                      "metric": "ns_per_decision", "value": statistics.median(ns), "unit": "ns",
                      "min": min(ns), "max": max(ns), "repetitions": len(ns),
                      "steal_s": round(steal_s, 3)}))
PY

log "the servers: tools/bench/rls_vs_http.sh (RESP, the Redis function, nginx, grpc-go)"
RESP=1 REDISFN=1 NGINX=${NGINX:-1} GRPCGO=${GRPCGO:-1} BENCH_CLIENT=0 \
  "$ROOT/tools/bench/rls_vs_http.sh" 2> >(tee "$TMP/servers.err" >&2) | tee -a "$TMP/all.jsonl"
"$PY" "$ROOT/bench/peers/every_way_table.py" "$TMP/all.jsonl" "${RESP_PIPELINE:-10}" >&2
