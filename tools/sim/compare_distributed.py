#!/usr/bin/env python3
"""compare_distributed.py — checks ratelimit-sim's distributed model against the real thing:
the same trace replayed through N real ratelimitd instances sharing one real redis-server
(a consistency mode: async or lease), and through `ratelimit-sim --instances N`; the
over-admission measured (per key and window, admitted beyond the limit; and in total against
the exact answer) must agree with the simulated one within a stated tolerance.

usage: compare_distributed.py --bin BUILD/bin --trace FILE.csv [--instances 3] [--mode async]
         [--limit 20] [--window 1s] [--sync-interval 100ms] [--lease-max 0] [--speed 1.0]

The trace is CSV `seconds,key` (ratelimit-sim's CSV form), replayed in real time (--speed
scales it) from a window boundary, so the daemons' epoch-aligned windows are the simulator's;
request j goes to instance j % N (the simulator's round-robin). The daemons and Redis run on
free loopback ports and are stopped by pid; every wait is bounded.

Tolerance, in units per window: one instance's admissions within one staleness interval
(sync_interval + the measured round trip) — how far the real push times, which the model
places on an exact grid, can move what an instance has not yet seen — plus 1 for a request
sent at a window's edge. Printed with the figures; exit 0 when both over-admission figures
agree within it, 1 when not, 2 when something could not start."""
import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(pred, timeout, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


def seconds(text):
    for unit, scale in (("ms", 1e-3), ("us", 1e-6), ("s", 1.0), ("m", 60.0)):
        if text.endswith(unit) and text[:-len(unit)].replace(".", "", 1).isdigit():
            return float(text[:-len(unit)]) * scale
    return float(text)


CONFIG = """listen: 127.0.0.1:{port}
threads: 1
store: {{ type: redis, url: "redis://127.0.0.1:{redis}/0", on_failure: closed }}
policies:
  p: {{ algorithm: fixed_window, limit: {limit}, window: {window}, consistency: {mode}, sync_interval: {sync}{lease} }}
"""


def stop(proc):
    if proc and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--trace", required=True)
    ap.add_argument("--instances", type=int, default=3)
    ap.add_argument("--mode", choices=("async", "lease"), default="async")
    ap.add_argument("--limit", type=int, default=20)
    ap.add_argument("--window", default="1s")
    ap.add_argument("--sync-interval", default="100ms")
    ap.add_argument("--lease-max", type=int, default=0)
    ap.add_argument("--speed", type=float, default=1.0)
    a = ap.parse_args()
    window_us = int(round(seconds(a.window) * 1e6))
    requests = []
    with open(a.trace) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) >= 2 and parts[0][:1].isdigit():
                requests.append((float(parts[0]) / a.speed, parts[1]))
    if not requests:
        print("no requests in " + a.trace)
        return 2
    work = tempfile.mkdtemp(prefix="compare-distributed-")
    procs = []
    try:
        redis_port = free_port()
        redis = subprocess.Popen(["redis-server", "--bind", "127.0.0.1", "--port", str(redis_port),
                                  "--save", "", "--appendonly", "no", "--dir", work],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(redis)
        ports = []
        for i in range(a.instances):
            port = free_port()
            cfg = os.path.join(work, "i%d.yaml" % i)
            lease = ", lease_max: %d" % a.lease_max if a.mode == "lease" and a.lease_max else ""
            with open(cfg, "w") as f:
                f.write(CONFIG.format(port=port, redis=redis_port, limit=a.limit, window=a.window,
                                      mode=a.mode, sync=a.sync_interval, lease=lease))
            log = open(os.path.join(work, "i%d.log" % i), "w")
            procs.append(subprocess.Popen([os.path.join(a.bin, "ratelimitd"), "--config", cfg],
                                          stdout=log, stderr=subprocess.STDOUT))
            ports.append(port)

        def ready(port):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
                c.request("GET", "/readyz")
                return c.getresponse().status == 200
            except OSError:
                return False
        if not all(wait_for(lambda p=p: ready(p), 10) for p in ports):
            print("ratelimitd did not become ready; logs in " + work)
            return 2
        conns = [http.client.HTTPConnection("127.0.0.1", p, timeout=5) for p in ports]
        # Start at a window boundary plus the trace's own offset in its window.
        t_first = requests[0][0]
        now_us = time.time() * 1e6
        start_us = (now_us // window_us + 2) * window_us - (t_first * 1e6) % window_us
        admitted, rtts = {}, []
        for j, (t, key) in enumerate(requests):
            due = (start_us + (t - t_first) * 1e6) / 1e6
            delay = due - time.time()
            if delay > 0:
                time.sleep(delay)
            sent = time.time()
            c = conns[j % a.instances]
            c.request("POST", "/v1/acquire", json.dumps({"key": key, "policy": "p"}),
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            rtts.append(time.time() - sent)
            if r.status == 200:
                w = int(sent * 1e6) // window_us
                admitted[(key, w)] = admitted.get((key, w), 0) + 1
        measured_over = max([n - a.limit for n in admitted.values()] + [0])
        measured_admitted = sum(admitted.values())
        rtt_us = int(sorted(rtts)[len(rtts) // 2] * 1e6)
        # The simulator, on the same trace with the measured round trip.
        sim = subprocess.run([os.path.join(a.bin, "ratelimit-sim"), "--trace", a.trace, "--format", "json",
                              "--limit", str(a.limit), "--window", a.window, "--instances", str(a.instances),
                              "--sync-interval", a.sync_interval, "--rtt", "%dus" % max(rtt_us, 1),
                              "--lease-max", str(a.lease_max)],
                             capture_output=True, text=True, timeout=120)
        if sim.returncode != 0:
            print("ratelimit-sim failed: " + sim.stderr)
            return 2
        modes = json.loads(sim.stdout)["runs"][0]["distributed"]["modes"]
        row = [m for m in modes if m["algorithm"] == "fixed_window" and m["mode"] == a.mode][0]
        exact = [m for m in modes if m["algorithm"] == "fixed_window" and m["mode"] == "exact"][0]
        duration_s = max(requests[-1][0] - t_first, 1e-3)
        per_instance = len(requests) / a.instances / duration_s
        stale_s = seconds(a.sync_interval) + rtt_us / 1e6
        tolerance = int(per_instance * stale_s + 0.999) + 1
        print("mode %s, %d instances, %d requests, round trip %d us" % (a.mode, a.instances, len(requests), rtt_us))
        print("worst window over the limit: measured %d, simulated %d (bound %d)" %
              (measured_over, row["worst_window_over"], row["bound"]))
        print("admitted: measured %d, simulated %d, exact %d" %
              (measured_admitted, row["admitted"], exact["admitted"]))
        over_m = measured_admitted - exact["admitted"]
        over_s = row["admitted"] - exact["admitted"]
        print("tolerance: %d units per window (one instance's admissions in sync + rtt, + 1)" % tolerance)
        ok = abs(measured_over - row["worst_window_over"]) <= tolerance
        windows = max(1, int(duration_s * 1e6 / window_us) + 1)
        ok_total = abs(over_m - over_s) <= tolerance * windows
        print("%s: window over-admission within tolerance; %s: total over-admission (%d vs %d) within %d" %
              ("ok" if ok else "FAIL", "ok" if ok_total else "FAIL", over_m, over_s, tolerance * windows))
        return 0 if ok and ok_total else 1
    finally:
        for p in procs:
            stop(p)


if __name__ == "__main__":
    sys.exit(main())
