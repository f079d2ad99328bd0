#!/usr/bin/env bash
# tools/bench/function_cost.sh OLD_LIBRARY_DIR NEW_LIBRARY_DIR — what one decision costs Redis in
# two builds of the function library, in the same run: both loaded into one redis-server (each
# library is named by its version, so they live side by side), called by redis-benchmark with
# the same requests, alternating old and new, RUNS rounds; prints every figure, then medians and
# new/old. Not a test: a benchmark (docs/BENCHMARKS.md §14). A *_DIR is a build's
# share/ratelimit/redis (VERSION and ratelimit_<version>.lua).
# Why redis-benchmark and FCALL: the script's own cost, with no client library in the way, is
# what a change to src/redis/lua moves; the store's figures (redis_throughput.sh) include it.
# Env: RUNS (3), REQUESTS (200000), CLIENT_CPU (0), SERVER_CPU (1).
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 OLD_LIBRARY_DIR NEW_LIBRARY_DIR" >&2; exit 2; }
old_dir=$1 new_dir=$2
RUNS=${RUNS:-3} REQUESTS=${REQUESTS:-200000} CLIENT_CPU=${CLIENT_CPU:-0} SERVER_CPU=${SERVER_CPU:-1}
ov=$(cat "$old_dir/VERSION") nv=$(cat "$new_dir/VERSION")
[ "$ov" != "$nv" ] || { echo "both directories hold library $ov" >&2; exit 2; }
dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
taskset -c "$SERVER_CPU" redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
  --dir "$dir" --daemonize no --loglevel warning >"$dir/log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 50); do redis-cli -p "$port" PING >/dev/null 2>&1 && break; sleep 0.1; done
redis-cli -p "$port" -x FUNCTION LOAD < "$old_dir/ratelimit_$ov.lua" >/dev/null
redis-cli -p "$port" -x FUNCTION LOAD < "$new_dir/ratelimit_$nv.lua" >/dev/null
steal() { awk '/^cpu /{print $9}' /proc/stat; }
steal0=$(steal)
# algorithm, then the policy's five values (limit, window_us, rate, shape, counting).
cases=("token_bucket 1000000 0 10000 0 0" "fixed_window 1000000000 60000000 0 0 0"
       "sliding_window_counter 1000000000 60000000 0 0 0")
for run in $(seq "$RUNS"); do
  for v in "$ov" "$nv"; do
    for c in "${cases[@]}"; do
      set -- $c; alg=$1; shift
      for keys in one many; do
        redis-cli -p "$port" FLUSHALL >/dev/null
        k=k; [ "$keys" = many ] && k='k:__rand_int__'
        rps=$(taskset -c "$CLIENT_CPU" redis-benchmark -p "$port" -n "$REQUESTS" -c 50 -P 8 -r 100000 -q \
              FCALL "rl${v}_$alg" 1 "$k" - 1 0 "$@" 2>/dev/null | grep -o '[0-9.]* requests per second' | cut -d' ' -f1)
        echo "$run $v $alg $keys $rps"
      done
    done
  done
done | tee "$dir/runs"
echo "steal: $(( $(steal) - steal0 )) jiffies over the run"
python3 - "$dir/runs" "$ov" "$nv" <<'PY'
import collections, statistics, sys
runs, old, new = sys.argv[1:]
d = collections.defaultdict(list)
for line in open(runs):
    r, v, alg, keys, rps = line.split()
    d[(alg, keys, v)].append(float(rps))
print(f"{'algorithm':24} {'keys':5} {'old/s':>9} {'new/s':>9} new/old")
for alg, keys in sorted({(a, k) for a, k, _ in d}):
    o, n = statistics.median(d[(alg, keys, old)]), statistics.median(d[(alg, keys, new)])
    print(f"{alg:24} {keys:5} {o:9.0f} {n:9.0f} {n / o:.3f}")
PY
