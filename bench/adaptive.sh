#!/usr/bin/env bash
# bench/adaptive.sh — issue 30's done-when against the real ratelimitd: a backend of 20 workers ×
# 20 ms (capacity 1,000/s; `ratelimit-bench adaptive`, in the generator's process) behind
# ratelimitd's leases, driven open loop at 0.3× capacity (5 s: the unloaded p99), 3× (20 s), then
# 3× with the workers halved (20 s) — once per policy: the adaptive estimators (Gradient2, AIMD,
# Vegas; min 1, initial 20, max 200) and fixed limits 20 and 100; then `classes20` (limit 20,
# critical + sheddable with headroom 0.5, max_wait 1 s) at 2× with each arrival critical or
# sheddable at 50 % (refusals and waits by class). ratelimitd (memory store, one
# worker thread) pinned to SERVER_CPU, the generator to CLIENT_CPU; each run on a fresh key.
# Prints each run's table to stderr, one JSON line per run (+ client_cpu, server_cpu, steal_s,
# other_cpu of lib.sh measure()) to stdout, and the medians per policy to stderr.
# usage: scripts/quiet-run bench/adaptive.sh > results.jsonl
# env: RUNS (3), CLIENT_CPU (0), SERVER_CPU (1), POLICIES ("gradient2 aimd vegas fixed20 fixed100 classes20"),
#      RATELIMITD, BENCH (build/bin/...), BENCH_ARGS (extra ratelimit-bench adaptive flags)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
source "$ROOT/bench/peers/lib.sh"
RATELIMITD=${RATELIMITD:-$ROOT/build/bin/ratelimitd}
BENCH=${BENCH:-$ROOT/build/bin/ratelimit-bench}
POLICIES=${POLICIES:-"gradient2 aimd vegas fixed20 fixed100 classes20"}
[ -x "$RATELIMITD" ] && [ -x "$BENCH" ] || die "build ratelimitd and ratelimit-bench first (cmake --build --preset default)"
PORT=$(free_port)
TMP=$(mktemp -d)
SRV_PID=""
trap 'stop_pid "$SRV_PID"; rm -rf "$TMP"' EXIT
cat > "$TMP/adaptive.yaml" <<YAML
listen: 127.0.0.1:$PORT
threads: 1
store: { type: memory }
policies:
  gradient2: { algorithm: concurrency, limit: adaptive, estimator: gradient2, min_limit: 1, initial_limit: 20, max_limit: 200, lease_ttl: 30s }
  aimd: { algorithm: concurrency, limit: adaptive, estimator: aimd, min_limit: 1, initial_limit: 20, max_limit: 200, lease_ttl: 30s }
  vegas: { algorithm: concurrency, limit: adaptive, estimator: vegas, min_limit: 1, initial_limit: 20, max_limit: 200, lease_ttl: 30s }
  fixed20: { algorithm: concurrency, limit: 20, lease_ttl: 30s }
  fixed100: { algorithm: concurrency, limit: 100, lease_ttl: 30s }
  classes20: { algorithm: concurrency, limit: 20, lease_ttl: 30s, max_wait: 1s, max_queue: 10000, classes: [{ name: critical }, { name: sheddable, headroom: 0.5 }] }
YAML
taskset -c "$SERVER_CPU" "$RATELIMITD" --config "$TMP/adaptive.yaml" > "$TMP/server.log" 2>&1 &
SRV_PID=$!
wait_port 127.0.0.1 "$PORT" 10 || die "ratelimitd did not listen: $(tail -3 "$TMP/server.log")"

for ((round = 1; round <= RUNS; round++)); do
  for policy in $POLICIES; do
    log "round $round: $policy"
    args=(--policy "$policy")
    # Priority classes: critical and sheddable at 50 % each, 2x capacity, no halving.
    [ "$policy" = classes20 ] && args+=(--load 2 --halved-seconds 0 --critical-share 0.5)
    # shellcheck disable=SC2086
    # BENCH_ARGS first: classes20's --load / --halved-seconds win (the last of a flag given twice).
    SRV_PIDS=$SRV_PID measure "$TMP/out" "$BENCH" adaptive --target "127.0.0.1:$PORT" ${BENCH_ARGS:-} "${args[@]}" \
      --key "run$round" --seed "$round" --json || die "ratelimit-bench adaptive failed: $(cat "$TMP/out")"
    grep -v '^{' "$TMP/out" >&2
    grep '^{' "$TMP/out" | with_measure_fields | tee -a "$TMP/all.jsonl"
  done
done

"$PY" - "$TMP/all.jsonl" <<'PY' >&2
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {}
for r in rows:
    by.setdefault(r["policy"], []).append(r)
print(f"{'policy':10} {'unloaded p99':>12} {'3x p99':>8} {'ratio':>6} {'goodput':>8} {'halved p99':>10} "
      f"{'2nd half':>9} {'settles at':>10} {'within 10 % after':>17} {'steal s':>7}  (medians of {len(next(iter(by.values())))})")
for p, rs in by.items():
    m = lambda k: statistics.median(r[k] for r in rs)
    if p == "classes20":
        print(f"{p:10} 2x, critical/sheddable 50/50: critical refused {m('critical_refused'):.0f}, wait p99 "
              f"{m('critical_wait_p99_ms'):.1f} ms; sheddable refused {m('sheddable_refused'):.0f}; goodput "
              f"{100 * m('goodput_share'):.0f} %")
        continue
    print(f"{p:10} {m('unloaded_p99_ms'):9.1f} ms {m('loaded_p99_ms'):5.1f} ms {m('p99_ratio'):5.2f}x "
          f"{100 * m('goodput_share'):6.0f} % {m('halved_p99_ms'):7.1f} ms {m('halved_settled_p99_ms'):6.1f} ms "
          f"{m('settled_limit'):10.0f} "
          f"{m('limit_follow_s'):15.0f} s {max(r['steal_s'] for r in rs):7.2f}")
PY
