#!/usr/bin/env bash
# tests/tools/check_bench_peers.sh SOURCE_DIR — the benchmark peers stay runnable from the
# repository alone: no tracked file points outside it (a ../shared or /work path), every
# script of bench/peers parses (bash -n, Python compile), and summarize.py turns result lines
# into the expected table (median, min, max, spread) while skipping lines that are not results.
set -euo pipefail
src=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
cd "$src"
if git ls-files -z 2> /dev/null | xargs -0 grep -lE '\.\./shared/|/work/shared|/work/wt/' -- 2> /dev/null |
   grep -v '^tests/tools/check_bench_peers.sh$'; then
  fail "the files above refer to a path outside the repository"
fi
for f in bench/peers/*.sh bench/*.sh tools/ratelimitd/bench_vs_nginx.sh; do
  bash -n "$f" || fail "$f does not parse"
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for f in bench/peers/summarize.py bench/peers/python/limits_peer.py; do  # parse only: no .pyc
  python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' "$f" ||
    fail "$f does not parse"
done
cat > "$tmp/results.jsonl" <<'JSONL'
[12:00:00] a log line, not a result
{"peer": "p", "workload": "inproc.hot", "metric": "decisions_per_s", "value": 100.0, "unit": "ops/s", "denied": 0}
{"peer": "p", "workload": "inproc.hot", "metric": "decisions_per_s", "value": 300.0, "unit": "ops/s", "denied": 0}
{"peer": "p", "workload": "inproc.hot", "metric": "decisions_per_s", "value": 200.0, "unit": "ops/s", "denied": 0}
{"peer": "q", "workload": "exact.10of200", "metric": "allowed", "value": 10, "unit": "count", "errors": 0}
{"not": "a result"}
JSONL
table=$(python3 bench/peers/summarize.py "$tmp/results.jsonl")
grep -qF '| inproc.hot | p | decisions_per_s | 3 | 200 ops/s | 100 | 300 | 100% | 0 |' <<< "$table" ||
  fail "summarize.py table: $table"
grep -qF '| exact.10of200 | q | allowed | 1 | 10 count | 10 | 10 | 0% | 0 |' <<< "$table" ||
  fail "summarize.py table: $table"
echo "bench peers: self-contained, parse, summarize OK"
