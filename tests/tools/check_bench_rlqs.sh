#!/usr/bin/env bash
# check_bench_rlqs.sh ROOT BIN_DIR — bench/rlqs.sh run as a correctness check of a few seconds
# (one round, one second measured, small fleets), against the real ratelimitd and
# ratelimit-bench: every JSON line must show answers with one action per bucket, no stream
# error, and — paced — each stream's one report a second (not a figure: only that the load is
# what the script says it is).
set -euo pipefail
ROOT=$1 BIN=$2
out=$(RUNS=1 MEASURE_SECONDS=1 SHAPES="10x2:shared" PACED_SHAPES="20x3:own" \
      RATELIMITD="$BIN/ratelimitd" BENCH="$BIN/ratelimit-bench" "$ROOT/bench/rlqs.sh" 2>&1) || {
  echo "$out"; exit 1; }
echo "$out"
python3 - "$out" <<'PY'
import json, sys
lines = [json.loads(l) for l in sys.argv[1].splitlines() if l.startswith("{")]
assert [l["workload"] for l in lines] == ["rlqs.max.10x2.shared", "rlqs.paced.20x3.own"], lines
for l in lines:
    assert l["errors"] == 0 and l["bad_answers"] == 0, l
    assert l["value"] > 0 and l["bucket_reports_per_s"] == round(l["value"] * l["buckets"]), l
    assert 0 <= l["server_cpu"] and "server_us_per_bucket_report" in l, l
paced = lines[1]
assert 10 <= paced["value"] <= 30, f"20 streams reporting once a second gave {paced['value']} reports/s"
assert "one core at 1 s" in sys.argv[1]
PY
