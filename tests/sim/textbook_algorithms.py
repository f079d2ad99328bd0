#!/usr/bin/env python3
"""Independent reference for ratelimit-sim's tables (run by tests/sim/patterns_table_test.cc).

Generates pattern A, B or C itself and runs the five algorithms as the textbook (and the
table in DESIGN.md) defines them, with exact rationals (fractions.Fraction) — no code shared
with the C++ library. Prints one JSON object: the request stream (count, first/last in µs)
and per algorithm the requests, admitted, denied, clients limited, peak admitted in any
half-open interval [s, s + P) (P = the window, or burst/rate for the buckets), admitted
attack requests (pattern C), and for the leaky bucket the departure times (t + level/rate,
rounded up to the µs).

usage: textbook_algorithms.py A|B|C [--seed 42] [--token-fill full|N]
"""
import argparse
import json
import math
import random
from fractions import Fraction as F

p = argparse.ArgumentParser()
p.add_argument("pattern", choices="ABC")
p.add_argument("--seed", type=int, default=42)
p.add_argument("--limit", type=int, default=10)
p.add_argument("--window", type=F, default=F(1))      # seconds
p.add_argument("--token-rate", type=F, default=F(10))
p.add_argument("--token-burst", type=int, default=20)
p.add_argument("--leaky-rate", type=F, default=F(10))
p.add_argument("--leaky-burst", type=int, default=20)
p.add_argument("--token-fill", default=None)           # default: C empty, else full
a = p.parse_args()


def to_us(seconds):
    """The simulator's rule: llround(seconds * 1e6), on the double product, exactly."""
    return math.floor(F(seconds * 1e6) + F(1, 2))


# The request streams, exactly as the issue states them: (time in µs, is an attack request).
if a.pattern == "A":
    rng, t, stream = random.Random(a.seed), 0.0, []
    while True:
        t += rng.expovariate(6)
        if t >= 30:
            break
        stream.append((to_us(t), False))
elif a.pattern == "B":
    stream = [(to_us(5.0 + i * 0.02 / 30), False) for i in range(30)]
else:
    stream = [(to_us(w + i / 10), False) for w in range(3) for i in range(10)]
    stream += [(to_us(3.9 + i * 0.01), True) for i in range(10)]
    stream += [(to_us(4.0 + i * 0.01), True) for i in range(10)]

L, W = a.limit, a.window
fill = a.token_fill if a.token_fill is not None else ("0" if a.pattern == "C" else "full")
tokens0 = F(a.token_burst) if fill == "full" else F(fill)


def fixed_window():
    counts = {}
    def decide(t):
        k = math.floor(t / W)
        if counts.get(k, 0) < L:
            counts[k] = counts.get(k, 0) + 1
            return True
        return False
    return decide


def sliding_log():
    log = []
    def decide(t):
        if sum(1 for x in log if t - W < x <= t) < L:
            log.append(t)
            return True
        return False
    return decide


def sliding_counter():
    counts = {}
    def decide(t):
        k = math.floor(t / W)
        elapsed = t - k * W
        est = counts.get(k - 1, 0) * (1 - elapsed / W) + counts.get(k, 0)
        if math.floor(est) + 1 <= L:
            counts[k] = counts.get(k, 0) + 1
            return True
        return False
    return decide


def token_bucket():
    s = {"tokens": tokens0, "last": F(0)}  # the run starts at t = 0
    def decide(t):
        s["tokens"] = min(F(a.token_burst), s["tokens"] + (t - s["last"]) * a.token_rate)
        s["last"] = t
        if s["tokens"] >= 1:
            s["tokens"] -= 1
            return True
        return False
    return decide


departures = []
def leaky_bucket():
    s = {"level": F(0), "last": None}
    def decide(t):
        if s["last"] is not None:
            s["level"] = max(F(0), s["level"] - (t - s["last"]) * a.leaky_rate)
        s["last"] = t
        if math.floor(s["level"]) + 1 <= a.leaky_burst:
            s["level"] += 1
            departures.append(math.ceil((t + s["level"] / a.leaky_rate) * 10**6))
            return True
        return False
    return decide


algorithms = {
    "fixed_window": (fixed_window(), W),
    "sliding_window_log": (sliding_log(), W),
    "sliding_window_counter": (sliding_counter(), W),
    "token_bucket": (token_bucket(), F(a.token_burst) / a.token_rate),
    "leaky_bucket": (leaky_bucket(), F(a.leaky_burst) / a.leaky_rate),
}
out = {"pattern": a.pattern, "requests": len(stream), "first_us": stream[0][0],
       "last_us": stream[-1][0], "algorithms": {}}
for name, (decide, peak_window) in algorithms.items():
    admitted = []
    attack = 0
    for us, is_attack in stream:
        if decide(F(us, 10**6)):
            admitted.append(F(us, 10**6))
            attack += is_attack
    peak = max((sum(1 for y in admitted if x <= y < x + peak_window) for x in admitted), default=0)
    n = len(admitted)
    out["algorithms"][name] = {
        "requests": len(stream), "admitted": n, "denied": len(stream) - n,
        "clients_limited": 1 if n < len(stream) else 0, "peak_admitted": peak,
        "attack_requests": sum(1 for _, x in stream if x), "attack_admitted": attack}
out["algorithms"]["leaky_bucket"]["departures_us"] = departures
print(json.dumps(out))
