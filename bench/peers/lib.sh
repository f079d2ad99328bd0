# bench/peers/lib.sh — shared bash helpers of the peer benchmarks (sourced, not executed):
# defaults, the peers' installation (Debian packages from scripts/deps.sh, npm ci of the pinned
# node/package-lock.json), a private redis-server on a free loopback port stopped by pid, and
# CPU accounting of server processes. Every default can be overridden from the environment.
# Invariant: a helper stops only processes whose pid it recorded itself.
PEERS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(cd "$PEERS_DIR/../.." && pwd)
: "${RUNS:=3}"          # repetitions of every measurement
: "${CLIENT_CPU:=0}"    # core of the load generator / in-process benchmark
: "${SERVER_CPU:=1}"    # core of the server (redis-server, nginx, ratelimitd)
: "${WARMUP_S:=1}"
: "${MEASURE_S:=3}"
: "${WRK_THREADS:=2}"
: "${WRK_CONNS:=100}"
: "${WRK_DURATION:=10s}"
PY=/usr/bin/python3     # Debian's interpreter: it sees python3-limits and python3-redis
export RUNS CLIENT_CPU SERVER_CPU WARMUP_S MEASURE_S WRK_THREADS WRK_CONNS WRK_DURATION

log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }
die() { echo "error: $*" >&2; exit 1; }

# The Debian packages of the peers (listed in scripts/deps.sh) and, for Node, the npm packages
# pinned by node/package-lock.json (installed into node/node_modules, once).
peers_install() {
  # shellcheck source=../../scripts/deps.sh
  source "$REPO_DIR/scripts/deps.sh"
  ratelimit_install_deps "${RATELIMIT_BENCH_PACKAGES[@]}"
  command -v npm > /dev/null || ratelimit_install_deps "${RATELIMIT_BENCH_NODE_PACKAGES[@]}"
  # npm ci again whenever package-lock.json changed since the last install (stamp = its copy).
  local stamp="$PEERS_DIR/node/node_modules/.installed-package-lock.json"
  if ! cmp -s "$PEERS_DIR/node/package-lock.json" "$stamp"; then
    (cd "$PEERS_DIR/node" && npm ci --no-audit --no-fund --loglevel=error >&2)
    cp "$PEERS_DIR/node/package-lock.json" "$stamp"
  fi
}

# TERMs process $1 (if any) and waits for it: a benchmark's own server, stopped by pid.
stop_pid() {
  if [ -n "${1:-}" ]; then kill -TERM "$1" 2> /dev/null || true; wait "$1" 2> /dev/null || true; fi
}

# under_quiet_lock SCRIPT ARGS...: re-runs SCRIPT ARGS through scripts/quiet-run, which holds
# `flock -x` on QUIET_LOCK (/tmp/ratelimit-quiet.lock) while it runs and leaves QUIET_WANT
# (/tmp/ratelimit-quiet.want) asking builders to pause, waiting at most QUIET_WAIT (3600 s).
# Returns (runs on here) only when the lock is already held (RATELIMIT_QUIET_HELD) or
# QUIET_LOCK is empty: a correctness run, never figures.
under_quiet_lock() {
  : "${QUIET_LOCK=/tmp/ratelimit-quiet.lock}"
  : "${QUIET_WAIT:=3600}"
  : "${QUIET_WANT=/tmp/ratelimit-quiet.want}"
  if [ -n "$QUIET_LOCK" ] && [ -z "${RATELIMIT_QUIET_HELD:-}" ]; then
    QUIET_LOCK=$QUIET_LOCK QUIET_WANT=$QUIET_WANT QUIET_WAIT=$QUIET_WAIT exec "$REPO_DIR/scripts/quiet-run" "$@"
  fi
}

