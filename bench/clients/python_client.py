#!/usr/bin/python3
"""bench/clients/python_client.py — the Python client (clients/python) beside Debian's
python3-limits on the same Redis, 50 decisions in flight, one JSON line per run
(bench/peers/README.md's format; bench/clients/python_vs_limits.sh drives and tabulates it).

usage: python_client.py LIMITER hot|keys
  LIMITER  ours-async     AsyncRedisLimiter, CONC asyncio tasks (batched FCALL rl<version>_batch)
           ours-threads   RedisLimiter, CONC threads (batched across threads)
           limits-fixed   limits FixedWindowRateLimiter + RedisStorage, CONC threads
           limits-moving  limits MovingWindowRateLimiter + RedisStorage, CONC threads
  Workload: a cost-1 hit under an allow limit of 10^9 per minute (ours: fixed_window; the moving
  window is the log-like peer, ours sliding_window_log is not compared: its log would grow by
  every hit of the run), 1 key or NKEYS round-robin.
env: REDIS_URL, CONC (50), WARMUP_S (1), MEASURE_S (3), NKEYS (10000), SERVER_PIDS,
     MAX_IN_FLIGHT (ours: the limiter's max_in_flight; unset = its default),
     HIREDIS (1; 0 hides python3-hiredis from redis-py, so every limiter parses in Python),
     RATELIMIT_REDIS_LIBRARY, PYTHONPATH including clients/python."""
import asyncio
import json
import os
import sys
import threading
import time

if os.environ.get("HIREDIS", "1") == "0":
    sys.modules["hiredis"] = None  # `import hiredis` fails: redis-py falls back to its Python parser

ALLOW = 10**9
CONC = int(os.environ.get("CONC", 50))
WARMUP_S = float(os.environ.get("WARMUP_S", 1))
MEASURE_S = float(os.environ.get("MEASURE_S", 3))
NKEYS = int(os.environ.get("NKEYS", 10000))
OURS = {"max_in_flight": int(os.environ["MAX_IN_FLIGHT"])} if os.environ.get("MAX_IN_FLIGHT") else {}
PIDS = os.environ.get("SERVER_PIDS", "").split()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peers", "python"))
from limits_peer import server_seconds as peer_server_seconds  # noqa: E402 (the peers' one CPU reader)


def _hiredis():
    from redis.utils import HIREDIS_AVAILABLE
    return HIREDIS_AVAILABLE


def server_seconds():
    return peer_server_seconds(PIDS)


def emit(peer, keys, ops, seconds, srv, cli, lat, errors):
    lat.sort()
    pct = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] if lat else 0
    line = {"peer": peer, "workload": f"remote.c{CONC}.{'hot' if keys == 1 else f'{keys // 1000}k'}",
            "metric": "decisions_per_s", "value": ops / seconds, "unit": "ops/s", "ops": ops, "errors": errors,
            "seconds": seconds, "keys": keys, "concurrency": CONC, "p50_us": pct(0.5), "p99_us": pct(0.99),
            "client_cpu": cli / seconds, "hiredis": _hiredis()}
    if PIDS:
        line["server_cpu"] = srv / seconds
    print(json.dumps(line), flush=True)


def measure_threads(peer, keys, decide):
    """CONC threads in a closed loop; counts completions inside the measured window."""
    state = {"measuring": False, "stop": False, "ops": 0, "errors": 0, "next": 0}
    lat, lock = [], threading.Lock()

    def worker():
        while not state["stop"]:
            with lock:
                i = state["next"]
                state["next"] = (i + 1) % len(keys)
            t0 = time.perf_counter()
            ok = decide(keys[i])
            dt = (time.perf_counter() - t0) * 1e6
            with lock:
                if not ok:
                    state["errors"] += 1
                if state["measuring"]:
                    state["ops"] += 1
                    lat.append(dt)
    threads = [threading.Thread(target=worker) for _ in range(CONC)]
    for t in threads:
        t.start()
    time.sleep(WARMUP_S)
    s0, c0, t0 = server_seconds(), time.process_time(), time.perf_counter()
    state["measuring"] = True
    time.sleep(MEASURE_S)
    state["measuring"] = False
    seconds, s1, c1 = time.perf_counter() - t0, server_seconds(), time.process_time()
    ops = state["ops"]
    state["stop"] = True
    for t in threads:
        t.join(timeout=30)
    emit(peer, len(keys), ops, seconds, s1 - s0, c1 - c0, lat, state["errors"])


async def measure_async(peer, keys, limiter):
    state = {"measuring": False, "stop": False, "ops": 0, "errors": 0, "next": 0}
    lat = []

    async def worker():
        while not state["stop"]:
            i = state["next"]
            state["next"] = (i + 1) % len(keys)
            t0 = time.perf_counter()
            d = await limiter.acquire("p", keys[i])
            if not d.allowed or d.reason != "within_limit":
                state["errors"] += 1
            if state["measuring"]:
                state["ops"] += 1
                lat.append((time.perf_counter() - t0) * 1e6)
    tasks = [asyncio.ensure_future(worker()) for _ in range(CONC)]
    await asyncio.sleep(WARMUP_S)
    s0, c0, t0 = server_seconds(), time.process_time(), time.perf_counter()
    state["measuring"] = True
    await asyncio.sleep(MEASURE_S)
    state["measuring"] = False
    seconds, s1, c1 = time.perf_counter() - t0, server_seconds(), time.process_time()
    ops = state["ops"]
    state["stop"] = True
    await asyncio.wait_for(asyncio.gather(*tasks), 30)
    emit(peer, len(keys), ops, seconds, s1 - s0, c1 - c0, lat, state["errors"])


def main():
    which, mode = sys.argv[1], sys.argv[2]
    url = os.environ["REDIS_URL"]
    prefix = f"bench{os.getpid()}x{int(time.time() * 1000)}"
    keys = ["k0"] if mode == "hot" else [f"k{i}" for i in range(NKEYS)]
    policies = {"p": {"algorithm": "fixed_window", "limit": ALLOW, "window": "60s"}}
    if which == "ours-async":
        from ratelimit_client import AsyncRedisLimiter

        async def run():
            lim = AsyncRedisLimiter(url, policies, key_prefix=prefix + ":", timeout=5, **OURS)
            await lim.connect()
            await measure_async("py-client-async", keys, lim)
            await lim.close()
        asyncio.run(run())
    elif which == "ours-threads":
        from ratelimit_client import RedisLimiter
        lim = RedisLimiter(url, policies, key_prefix=prefix + ":", timeout=5, **OURS)
        lim.connect()
        lim.redis.connection_pool.max_connections = CONC
        measure_threads("py-client-threads", keys, lambda k: lim.acquire("p", k).reason == "within_limit")
    else:
        from limits import RateLimitItemPerMinute
        from limits.storage import RedisStorage
        from limits.strategies import FixedWindowRateLimiter, MovingWindowRateLimiter
        storage = RedisStorage(url)
        cls = FixedWindowRateLimiter if which == "limits-fixed" else MovingWindowRateLimiter
        lim, item = cls(storage), RateLimitItemPerMinute(ALLOW)
        measure_threads(f"py-{which}", keys, lambda k: lim.hit(item, prefix, k))


if __name__ == "__main__":
    main()
