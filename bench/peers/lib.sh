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
  if [ -n "${REDIS_PID:-}" ]; then
    kill "$REDIS_PID" 2> /dev/null || true
    wait "$REDIS_PID" 2> /dev/null || true
    REDIS_PID=""
  fi
  [ -n "${REDIS_DIR:-}" ] && rm -rf "$REDIS_DIR"
  REDIS_DIR=""
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
