#!/usr/bin/python3
"""bench/peers/python/limits_peer.py — Debian's python3-limits (2.8) as a peer.

usage: limits_peer.py STORAGE STRATEGY WORKLOAD     (bench/peers/python_limits.sh runs it)
  STORAGE   memory | redis            (MemoryStorage | RedisStorage at REDIS_URL)
  STRATEGY  fixed | moving            (FixedWindowRateLimiter | MovingWindowRateLimiter)
  WORKLOAD  hot | keys                inproc.* (memory) or remote.c1.* (redis): one thread, one
                                      hit at a time, 1 key or NKEYS round-robin, allow limit
            exact | exact-stress      exact.10of200.t50[.stress]: limit 10 per minute, 200 hits
                                      from 50 threads started by a barrier on one fresh key
                                      (stress: sys.setswitchinterval(1e-6))
env: WARMUP_S (1), MEASURE_S (3), NKEYS (100000), REDIS_URL, SERVER_PIDS, WORKLOAD_SUFFIX
Prints one JSON line (bench/peers/README.md). The clock is read once per 256 hits.
"""
import json
import os
import sys
import threading
import time
import uuid

import limits
from limits import RateLimitItemPerMinute
from limits.storage import MemoryStorage, RedisStorage
from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter

ALLOW_LIMIT = 10**9  # per minute: never reached during a run
BATCH = 256


def env_float(name, default):
    value = float(os.environ.get(name, default))
    if value <= 0:
        raise SystemExit(f"{name} must be positive")
    return value


def server_seconds(pids):
    ticks = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        fields = stat[stat.rindex(")") + 2:].split()
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def emit(**fields):
    print(json.dumps(fields), flush=True)


_stores = []  # a strategy holds only a weak reference to its storage: keep it alive here


def limiter_for(storage, strategy):
    store = MemoryStorage() if storage == "memory" else RedisStorage(os.environ["REDIS_URL"])
    _stores.append(store)
    cls = FixedWindowRateLimiter if strategy == "fixed" else MovingWindowRateLimiter
    return cls(store)


def loop(limiter, item, keys, seconds, i):
    """Hits keys[i], keys[i+1], ... for at least `seconds`; returns (ops, denied, secs, next i)."""
    hit, n, ops, denied = limiter.hit, len(keys), 0, 0
    t0 = time.perf_counter()
    while True:
        for _ in range(BATCH):
            if not hit(item, keys[i]):
                denied += 1
            i = i + 1 if i + 1 < n else 0
        ops += BATCH
        elapsed = time.perf_counter() - t0
        if elapsed >= seconds:
            return ops, denied, elapsed, i


def throughput(storage, strategy, workload):
    nkeys = 1 if workload == "hot" else int(os.environ.get("NKEYS", "100000"))
    run = uuid.uuid4().hex[:8]  # fresh keys for every run, even on a shared Redis
    keys = [f"{run}k{i}" for i in range(nkeys)]
    limiter = limiter_for(storage, strategy)
    item = RateLimitItemPerMinute(ALLOW_LIMIT)
    for k in keys:  # warm-up, part 1: every key once
        limiter.hit(item, k)
    _, _, _, i = loop(limiter, item, keys, env_float("WARMUP_S", "1"), 0)
    pids = os.environ.get("SERVER_PIDS", "").split()
    srv0, cli0 = server_seconds(pids), time.process_time()
    ops, denied, secs, _ = loop(limiter, item, keys, env_float("MEASURE_S", "3"), i)
    extra = {"client_cpu": (time.process_time() - cli0) / secs}
    if pids:
        extra["server_cpu"] = (server_seconds(pids) - srv0) / secs
    base = "inproc" if storage == "memory" else "remote.c1"
    name = f"{base}.{'hot' if workload == 'hot' else '100k'}" + os.environ.get("WORKLOAD_SUFFIX", "")
    emit(peer=f"py-limits-{storage}-{strategy}", workload=name, metric="decisions_per_s",
         value=ops / secs, unit="ops/s", ops=ops, denied=denied, seconds=secs, keys=nkeys,
         limits_version=limits.__version__, **extra)
    return denied == 0


def exact(storage, strategy, stress):
    if stress:
        sys.setswitchinterval(1e-6)
    limiter = limiter_for(storage, strategy)
    item = RateLimitItemPerMinute(10)
    key = "exact-" + uuid.uuid4().hex
    threads, per_thread = 50, 4
    barrier = threading.Barrier(threads)
    allowed, errors = [0] * threads, [0] * threads

    def work(t):
        barrier.wait()
        for _ in range(per_thread):
            try:
                allowed[t] += 1 if limiter.hit(item, key) else 0
            except Exception:  # noqa: BLE001 - counted and reported
                errors[t] += 1

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    emit(peer=f"py-limits-{storage}-{strategy}",
         workload="exact.10of200.t50" + (".stress" if stress else ""), metric="allowed",
         value=sum(allowed), unit="count", expected=10, requests=threads * per_thread,
         threads=threads, errors=sum(errors))
    return sum(allowed) == 10 and sum(errors) == 0


def main():
    args = sys.argv[1:]
    if (len(args) != 3 or args[0] not in ("memory", "redis") or args[1] not in ("fixed", "moving")
            or args[2] not in ("hot", "keys", "exact", "exact-stress")):
        print(__doc__, file=sys.stderr)
        return 2
    storage, strategy, workload = args
    if workload in ("hot", "keys"):
        ok = throughput(storage, strategy, workload)
    else:
        ok = exact(storage, strategy, workload == "exact-stress")
    return 0 if ok else 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)  # MemoryStorage leaves a timer thread running: do not wait for it
