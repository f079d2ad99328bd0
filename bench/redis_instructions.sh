#!/usr/bin/env bash
# bench/redis_instructions.sh — Redis CPU per decision as instructions, not seconds: RedisStore
# (at several batch sizes) beside rate-limiter-flexible's RateLimiterRedis (ioredis), each
# against its own redis-server run under `valgrind --tool=callgrind`.
#
# Why: bench/redis_vs_rlf.sh reads the Redis pid's CPU seconds, which on a shared or busy
# machine move with everything else (cache misses, wake-ups, a starved client making small
# batches). Callgrind counts the instructions Redis executes: the same for the same binary and
# requests whatever else the machine does (valgrind-3.19 `Ir`). It is not a throughput figure —
# Redis runs ~50x slower under valgrind, so the clients' batches fill up; this is why our side is
# measured at fixed batch sizes (--max-batch 1, 8, 64), which bound what a real run can see.
#
# Method, per limiter: start redis-server under callgrind on a free loopback port, start the
# client (1 key, CONC in flight, an allow limit: no denial), wait SETTLE_S (connections made,
# scripts/functions loaded), zero callgrind's counters and Redis' command statistics at the same
# moment, let it run WINDOW_S, dump the counters, read the decisions Redis made from INFO
# commandstats (ours: HINCRBY calls, one per fixed-window acquire, or HMGET calls, one per
# decision of the other algorithms — and of the fixed window before its one-field layout, so
# builds before it can be counted too; the peer: EVALSHA+EVAL calls, one per consume()), and
# stop everything by pid. Instructions per decision = Ir / decisions.
#
# usage: bench/redis_instructions.sh
# env:   CONC (50) SETTLE_S (4) WINDOW_S (5) BATCHES ("1 8 64") PEER (1)
#        ALGORITHM (fixed_window; the others for our side only: the peer is a fixed window)
#        NKEYS (1: one hot key; more: that many keys round-robin, the peer's "keys" workload —
#        with 100000, nearly every decision in the window is a key's first)
#        BENCH (build/bin/ratelimit-bench)
#        KEEP_DIR  keep the callgrind files there (for callgrind_annotate), else they are deleted
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/peers/lib.sh
: "${CONC:=50}"
: "${SETTLE_S:=4}"
: "${WINDOW_S:=5}"
: "${BATCHES:=1 8 64}"
: "${PEER:=1}"
: "${ALGORITHM:=fixed_window}"
: "${NKEYS:=1}"
: "${BENCH:=build/bin/ratelimit-bench}"
[ -x "$BENCH" ] || die "$BENCH not found: cmake --build --preset default --target ratelimit-bench"
command -v valgrind > /dev/null || ratelimit_install_deps valgrind
[ "$PEER" = 1 ] && peers_install

work=$(mktemp -d)
vg_pid="" client_pid=""
stop_all() {
  [ -n "$client_pid" ] && kill "$client_pid" 2> /dev/null || true
  [ -n "$client_pid" ] && wait "$client_pid" 2> /dev/null || true
  [ -n "$vg_pid" ] && kill "$vg_pid" 2> /dev/null || true
  [ -n "$vg_pid" ] && wait "$vg_pid" 2> /dev/null || true
  client_pid="" vg_pid=""
}
if [ -n "${KEEP_DIR:-}" ]; then
  mkdir -p "$KEEP_DIR"
  trap 'stop_all; cp "$work"/cg.* "$KEEP_DIR"/ 2> /dev/null; rm -rf "$work"' EXIT
else
  trap 'stop_all; rm -rf "$work"' EXIT
fi

