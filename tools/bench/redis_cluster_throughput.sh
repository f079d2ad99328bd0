#!/usr/bin/env bash
# tools/bench/redis_cluster_throughput.sh — RedisStore decisions/s on a 3-master Redis Cluster
# (redis-cluster://, slot routing) beside one standalone redis-server, in the same run, same
# client, same workload. Not a test: a benchmark (docs/BENCHMARKS.md).
#
# Starts its own servers (--save '' --appendonly no): three cluster masters (no replicas,
# created with redis-cli --cluster create --cluster-replicas 0) and one standalone node, all
# pinned to SERVER_CPUS; ratelimit-bench is pinned to CLIENT_CPU. Per run and key count the
# standalone node and the cluster are measured back to back (FLUSHALL first). Prints every
# measurement, then medians and the ratio cluster / standalone. Stops what it started (by pid).
# Every wait is bounded.
# Env: RUNS (3), SECONDS_PER_RUN (5), CLIENT_CPU (0), SERVER_CPUS (1), INFLIGHT (50),
#      BENCH (build/bin/ratelimit-bench), ALGORITHM (token_bucket), KEYS_LIST ("1 100000").
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${RUNS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-5}
CLIENT_CPU=${CLIENT_CPU:-0}
SERVER_CPUS=${SERVER_CPUS:-1}
INFLIGHT=${INFLIGHT:-50}
BENCH=${BENCH:-build/bin/ratelimit-bench}
ALGORITHM=${ALGORITHM:-token_bucket}
KEYS_LIST=${KEYS_LIST:-"1 100000"}

dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

# A cluster node needs its port and the bus port (+10000) free; 20000-29999 is below the
# ephemeral range.
pair_port() {
  python3 - <<'PY'
import random, socket
for _ in range(500):
    p = random.randrange(20000, 30000)
    try:
        for q in (p, p + 10000):
            s = socket.socket(); s.bind(("127.0.0.1", q)); s.close()
        print(p); break
    except OSError:
        pass
PY
}
start_node() {  # port, extra args...
  local port=$1; shift
  mkdir -p "$dir/$port"
  taskset -c "$SERVER_CPUS" redis-server --bind 127.0.0.1 --port "$port" --save '' \
    --appendonly no --dir "$dir/$port" --daemonize no --loglevel warning "$@" \
    >"$dir/$port/log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && return; sleep 0.05; done
  echo "redis-server on $port did not start:"; cat "$dir/$port/log"; exit 1
}

standalone=$(pair_port)
start_node "$standalone"
nodes=()
for _ in 1 2 3; do
  p=$(pair_port)
  start_node "$p" --cluster-enabled yes --cluster-config-file nodes.conf
  nodes+=("127.0.0.1:$p")
done
timeout 60 redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes \
  >"$dir/create.log" 2>&1 || { cat "$dir/create.log"; exit 1; }
first=${nodes[0]#127.0.0.1:}
for _ in $(seq 200); do
  redis-cli -p "$first" cluster info | grep -q cluster_state:ok && break; sleep 0.05
done
redis-cli -p "$first" cluster info | grep -q cluster_state:ok || { echo "cluster not ok"; exit 1; }
cluster_url="redis-cluster://$(IFS=,; echo "${nodes[*]}")"
standalone_url="redis://127.0.0.1:$standalone/0"
echo "# redis-server $(redis-server --version | awk '{print $3}'): standalone :$standalone and a 3-master cluster (${nodes[*]}), all on cpu(s) $SERVER_CPUS; ratelimit-bench on cpu $CLIENT_CPU; $ALGORITHM, $INFLIGHT in flight, $RUNS runs"

results="$dir/results"
: >"$results"
measure() {  # name url keys
  local line
  line=$(taskset -c "$CLIENT_CPU" "$BENCH" throughput --store "$2" --algorithm "$ALGORITHM" \
           --keys "$3" --inflight "$INFLIGHT" --seconds "$SECONDS_PER_RUN")
  local rate p50 p99
  rate=$(sed -n 's/.*decisions\/s=\([0-9]*\).*/\1/p' <<<"$line")
  p50=$(sed -n 's/.*p50_us=\([0-9.]*\).*/\1/p' <<<"$line")
  p99=$(sed -n 's/.*p99_us=\([0-9.]*\).*/\1/p' <<<"$line")
  echo "run=$run store=$1 keys=$3 decisions/s=$rate p50_us=$p50 p99_us=$p99"
  echo "$1 $3 $rate $p50 $p99" >>"$results"
}
for run in $(seq "$RUNS"); do
  for keys in $KEYS_LIST; do
    redis-cli -p "$standalone" flushall >/dev/null
    measure standalone "$standalone_url" "$keys"
    for n in "${nodes[@]}"; do redis-cli -p "${n#127.0.0.1:}" flushall >/dev/null; done
    measure cluster "$cluster_url" "$keys"
  done
done

echo
echo "| keys | standalone decisions/s | 3-master cluster decisions/s | cluster / standalone | p50 / p99 µs standalone | p50 / p99 µs cluster |"
echo "| --- | --- | --- | --- | --- | --- |"
python3 - "$results" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, k, r, p50, p99 = line.split()
    rows.setdefault(int(k), {}).setdefault(name, []).append((float(r), float(p50), float(p99)))
for k, v in rows.items():
    m = {n: [statistics.median(x[i] for x in v[n]) for i in range(3)] for n in v}
    s, c = m["standalone"], m["cluster"]
    runs = "; ".join(f"{n}: " + ", ".join(f"{x[0]:.0f}" for x in v[n]) for n in v)
    print(f"| {k} | {s[0]:.0f} | {c[0]:.0f} | {c[0] / s[0]:.2f} | {s[1]:.0f} / {s[2]:.0f} | {c[1]:.0f} / {c[2]:.0f} |  <!-- runs: {runs} -->")
PY
