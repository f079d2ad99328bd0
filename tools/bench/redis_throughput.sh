#!/usr/bin/env bash
# tools/bench/redis_throughput.sh — RedisStore decisions/s beside the ceiling of the same Redis
# running the same Lua script through redis-benchmark (EVALSHA, same requests in flight), in the
# same run. Not a test: a benchmark (docs/BENCHMARKS.md).
#
# Starts its own redis-server (--save '' --appendonly no) on a free loopback port pinned to
# SERVER_CPU; every client (ratelimit-bench, redis-benchmark) is pinned to CLIENT_CPU. For each
# run, algorithm and key count: FLUSHALL, ratelimit-bench throughput, FLUSHALL, redis-benchmark.
# Prints every measurement, then medians and the ratio store / ceiling. Stops the server it
# started (by pid).
# Env: RUNS (3), SECONDS_PER_RUN (5), CLIENT_CPU (0), SERVER_CPU (1), INFLIGHT (50),
#      BENCH (build/bin/ratelimit-bench), ALGORITHMS ("sliding_window_log token_bucket"),
#      KEYS_LIST ("1 100000").
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-5}
CLIENT_CPU=${CLIENT_CPU:-0}
SERVER_CPU=${SERVER_CPU:-1}
INFLIGHT=${INFLIGHT:-50}
BENCH=${BENCH:-build/bin/ratelimit-bench}
ALGORITHMS=${ALGORITHMS:-"sliding_window_log token_bucket"}
KEYS_LIST=${KEYS_LIST:-"1 100000"}

dir=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
taskset -c "$SERVER_CPU" redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no \
  --dir "$dir" --daemonize no --loglevel warning >"$dir/log" 2>&1 &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
url="redis://127.0.0.1:$port/0"
echo "# redis-server $(redis-server --version | awk '{print $3}') on 127.0.0.1:$port (cpu $SERVER_CPU), clients on cpu $CLIENT_CPU, $INFLIGHT in flight, $RUNS runs"

results="$dir/results"
: >"$results"
for run in $(seq "$RUNS"); do
  for algorithm in $ALGORITHMS; do
    for keys in $KEYS_LIST; do
      redis-cli -p "$port" flushall >/dev/null
      line=$(taskset -c "$CLIENT_CPU" "$BENCH" throughput --store "$url" --algorithm "$algorithm" \
               --keys "$keys" --inflight "$INFLIGHT" --seconds "$SECONDS_PER_RUN")
      store=$(sed -n 's/.*decisions\/s=\([0-9]*\).*/\1/p' <<<"$line")
      p50=$(sed -n 's/.*p50_us=\([0-9.]*\).*/\1/p' <<<"$line")
      p99=$(sed -n 's/.*p99_us=\([0-9.]*\).*/\1/p' <<<"$line")
      redis-cli -p "$port" flushall >/dev/null
      # shellcheck disable=SC2207
      args=($("$BENCH" evalsha-args --store "$url" --algorithm "$algorithm" --keys "$keys"))
      random=()
      [ "$keys" -gt 1 ] && random=(-r "$keys")
      n=$(( store * SECONDS_PER_RUN ))
      [ "$n" -lt 20000 ] && n=20000
      ceiling=$(taskset -c "$CLIENT_CPU" redis-benchmark -p "$port" -c "$INFLIGHT" -n "$n" \
                  "${random[@]}" --csv "${args[@]}" | tail -1 | cut -d, -f2 | tr -d '"')
      echo "run=$run algorithm=$algorithm keys=$keys store=$store p50_us=$p50 p99_us=$p99 redis_benchmark=${ceiling%.*}"
      echo "$algorithm $keys $store ${ceiling%.*} $p50 $p99" >>"$results"
    done
  done
done

echo
echo "| algorithm | keys | RedisStore decisions/s (median) | redis-benchmark EVALSHA ceiling (median) | ratio | p50 / p99 µs (median) |"
echo "| --- | --- | --- | --- | --- | --- |"
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    a, k, s, c, p50, p99 = line.split()
    rows.setdefault((a, int(k)), []).append((float(s), float(c), float(p50), float(p99)))
for (a, k), v in rows.items():
    s = statistics.median(x[0] for x in v); c = statistics.median(x[1] for x in v)
    p50 = statistics.median(x[2] for x in v); p99 = statistics.median(x[3] for x in v)
    runs = ", ".join(f"{x[0]:.0f}/{x[1]:.0f}" for x in v)
    print(f"| {a} | {k} | {s:.0f} | {c:.0f} | {s / c:.2f} | {p50:.0f} / {p99:.0f} |  <!-- runs store/ceiling: {runs} -->")
PY