# measure NAME DECISION_COMMANDS CLIENT...: prints "NAME decisions instructions per_decision
# script_calls" (script_calls: FCALL + EVALSHA + EVAL, so decisions / calls is the batch size seen).
measure() {
  local name=$1 commands=$2
  shift 2
  local port
  port=$(free_port)
  valgrind --tool=callgrind --callgrind-out-file="$work/cg.$name" \
    redis-server --bind 127.0.0.1 --port "$port" --save '' --appendonly no --dir "$work" \
    > "$work/vg.$name.log" 2>&1 &
  vg_pid=$!
  local i
  for ((i = 0; i < 600; i++)); do redis-cli -p "$port" ping > /dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "$port" ping > /dev/null 2>&1 || die "redis-server under valgrind did not start ($work/vg.$name.log)"
  # Code Redis runs for the first time is slow under valgrind (translation), so a client's first
  # connection (FUNCTION LOAD, SCRIPT LOAD) may exceed its connect timeout: try up to 5 times.
  local attempt
  for ((attempt = 1; attempt <= 5; attempt++)); do
    PORT=$port "$@" > "$work/client.$name.log" 2>&1 &
    client_pid=$!
    sleep "$SETTLE_S"
    kill -0 "$client_pid" 2> /dev/null && break
    wait "$client_pid" 2> /dev/null || true
    client_pid=""
    log "$name: the client ended early (attempt $attempt/5): $(tail -1 "$work/client.$name.log")"
  done
  [ -n "$client_pid" ] || die "$name: the client did not start against Redis under valgrind"
  callgrind_control --zero "$vg_pid" > /dev/null
  redis-cli -p "$port" CONFIG RESETSTAT > /dev/null
  sleep "$WINDOW_S"
  callgrind_control --dump="$name" "$vg_pid" > /dev/null
  local stats
  stats=$(redis-cli -p "$port" INFO commandstats)
  stop_all
  local ir decisions=0 c n
  ir=$(grep -h '^summary:' "$work"/cg."$name".* | tail -1 | awk '{print $2}')
  for c in $commands; do
    n=$(sed -n "s/^cmdstat_$c:calls=\([0-9]*\),.*/\1/p" <<< "$stats")
    decisions=$((decisions + ${n:-0}))
  done
  [ "$decisions" -gt 0 ] || die "$name: Redis made no decision in the window"
  local calls=0
  for c in fcall evalsha eval; do
    n=$(sed -n "s/^cmdstat_$c:calls=\([0-9]*\),.*/\1/p" <<< "$stats")
    calls=$((calls + ${n:-0}))
  done
  echo "$name $decisions $ir $((ir / decisions)) $calls"
}

results=$work/results
log "redis-server $(redis-server --version | awk '{print $3}') under $(valgrind --version); $ALGORITHM, $CONC in flight on $NKEYS key(s); load average $(cut -d' ' -f1-3 /proc/loadavg)"
client_s=$((SETTLE_S * 5 + WINDOW_S + 30))
for b in $BATCHES; do
  log "ratelimit, batch $b"
  measure "ratelimit-batch$b" "hincrby hmget" sh -c "exec \"$BENCH\" throughput --store redis://127.0.0.1:\$PORT/0 \
    --algorithm $ALGORITHM --keys $NKEYS --inflight $CONC --seconds $client_s --warmup 0 --max-batch $b" >> "$results"
done
if [ "$PEER" = 1 ]; then
  log "node-rlf-redis"
  workload=hot
  [ "$NKEYS" = 1 ] || workload=keys
  measure node-rlf-redis "evalsha eval" sh -c "REDIS_PORT=\$PORT CONC=$CONC NKEYS=$NKEYS WARMUP_S=0.1 \
    MEASURE_S=$client_s exec node bench/peers/node/redis.js $workload" >> "$results"
fi

echo
echo "| limiter | decisions in window | decisions / script call | Redis instructions | instructions / decision | ratio to peer |"
echo "| --- | --- | --- | --- | --- | --- |"
peer_per=$(awk '$1 == "node-rlf-redis" {print $4}' "$results")
while read -r name decisions ir per calls; do
  ratio="—"
  [ -n "$peer_per" ] && ratio=$(awk -v a="$per" -v b="$peer_per" 'BEGIN {printf "%.2f", a / b}')
  per_call=$(awk -v d="$decisions" -v c="$calls" 'BEGIN {if (c > 0) printf "%.1f", d / c; else print "—"}')
  printf '| %s | %d | %s | %d | %d | %s |\n' "$name" "$decisions" "$per_call" "$ir" "$per" "$ratio"
done < "$results"
