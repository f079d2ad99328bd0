#!/usr/bin/env python3
"""compare_distributed.py — checks ratelimit-sim's distributed model against the real daemons:
the same trace replayed through N real ratelimitd sharing one real redis-server (one policy per
consistency mode: exact, lease, async), and through `ratelimit-sim --instances N`; then through N
real ratelimitd in R regions (instance i in region i % R), each region its own redis-server
reached by the others through a delay proxy (ratelimit-delay-proxy, cross-region latency), and
through `ratelimit-sim --instances N --regions R`. Admitted requests are counted from outside (by
the client, per key and window) against the exact answer min(limit, offered) for that window.

usage: compare_distributed.py --bin BUILD/bin [--trace FILE.csv] [--instances 3]
         [--modes exact,lease,async,regions] [--limit 50] [--window 1s] [--sync-interval 100ms]
         [--lease-max 5] [--rate 300] [--windows 3] [--regions 2] [--cross-rtt 60ms]

Without --trace a bounded hot-key trace is generated: one key at --rate requests/s, evenly
spaced, from 10 ms into each window to 850 ms, for --windows windows. The quiet tail of each
window keeps a request from being sent in one window and decided in the next (client and
daemons read the same clock), so counting by send time is counting by the daemon's window.
A --trace is CSV `seconds,key` (ratelimit-sim's CSV form), replayed in real time from a window
boundary so the daemons' epoch-aligned windows are the simulator's; request j goes to instance
j % N (the simulator's round-robin). Redis and the daemons run on free loopback ports and are
stopped by pid; every wait is bounded.

Checks, per mode, in both the daemon (measured) and the model (simulated):
  exact  — admitted == exact in every window.
  lease  — never over the limit in any window (no tolerance: it holds by construction), and
           under-admission per window <= (instances - 1) * lease_max (docs/distributed.md).
  async  — worst window over the limit <= the documented bound
           (instances - 1) * ceil(one instance's rate * (sync_interval + round trip)).
  regions — never under the exact answer in a window (the views of the others are G-counter
           reads, never above their counts), and worst window over the limit <= the documented
           bound (regions - 1) * ceil(one region's rate * (sync_interval + cross rtt)) — 2 x cross
           rtt when it is sync_interval or more (include/ratelimit/regions.h).
And agreement: |measured - simulated| worst-window over- (async) and under-admission (lease)
<= TOLERANCE = ceil(one instance's offered rate * sync_interval / 4) units per window: the model
is the daemon's per-key algorithm (the same core functions decide when slices end and pushes
leave, on a grid that starts at the key's first request), so what remains is timing noise — a
real push lands up to half a push period late (timer and scheduling jitter on a busy machine),
which shifts at most one instance's admissions in a quarter interval. (It was twice that, + 1,
while the model ticked on a grid of its own.) The total over the run must agree within
TOLERANCE per window. For regions, REGIONS_TOLERANCE = ceil(one region's offered rate *
sync_interval) + 1: each daemon reads the other regions every sync_interval on a grid that starts
when it does (the model's starts at offset i/N of the interval), so a view can be up to one
interval older or fresher than the model's: at most one region's requests in one interval. The
cross rtt given to the model is measured (PINGs through the proxy). Exit 0 when all hold, 1 when
one fails, 2 when something cannot start. The daemons, Redis and proxies: distributed_daemons.py."""
import argparse
import http.client
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../tests/support"))
from loopback import die_with_parent, free_port, listening, wait_for  # noqa: E402
from distributed_daemons import CONFIG, seconds, start_daemons, start_regions, stop  # noqa: E402  (this directory)


