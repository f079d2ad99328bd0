#!/usr/bin/env python3
"""bench/peers/pair_table.py RESULTS PEER — the tables of a same-run comparison: per (workload,
limiter) the medians of decisions/s, Redis CPU µs per decision (server_cpu / decisions/s),
p50/p99 and the largest hypervisor steal, then every other limiter's ratios to PEER.
RESULTS holds the JSON lines of bench/peers/README.md (decisions_per_s rows; others ignored).
Used by bench/redis_vs_rlf.sh (PEER node-rlf-redis) and bench/clients/python_vs_limits.sh."""
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith('{'):
        continue
    j = json.loads(line)
    if j.get('metric') != 'decisions_per_s':
        continue
    us = j['server_cpu'] * 1e6 / j['value'] if j.get('server_cpu') is not None and j['value'] else float('nan')
    rows.setdefault((j['workload'], j['peer']), []).append(
        (j['value'], us, j['p50_us'], j['p99_us'], j.get('denied', 0) + j.get('errors', 0),
         j.get('steal_s', float('nan'))))
med = lambda xs: statistics.median(xs)
print('| workload | limiter | decisions/s (median) | Redis CPU µs/decision | p50 / p99 µs | runs (decisions/s) | denied+errors | steal s (max of runs) |')
print('| --- | --- | --- | --- | --- | --- | --- | --- |')
summary = {}
for (w, p), v in sorted(rows.items()):
    d = med(x[0] for x in v); us = med(x[1] for x in v)
    p50 = med(x[2] for x in v); p99 = med(x[3] for x in v)
    summary[(w, p)] = (d, us, p99)
    runs = ', '.join(f'{x[0]:.0f}' for x in v)
    print(f'| {w} | {p} | {d:,.0f} | {us:.2f} | {p50:.0f} / {p99:.0f} | {runs} | {sum(x[4] for x in v)} | '
          f'{max(x[5] for x in v):.2f} |')
peer = sys.argv[2]
ratios = [(w, p) for (w, p) in summary if p != peer and (w, peer) in summary]
if ratios:
    print()
    print('| workload | limiter | decisions/s ratio (ours / peer) | Redis CPU per decision ratio | p99 ratio |')
    print('| --- | --- | --- | --- | --- |')
    for w, p in sorted(ratios):
        o, q = summary[(w, p)], summary[(w, peer)]
        print(f'| {w} | {p} | {o[0] / q[0]:.2f} | {o[1] / q[1]:.2f} | {o[2] / q[2]:.2f} |')
