#!/usr/bin/python3
"""bench/peers/summarize.py — result lines (JSON, one per run) -> markdown tables.

usage: summarize.py RESULTS.jsonl [MORE.jsonl ...]
Lines that are not JSON objects with peer, workload, metric, value and unit are skipped (so the
output of any script here can be fed as is). Runs are grouped by (workload, peer, metric); each
row gives n, the median, min, max, spread = (max - min) / median, and the medians of the extras
that are present (latency, CPU, denials, errors), one table per workload family.
"""
import json
import statistics
import sys

FAMILIES = [
    ("inproc", "In process, one thread"),
    ("remote", "Through Redis (client on one core, Redis on the other)"),
    ("exact", "Exactness under concurrency (allowed; must equal the limit)"),
    ("http", "HTTP: wrk -> server"),
    ("redis", "One Redis, redis-benchmark"),
]
EXTRAS = [
    ("p50_us", "p50"), ("p99_us", "p99"), ("server_cpu", "server CPU"),
    ("client_cpu", "client CPU"), ("denied", "denied"), ("non2xx", "non-2xx"),
    ("errors", "errors"), ("socket_errors", "socket errors"),
]
REQUIRED = ("peer", "workload", "metric", "value", "unit")


def read(paths):
    groups = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if not line.startswith("{"):
                    continue
                try:
                    d = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(d, dict) and all(k in d for k in REQUIRED):
                    groups.setdefault((d["workload"], d["peer"], d["metric"]), []).append(d)
    return groups


def number(v, unit=""):
    if unit == "count":
        return f"{v:.0f}"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def extra(key, v):
    if key.endswith("_us"):
        return f"{v / 1000:.2f} ms" if v >= 1000 else f"{v:.0f} µs"
    if key.endswith("_cpu"):
        return f"{v * 100:.0f} %"
    return f"{v:,.0f}"


def main(paths):
    groups = read(paths)
    if not groups:
        print("no result lines found", file=sys.stderr)
        return 1
    for prefix, title in FAMILIES + [("", "Other")]:
        rows = sorted(k for k in groups if k[0].startswith(prefix) and
                      (prefix or not any(k[0].startswith(p) for p, _ in FAMILIES)))
        if not rows:
            continue
        keys = [k for k, _ in EXTRAS if any(k in d for r in rows for d in groups[r])]
        print(f"### {title}\n")
        print("| workload | peer | metric | n | median | min | max | spread | "
              + " | ".join(dict(EXTRAS)[k] for k in keys) + " |")
        print("|" + " --- |" * (8 + len(keys)))
        for r in rows:
            runs = groups[r]
            values = [d["value"] for d in runs]
            med = statistics.median(values)
            unit = runs[0]["unit"]
            spread = (max(values) - min(values)) / med if med else 0
            cells = [r[0], r[1], r[2], str(len(values)), f"{number(med, unit)} {unit}",
                     number(min(values), unit), number(max(values), unit), f"{spread:.0%}"]
            for k in keys:
                present = [d[k] for d in runs if k in d]
                cells.append(extra(k, statistics.median(present)) if present else "")
            print("| " + " | ".join(cells) + " |")
        print()
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
