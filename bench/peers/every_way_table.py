#!/usr/bin/python3
"""bench/peers/every_way_table.py — bench/every_way_in.sh's result lines -> one markdown table.

usage: every_way_table.py RESULTS.jsonl [RESP_PIPELINE]

One row per way into a decision, the library's in-process figures first, then each ratelimitd
front end beside the peer that speaks the same protocol (nginx `limit_req` for HTTP/1.1 and h2c,
grpc-go for gRPC, a Redis function for RESP). Figures are medians over the rounds; the "per
core" ratio is the peer's server CPU per decision over ours (above 1: ours costs less), and the
"same rounds" ratio is our decisions/s over the peer's, round by round, median (a run whose
client was the bottleneck shows it here and not in the per-core figure).
Invariant: a ratio is printed only when both sides ran in every round (same count of lines);
otherwise the row says so — a figure never compares runs from different rounds.
"""
import json
import statistics
import sys

SERVER_ROWS = [  # (kind in rls_vs_http.sh's workload names, way in, load, peer kind, peer name)
    ("http", "ratelimitd HTTP/1.1 `POST /v1/acquire`", "wrk, {n} connections", "nginx", "nginx `limit_req`, HTTP/1.1"),
    ("h2c", "ratelimitd h2c `POST /v1/acquire`", "h2load, {n} streams", "nginx_h2c", "nginx `limit_req`, h2c"),
    ("h2load", "ratelimitd gRPC `ShouldRateLimit`", "h2load, {n} streams", "grpcgo", "grpc-go (the floor peer)"),
    ("resp", "ratelimitd RESP `CL.THROTTLE`", "redis-benchmark, {n} connections", "redisfn", "Redis function `cl_throttle`"),
    ("resp_pipe", "ratelimitd RESP `CL.THROTTLE`, pipelined", "redis-benchmark, {n} in flight, -P {p}", "redisfn_pipe",
     "Redis function, pipelined"),
]
LIB_ROWS = [
    ("lib.store.hot.fixed_window", "library: `MemoryStore` fixed window (the servers' decision)"),
    ("lib.store.hot.token_bucket", "library: `MemoryStore` token bucket"),
    ("lib.store_manual_clock.hot.token_bucket", "library: token bucket, manual clock (no clock read)"),
]


def first_inflight(rows):  # the table is of one in-flight count: the first the run measured
    return next(d["workload"].split(".c")[-1] for d in rows if d.get("peer") != "library")


def per_decision_us(d):
    return d["server_cpu"] / d["value"] * 1e6 if d["value"] > 0 else float("inf")


def main(path, pipeline):
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    lib = {d["workload"]: d for d in rows if d.get("peer") == "library"}
    by = {}
    for d in rows:
        if d.get("peer") != "library" and d["workload"].split(".c")[-1] == first_inflight(rows):
            by.setdefault(d["workload"].split(".")[1], []).append(d)
    out = ["| way in | load | decisions/s | p50 / p99 | µs of server CPU per decision | decisions per core |"
           " peer | peer's µs per decision | per core, peer / ours | decisions/s, ours / peer (same rounds) |",
           "| --- | --- | ---: | --- | ---: | ---: | --- | ---: | ---: | ---: |"]
    for workload, name in LIB_ROWS:
        d = lib.get(workload)
        if d:
            ns = d["value"]
            out.append(f"| {name} | 1 thread, {d['repetitions']} repetitions | {1e9 / ns:,.0f} | — |"
                       f" {ns / 1000:.3f} | {1e9 / ns:,.0f} | — | — | — | — |")
    steal = max([d.get("steal_s", 0) for d in rows] or [0])
    other = max([d.get("other_cpu", 0) for d in rows] or [0])
    for kind, name, load, peer_kind, peer_name in SERVER_ROWS:
        ours, peer = by.get(kind, []), by.get(peer_kind, [])
        if not ours:
            continue
        med = lambda rs, key: statistics.median(d[key] for d in rs)
        us = statistics.median(per_decision_us(d) for d in ours)
        n = ours[0]["workload"].split(".c")[-1]
        cells = [name, load.format(n=n, p=pipeline), f"{med(ours, 'value'):,.0f}",
                 f"{med(ours, 'p50_us') / 1000:.2f} / {med(ours, 'p99_us') / 1000:.2f} ms",
                 f"{us:.1f}", f"{1e6 / us:,.0f}"]
        if peer and len(peer) == len(ours):
            peer_us = statistics.median(per_decision_us(d) for d in peer)
            same = statistics.median(a["value"] / b["value"] for a, b in zip(ours, peer))
            cells += [peer_name, f"{peer_us:.1f}", f"{peer_us / us:.2f}", f"{same:.2f}"]
        else:
            cells += [peer_name + (" (not in every round)" if peer else " (not run)"), "—", "—", "—"]
        out.append("| " + " | ".join(cells) + " |")
    print("\n".join(out))
    print(f"\nrounds: {len(by.get('http', []))}; hypervisor steal at most {steal:.2f} s in a run;"
          f" other work on the pinned cpus at most {other * 100:.0f} % of a core")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2] if len(sys.argv) == 3 else "10")