def replay(requests, conns, policy, window_s):
    """Sends the trace in real time from the next window boundary (trace time t goes out at
    boundary + t - the trace's first window start). Returns per (key, window): offered,
    admitted; the median round trip; how many requests straddled a window edge; and the trace as
    it was really sent (each request at its send time, mapped back to trace time), which is what
    the model is given: a client that fell behind and caught up sent a burst the nominal trace
    does not have."""
    base_w = math.floor(requests[0][0] / window_s)
    now = time.time()
    boundary = (math.floor(now / window_s) + (2 if now % window_s > window_s * 0.8 else 1)) * window_s
    offered, admitted, rtts, straddled, sent_trace = {}, {}, [], 0, []
    for j, (t, key) in enumerate(requests):
        delay = boundary + t - base_w * window_s - time.time()
        if delay > 0:
            time.sleep(delay)
        sent = time.time()
        sent_trace.append((sent - boundary + base_w * window_s, key))
        c = conns[j % len(conns)]
        c.request("POST", "/v1/acquire", json.dumps({"key": key, "policy": policy}),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        done = time.time()
        rtts.append(done - sent)
        w = math.floor(sent / window_s)
        straddled += w != math.floor(done / window_s)
        offered[(key, w)] = offered.get((key, w), 0) + 1
        if r.status == 200:
            admitted[(key, w)] = admitted.get((key, w), 0) + 1
        elif r.status != 429:
            raise RuntimeError("POST /v1/acquire answered %d: %s" % (r.status, r.read()))
    return offered, admitted, sorted(rtts)[len(rtts) // 2], straddled, sent_trace


def measure(requests, conns, policy, window_s):
    """Replays until a run has no request straddling a window edge (at most five times, each
    logged): a stalled machine measures nothing, and the model is never compared with it."""
    for attempt in range(5):
        got = replay(requests, conns, policy, window_s)
        if got[3] == 0:
            break
        print("%s: %d requests straddled a window edge (stall); replaying" % (policy, got[3]))
    return got


def simulate(a, trace, rtt_s, extra):
    sim = subprocess.run([os.path.join(a.bin, "ratelimit-sim"), "--trace", trace, "--format", "json",
                          "--limit", str(a.limit), "--window", a.window, "--instances", str(a.instances),
                          "--sync-interval", a.sync_interval, "--rtt", "%dus" % max(1, int(rtt_s * 1e6)),
                          "--lease-max", str(a.lease_max)] + extra,
                         capture_output=True, text=True, timeout=60)
    if sim.returncode != 0:
        raise RuntimeError("ratelimit-sim failed: " + sim.stderr)
    return {m["mode"]: m for m in json.loads(sim.stdout)["runs"][0]["distributed"]["modes"]
            if m["algorithm"] == "fixed_window"}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--trace")
    ap.add_argument("--instances", type=int, default=3)
    ap.add_argument("--modes", default="exact,lease,async,regions")
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--window", default="1s")
    ap.add_argument("--sync-interval", default="100ms")
    ap.add_argument("--lease-max", type=int, default=5)
    ap.add_argument("--rate", type=float, default=300)
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--regions", type=int, default=2)
    ap.add_argument("--cross-rtt", default="60ms")
    a = ap.parse_args()
    modes = a.modes.split(",")
    if any(m not in ("exact", "lease", "async", "regions") for m in modes) or a.instances < 2:
        print("--modes takes exact, lease, async, regions; --instances at least 2")
        return 2
    if "regions" in modes and not 2 <= a.regions <= a.instances:
        print("--regions must be 2 ... --instances")
        return 2
    window_s, sync_s = seconds(a.window), seconds(a.sync_interval)
    work = tempfile.mkdtemp(prefix="compare-distributed-")
    trace = a.trace
    if not trace:
        trace = os.path.join(work, "hot.csv")
        with open(trace, "w") as f:
            for w in range(a.windows):
                n = int(0.84 * window_s * a.rate)
                for i in range(n):
                    f.write("%.6f,hot\n" % (w * window_s + 0.01 * window_s + i / a.rate))
    requests = []
    with open(trace) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) >= 2 and parts[0][:1].isdigit():
                requests.append((float(parts[0]), parts[1]))
    if not requests:
        print("no requests in " + trace)
        return 2
    procs, ok = [], True
    try:
        redis_port = free_port()
        procs.append(subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(redis_port),
                                       "--save", "", "--appendonly", "no", "--dir", work],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      preexec_fn=die_with_parent))

        if not wait_for(lambda: listening(redis_port, 0.5), 10):
            print("redis-server did not listen")
            return 2
        single = [m for m in modes if m != "regions"]
        configs = []
        for i in range(a.instances if single else 0):
            port = free_port()
            configs.append((port, CONFIG.format(port=port, redis=redis_port, limit=a.limit, window=a.window,
                                                sync=a.sync_interval, lease_max=a.lease_max, run=os.getpid())))
        try:
            ports = start_daemons(a, work, "i", configs, procs)
        except RuntimeError as e:
            print(e)
            return 2
        conns = [http.client.HTTPConnection("127.0.0.1", p, timeout=5) for p in ports]
        # A request answered in a later window than it was sent in cannot be attributed to one
        # window: the machine stalled (a shared CI core, a page fault storm). That run measures
        # nothing, so it is replayed (measure()); the model is never compared with a run that
        # straddled.
        measured = {m: measure(requests, conns, m, window_s) for m in single}
        cross_s = 0.0
        if "regions" in modes:
            for p in procs[1:]:
                stop(p)  # the single-store daemons: the regions' own come next
            try:
                rports, cross_s = start_regions(a, work, redis_port, procs)
            except RuntimeError as e:
                print(e)
                return 2
            rconns = [http.client.HTTPConnection("127.0.0.1", p, timeout=5) for p in rports]
            measured["regions"] = measure(requests, rconns, "global", window_s)

        rtt_s = max(r[2] for r in measured.values())
        rows = {}
        try:
            for m in modes:
                sent_csv = os.path.join(work, "sent-%s.csv" % m)
                with open(sent_csv, "w") as f:
                    for t, key in measured[m][4]:
                        f.write("%.6f,%s\n" % (t, key))
                extra = ["--regions", str(a.regions), "--cross-rtt", "%dus" % int(cross_s * 1e6)] if m == "regions" else []
                rows[m] = simulate(a, sent_csv, rtt_s, extra)[m]
        except RuntimeError as e:
            print(e)
            return 2
        duration_s = max(requests[-1][0] - requests[0][0], 1e-3)
        windows = len({math.floor(t / window_s) for t, _ in requests})
        # One instance's offered rate over the busy part of the trace (the generated trace is
        # busy 84 % of each window).
        per_instance = len(requests) / a.instances / min(duration_s, windows * window_s * 0.84)
        tolerance = math.ceil(per_instance * sync_s / 4)
        admit_rate = a.limit / window_s / a.instances  # ceiling on one instance's sustained rate
        documented = (a.instances - 1) * math.ceil(max(per_instance, admit_rate) * (sync_s + rtt_s))
        lease_under = (a.instances - 1) * a.lease_max
        # One region's offered rate (region 0 holds the most instances) and its documented bound.
        per_region = per_instance * len(range(0, a.instances, a.regions))
        region_rate = max(per_region, a.limit / window_s)
        stale = sync_s + (cross_s if cross_s < sync_s else 2 * cross_s)
        regions_bound = (a.regions - 1) * math.ceil(region_rate * stale)
        regions_tolerance = math.ceil(per_region * sync_s) + 1
        print("%d instances, one redis-server; %d requests in %d windows, limit %d per %s; "
              "sync_interval %s, lease_max %d; client round trip (median) %d us" %
              (a.instances, len(requests), windows, a.limit, a.window, a.sync_interval, a.lease_max,
               int(rtt_s * 1e6)))
        print("tolerance %d units per window (one instance's requests in sync_interval / 4); "
              "async bound %d, lease under-admission bound %d" % (tolerance, documented, lease_under))
        if "regions" in modes:
            print("regions: %d regions, cross rtt %d us (measured through the proxy); bound %d, tolerance %d "
                  "(one region's requests in sync_interval, + 1)" %
                  (a.regions, int(cross_s * 1e6), regions_bound, regions_tolerance))
        print("%-6s %-9s %8s %6s %11s %12s %9s" %
              ("mode", "", "admitted", "exact", "window over", "window under", "straddled"))

        def check(cond, what):
            nonlocal ok
            if not cond:
                ok = False
                print("FAIL: " + what)

        for m in modes:
            offered, admitted, _, straddled, _ = measured[m]
            exact = {k: min(a.limit, n) for k, n in offered.items()}
            over = max([admitted.get(k, 0) - e for k, e in exact.items()] + [0])
            under = max([e - admitted.get(k, 0) for k, e in exact.items()] + [0])
            total, total_exact = sum(admitted.values()), sum(exact.values())
            s = rows[m]
            print("%-6s %-9s %8d %6d %11d %12d %9d" % (m, "measured", total, total_exact, over, under, straddled))
            print("%-6s %-9s %8d %6d %11d %12d %9s" % (m, "simulated", s["admitted"], s["exact_admitted"],
                                                      s["worst_window_over"], s["worst_window_under"], "-"))
            check(straddled == 0, "%s: %d requests were sent in one window and answered in the next "
                  "(the machine stalled > 100 ms; counts by send time are unreliable)" % (m, straddled))
            if m == "exact":
                check(over == 0 and under == 0, "exact: the daemons differ from min(limit, offered)")
                check(s["worst_window_over"] == 0 and s["worst_window_under"] == 0, "exact: the model is not exact")
            if m == "lease":
                check(over == 0, "lease: the daemons admitted %d over the limit in a window" % over)
                check(s["worst_window_over"] == 0, "lease: the model admitted over the limit")
                check(under <= lease_under and s["worst_window_under"] <= lease_under,
                      "lease: under-admission beyond (instances - 1) x lease_max = %d" % lease_under)
                check(abs(under - s["worst_window_under"]) <= tolerance,
                      "lease: window under-admission measured %d vs simulated %d" % (under, s["worst_window_under"]))
            if m == "async":
                # The bound at the rate actually sent (the model computes it from the sent trace:
                # a client that fell behind and caught up sent faster than the nominal rate).
                bound = max(documented, s["bound"])
                check(over <= bound and s["worst_window_over"] <= bound,
                      "async: window over-admission beyond the documented bound %d" % bound)
                check(abs(over - s["worst_window_over"]) <= tolerance,
                      "async: window over-admission measured %d vs simulated %d" % (over, s["worst_window_over"]))
            if m == "regions":
                check(under == 0 and s["worst_window_under"] == 0,
                      "regions: under-admitted in a window (measured %d, simulated %d)" % (under, s["worst_window_under"]))
                bound = max(regions_bound, s["bound"])
                check(over <= bound and s["worst_window_over"] <= bound,
                      "regions: window over-admission beyond the documented bound %d" % bound)
                check(abs(over - s["worst_window_over"]) <= regions_tolerance,
                      "regions: window over-admission measured %d vs simulated %d" % (over, s["worst_window_over"]))
            allowed = (regions_tolerance if m == "regions" else tolerance) * windows
            diff = (total - total_exact) - (s["admitted"] - s["exact_admitted"])
            check(abs(diff) <= allowed, "%s: total over/under-admission differs by %d (> %d)" % (m, diff, allowed))
        print("ok" if ok else "FAILED")
        return 0 if ok else 1
    finally:
        for p in reversed(procs):
            stop(p)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