free_port() {
  "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# wait_port HOST PORT SECONDS: until something accepts on HOST:PORT, at most SECONDS.
wait_port() {
  local i
  for ((i = 0; i < $3 * 20; i++)); do
    if (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; then return 0; fi
    sleep 0.05
  done
  return 1
}

# redis_start: a private redis-server on a free loopback port pinned to SERVER_CPU, without
# persistence. Sets REDIS_PORT, REDIS_PID, REDIS_DIR. redis_stop stops exactly that one.
redis_start() {
  REDIS_DIR=$(mktemp -d)
  REDIS_PORT=$(free_port)
  taskset -c "$SERVER_CPU" redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save '' \
    --appendonly no --dir "$REDIS_DIR" --daemonize no --loglevel warning \
    > "$REDIS_DIR/log" 2>&1 &
  REDIS_PID=$!
  local i
  for ((i = 0; i < 100; i++)); do
    redis-cli -p "$REDIS_PORT" ping > /dev/null 2>&1 && return 0
    sleep 0.05
  done
  cat "$REDIS_DIR/log" >&2
  die "redis-server did not answer on 127.0.0.1:$REDIS_PORT within 5 s"
}
redis_stop() {
  stop_pid "${REDIS_PID:-}"
  REDIS_PID=""
  [ -n "${REDIS_DIR:-}" ] && rm -rf "$REDIS_DIR"
  REDIS_DIR=""
}

# nginx_setup DIR: renders bench/peers/nginx/nginx.conf.in into DIR for a private nginx on two
# free loopback ports (NGX_PORT: HTTP/1.1, NGX_H2PORT: h2c) and checks it (nginx -t).
# nginx_start: starts it pinned to SERVER_CPU; NGX_MASTER (what nginx_stop stops) and
# NGX_WORKER (its one worker: what is measured). nginx_stop: stops it, by the master's pid.
nginx_setup() {
  NGX_DIR=$1
  NGX_PORT=$(free_port)
  NGX_H2PORT=$(free_port)
  mkdir -p "$NGX_DIR"
  sed -e "s#@RUN@#$NGX_DIR#g" -e "s#@WWW@#$PEERS_DIR/nginx/www#g" -e "s#@PORT@#$NGX_PORT#g" \
    -e "s#@H2PORT@#$NGX_H2PORT#g" "$PEERS_DIR/nginx/nginx.conf.in" > "$NGX_DIR/nginx.conf"
  nginx -t -q -p "$NGX_DIR/" -c "$NGX_DIR/nginx.conf" 2> "$NGX_DIR/test.log" ||
    { cat "$NGX_DIR/test.log" >&2; die "nginx -t"; }
}
nginx_start() {
  taskset -c "$SERVER_CPU" nginx -p "$NGX_DIR/" -c "$NGX_DIR/nginx.conf" -g 'daemon off;' \
    >> "$NGX_DIR/stdout.log" 2>&1 &
  NGX_MASTER=$!
  wait_port 127.0.0.1 "$NGX_PORT" 10 || { cat "$NGX_DIR/error.log" >&2; die "nginx did not listen on $NGX_PORT"; }
  local i
  NGX_WORKER=""
  for ((i = 0; i < 50; i++)); do
    NGX_WORKER=$(pgrep -P "$NGX_MASTER" | head -1 || true)
    [ -n "$NGX_WORKER" ] && break
    sleep 0.1
  done
  [ -n "$NGX_WORKER" ] || die "nginx started no worker"
}
nginx_stop() {
  if [ -n "${NGX_MASTER:-}" ]; then
    kill -TERM "$NGX_MASTER" 2> /dev/null || true
    wait "$NGX_MASTER" 2> /dev/null || true
    NGX_MASTER=""
  fi
}

# Sum of utime + stime, in clock ticks, of the given pids.
CLK_TCK=$(getconf CLK_TCK)
cpu_ticks() {
  local t=0 p st f
  for p in "$@"; do
    st=$(< "/proc/$p/stat")
    read -r -a f <<< "${st##*) }"   # fields after "(comm) ": f[11] utime, f[12] stime
    t=$((t + f[11] + f[12]))
  done
  echo "$t"
}

# Hypervisor steal on the two pinned cpus (/proc/stat, clock ticks): on a VM it, more than
# other work, explains a slow run.
steal_ticks() {
  awk -v a="cpu$CLIENT_CPU" -v b="cpu$SERVER_CPU" '$1 == a || $1 == b {n += $9} END {print n + 0}' /proc/stat
}

# Busy ticks (user, nice, system, irq, softirq) of the two pinned cpus: what ran on them,
# ours or not (measure() subtracts ours).
busy_ticks() {
  awk -v a="cpu$CLIENT_CPU" -v b="cpu$SERVER_CPU" '$1 == a || $1 == b {n += $2 + $3 + $4 + $7 + $8} END {print n + 0}' /proc/stat
}

# with_steal TICKS: the JSON line on stdin with "steal_s" added, the steal on both pinned cpus
# since steal_ticks answered TICKS (seconds). pair_table.py shows the largest per limiter.
with_steal() {
  python3 -c '
import json, sys
line = sys.stdin.read().strip()
d = json.loads(line); d["steal_s"] = round((int(sys.argv[2]) - int(sys.argv[1])) / int(sys.argv[3]), 3)
print(json.dumps(d))' "$1" "$(steal_ticks)" "$CLK_TCK"
}

# measure OUT CMD...: runs CMD pinned to CLIENT_CPU with its stdout in OUT, and sets
# MEAS_WALL (s), MEAS_CLIENT_CPU and MEAS_SERVER_CPU (fractions of one core over the run; the
# server = the pids in SRV_PIDS, if any), MEAS_STEAL_S (steal on both pinned cpus, seconds) and
# MEAS_OTHER_CPU: the pinned cpus' busy time that is neither the client's nor the server's,
# as a fraction of one core — other processes, kernel threads, and network softirq work the
# kernel charged to no process; near 0 on a quiet machine, it tells a run that shared its cores.
measure() {
  local out=$1; shift
  local tf; tf=$(mktemp)
  local t0 t1 s0 s1 u s e st0 st1 b0 b1
  # shellcheck disable=SC2086
  t0=$(cpu_ticks ${SRV_PIDS:-}); s0=$(date +%s%N); st0=$(steal_ticks); b0=$(busy_ticks)
  /usr/bin/time -f '%U %S %e' -o "$tf" taskset -c "$CLIENT_CPU" "$@" > "$out"
  s1=$(date +%s%N); st1=$(steal_ticks); b1=$(busy_ticks)
  # shellcheck disable=SC2086
  t1=$(cpu_ticks ${SRV_PIDS:-})
  MEAS_STEAL_S=$(awk -v a="$st0" -v b="$st1" -v hz="$CLK_TCK" 'BEGIN {printf "%.3f", (b - a) / hz}')
  read -r u s e < "$tf"
  rm -f "$tf"
  MEAS_WALL=$(awk -v a="$s0" -v b="$s1" 'BEGIN {printf "%.3f", (b - a) / 1e9}')
  MEAS_CLIENT_CPU=$(awk -v u="$u" -v s="$s" -v w="$MEAS_WALL" 'BEGIN {printf "%.3f", (u + s) / w}')
  MEAS_SERVER_CPU=$(awk -v a="$t0" -v b="$t1" -v hz="$CLK_TCK" -v w="$MEAS_WALL" \
    'BEGIN {printf "%.3f", (b - a) / hz / w}')
  MEAS_OTHER_CPU=$(awk -v b="$((b1 - b0))" -v hz="$CLK_TCK" -v w="$MEAS_WALL" -v c="$MEAS_CLIENT_CPU" \
    -v sv="$MEAS_SERVER_CPU" 'BEGIN {o = b / hz / w - c - sv; printf "%.3f", o < 0 ? 0 : o}')
}

# with_measure_fields: the JSON object on stdin, printed with measure()'s figures added
# (client_cpu, server_cpu, steal_s, other_cpu).
with_measure_fields() {
  "$PY" -c '
import json, sys
d = json.loads(sys.stdin.read())
d.update(zip(("client_cpu", "server_cpu", "steal_s", "other_cpu"), map(float, sys.argv[1:])))
print(json.dumps(d), flush=True)' "$MEAS_CLIENT_CPU" "$MEAS_SERVER_CPU" "$MEAS_STEAL_S" "$MEAS_OTHER_CPU"
}

# wrk_json PEER WORKLOAD KIND URL [SCRIPT_ENV...]: one wrk run (-t WRK_THREADS -c WRK_CONNS
# -d WRK_DURATION, pinned to CLIENT_CPU) with bench/peers/wrk/workload.lua; prints one JSON line:
# requests_per_s (KIND=allow) or denials_per_s (KIND=deny), latency, errors, CPU of both sides
# and of others on the pinned cpus (other_cpu).
# SCRIPT_ENV are NAME=VALUE settings for workload.lua (WRK_MODE, WRK_KEYS, WRK_PREFIX, ...).
wrk_json() {
  local peer=$1 workload=$2 kind=$3 url=$4; shift 4
  local out; out=$(mktemp)
  local cpu
  cpu=$( (for kv in "$@"; do export "${kv?}"; done
          measure "$out" wrk -t"$WRK_THREADS" -c"$WRK_CONNS" -d"$WRK_DURATION" --timeout 5s \
            -s "$PEERS_DIR/wrk/workload.lua" "$url"
          echo "$MEAS_CLIENT_CPU $MEAS_STEAL_S $MEAS_SERVER_CPU $MEAS_OTHER_CPU") )
  local summary; summary=$(sed -n 's/^WRKJSON //p' "$out")
  rm -f "$out"
  [ -n "$summary" ] || { log "wrk printed no summary for $peer $workload"; return 1; }
  "$PY" - "$peer" "$workload" "$kind" "$summary" $cpu "${SRV_PIDS:-}" <<'PY'
import json, sys
peer, workload, kind, summary, client_cpu, steal_s, server_cpu, other_cpu = sys.argv[1:9]
has_server = len(sys.argv) > 9 and sys.argv[9].strip() != ""
d = json.loads(summary)
metric, value = ("denials_per_s", d["non2xx_per_s"]) if kind == "deny" else ("requests_per_s", d["rps"])
out = {"peer": peer, "workload": workload, "metric": metric, "value": value, "unit": "req/s"}
out.update({k: d[k] for k in ("requests", "seconds", "rps", "non2xx", "ok_per_s", "p50_us", "p99_us", "max_us")})
out["socket_errors"] = d["err_connect"] + d["err_read"] + d["err_write"] + d["err_timeout"]
out["client_cpu"] = float(client_cpu)
out["steal_s"] = float(steal_s)
out["other_cpu"] = float(other_cpu)
if has_server:
    out["server_cpu"] = float(server_cpu)
print(json.dumps(out), flush=True)
PY
}
