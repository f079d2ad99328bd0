#!/usr/bin/env bash
# bench/resp.sh — ratelimitd's decisions per core over the Redis protocol (issue 32), beside its
# HTTP/1.1, h2c and gRPC in the same run, and beside a Redis running redis-cell's GCRA as a
# function (docs/BENCHMARKS.md, "The Redis protocol"). Not a test: a benchmark.
#
# What runs (tools/bench/rls_vs_http.sh does the measuring; see its header for every line's
# fields): ONE ratelimitd (memory store, one worker thread) pinned to SERVER_CPU, every load
# generator pinned to CLIENT_CPU, INFLIGHT requests in flight, one hot key that never denies:
#   rls.h2load     gRPC ShouldRateLimit (h2load)        rls.http   POST /v1/acquire, HTTP/1.1 (wrk)
#   rls.h2c        POST /v1/acquire over h2c (h2load)   rls.resp   CL.THROTTLE, one per connection
#   rls.resp_pipe  CL.THROTTLE pipelined RESP_PIPELINE deep (redis-benchmark -P)
#   rls.redisfn, rls.redisfn_pipe  the same two RESP loads against a private redis-server (pinned
#                  to SERVER_CPU) running bench/peers/redis/cell_gcra.lua: FCALL cl_throttle
# Each line carries the server's and the client's CPU (fractions of one core), the steal and the
# other work on the two pinned cpus; the summary (stderr) gives medians, µs of server CPU per
# decision and the same-round ratios (RESP / HTTP/1.1, RESP / the Redis function, ...).
#
# The quiet lock: the run holds `flock -x` on QUIET_LOCK, so it measures only while no other
# holder of that lock (a build, test or measurement that takes it) runs, and leaves QUIET_WANT
# (/tmp/ratelimit-quiet.want) while it waits and runs, asking builders to pause: it re-runs
# itself through scripts/quiet-run. QUIET_LOCK= (empty) runs without either: a correctness
# check, never figures.
#
# usage: bench/resp.sh > results.jsonl            (the summary on stderr)
# env:   RUNS (3) MEASURE_SECONDS (10) INFLIGHT (100) RESP_PIPELINE (10) CLIENT_CPU (0)
#        SERVER_CPU (1) QUIET_LOCK (/tmp/ratelimit-quiet.lock) QUIET_WAIT (3600 s at most)
#        QUIET_WANT (/tmp/ratelimit-quiet.want; empty: none)
#        and rls_vs_http.sh's own: NGINX, GRPCGO, BENCH_CLIENT (0 here unless set), RATELIMITD
# Tiny correctness run (seconds): QUIET_LOCK= RUNS=1 MEASURE_SECONDS=1 INFLIGHT=10 bench/resp.sh
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/bench/peers/lib.sh"
under_quiet_lock "$0" "$@"
export NGINX=${NGINX:-0} GRPCGO=${GRPCGO:-0} BENCH_CLIENT=${BENCH_CLIENT:-0} RESP=1 REDISFN=1
echo "[$(date -u +%H:%M:%S)] ratelimitd $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo '?'); load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exec "$ROOT/tools/bench/rls_vs_http.sh" "$@"
