"""test_conformance.py — clients/conformance/README.md's runner contract for the Python client:
every case of tests/vectors/*.json against real Redis (test time, every field of every decision
equal), through RedisLimiter step by step and through AsyncRedisLimiter with all cases at once
(batched calls); race.json through AsyncRedisLimiter (asyncio, batching) and RedisLimiter (50
threads)."""
import asyncio
import json
import os
import shutil
import sys
import unittest

from ratelimit_client import AsyncRedisLimiter, RedisLimiter, make_policy
from ratelimit_client.library import find_library
from support import CONFORMANCE_DIR, RUN_ID, VECTORS_DIR, await_window_room, in_flight, test_redis

# The library's algorithms (clients/conformance/algorithms.json, held to kAlgorithmTable by
# tests/redis/algorithm_table_test.cc): this client ports the rate ones, whose vectors run here.
# Concurrency limits (leases) are ratelimitd's API (ratelimit_client.ratelimitd), not this client's.
TABLE = json.load(open(os.path.join(CONFORMANCE_DIR, "algorithms.json")))["algorithms"]
NOT_PORTED = {"concurrency"}
ALGORITHMS = tuple(a["name"] for a in TABLE if a["kind"] == "rate")
FILES = [json.load(open(os.path.join(VECTORS_DIR, f"{a}.json"))) for a in ALGORITHMS]
RACE = json.load(open(os.path.join(CONFORMANCE_DIR, "race.json")))


def policy_of(algorithm, case):
    p = case["policy"]
    if algorithm in ("token_bucket", "leaky_bucket"):
        return make_policy("p", algorithm, rate=p["rate"], burst=p["burst"], mode=p.get("mode", "police"),
                           count_denied=case.get("count_denied", False))
    return make_policy("p", algorithm, limit=p["limit"], window=p["window_us"],
                       count_denied=case.get("count_denied", False), every_hit=case.get("every_hit", False))


def step_case(case, step):
    """The case as this step sees it: a step's own "policy" is the case's redefined (a reload)."""
    return {**case, "policy": step["policy"]} if "policy" in step else case


def room_for_race(rc):
    """The race's windows are a year long, so a boundary mid-race (the count reset or reweighted)
    is rare, not impossible (the next is 2026-12-18 00:00 UTC): each race starts with 60 s of room.
    A race takes well under a second, and a stalled call fails it by its 5 s timeout long before."""
    if "window_us" in rc["policy"]:
        await_window_room([rc["policy"]["window_us"] / 1e6], 60)


def compare(algorithm, case, i, step, d, failures):
    got = {"allowed": d.allowed, "reason": d.reason, "remaining": d.remaining, "reset_after_us": d.reset_after_us,
           "retry_after_us": d.retry_after_us, "delay_us": d.delay_us}
    capacity = case["policy"].get("limit", case["policy"].get("burst"))
    if got != step["expect"] or d.limit != capacity:
        failures.append(f"{algorithm}/{case['name']} step {i}: expected {step['expect']} limit {capacity}, got {got} limit {d.limit}")


class AlgorithmList(unittest.TestCase):
    def test_the_clients_list_is_the_librarys(self):
        from ratelimit_client import policy
        # Same order: an algorithm's index is its argument to the Redis functions.
        self.assertEqual(tuple(policy.ALGORITHMS), ALGORITHMS)
        self.assertEqual([a["index"] for a in TABLE], list(range(len(TABLE))))
        self.assertEqual({a["name"] for a in TABLE} - set(policy.ALGORITHMS), NOT_PORTED,
                         "an algorithm of the library that this client neither ports nor says it does not")


class Conformance(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.redis = test_redis()

    @classmethod
    def tearDownClass(cls):
        cls.redis.stop()

    def test_vectors_step_by_step(self):
        failures, cases = [], 0
        for f in FILES:
            for case in f["cases"]:
                cases += 1
                lim_prefix = f"conf:{RUN_ID}:py-seq:{f['algorithm']}:{case['name']}:"
                lim = RedisLimiter(self.redis.url, {"p": policy_of(f["algorithm"], case)}, on_failure="closed", timeout=5,
                                   key_prefix=lim_prefix)
                for i, step in enumerate(case["steps"]):
                    key = step.get("key", "k")
                    if step.get("op") == "reset":
                        lim.reset("p", key)
                        continue
                    sc = step_case(case, step)
                    # A redefined policy: a limiter of it on the same keys, as after a reload.
                    on = lim if sc is case else RedisLimiter(self.redis.url, {"p": policy_of(f["algorithm"], sc)},
                                                             on_failure="closed", timeout=5, key_prefix=lim_prefix)
                    fn = {"peek": on.peek, "report": on.report}.get(step.get("op"), on.acquire)
                    compare(f["algorithm"], sc, i, step, fn("p", key, step.get("cost", 1), now_us=step["t_us"]), failures)
                    if on is not lim:
                        on.close()
                self.assertEqual(lim.failures, 0)
                lim.close()
        self.assertGreaterEqual(cases, 40)
        self.assertEqual(failures, [])

    def test_vectors_all_cases_at_once_async(self):
        async def run_case(algorithm, case, failures):
            prefix = f"conf:{RUN_ID}:py-par:{algorithm}:{case['name']}:"
            lim = AsyncRedisLimiter(self.redis.url, {"p": policy_of(algorithm, case)}, on_failure="closed", timeout=5,
                                    key_prefix=prefix)
            for i, step in enumerate(case["steps"]):
                key = step.get("key", "k")
                if step.get("op") == "reset":
                    await lim.reset("p", key)
                    continue
                sc = step_case(case, step)
                on = lim if sc is case else AsyncRedisLimiter(self.redis.url, {"p": policy_of(algorithm, sc)},
                                                              on_failure="closed", timeout=5, key_prefix=prefix)
                fn = {"peek": on.peek, "report": on.report}.get(step.get("op"), on.acquire)
                compare(algorithm, sc, i, step, await fn("p", key, step.get("cost", 1), now_us=step["t_us"]), failures)
                if on is not lim:
                    await on.close()
            self.assertEqual(lim.failures, 0)
            await lim.close()

        async def main():
            failures = []
            await asyncio.wait_for(asyncio.gather(*(run_case(f["algorithm"], c, failures) for f in FILES for c in f["cases"])), 60)
            return failures
        self.assertEqual(asyncio.run(main()), [])

    def test_race_async(self):
        async def race(rc):
            lim = AsyncRedisLimiter(self.redis.url, {"p": policy_of(rc["algorithm"], rc | {"name": "race"})},
                                    key_prefix=f"conf:{RUN_ID}:py-race-async:", timeout=5)
            sem = asyncio.Semaphore(RACE["concurrency"])

            async def one(_):
                async with sem:
                    return await lim.acquire("p", rc["algorithm"])
            ds = await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(RACE["requests"]))), 30)
            await lim.close()
            return lim, ds
        for rc in RACE["cases"]:
            with self.subTest(rc["algorithm"]):
                room_for_race(rc)
                lim, ds = asyncio.run(race(rc))
                self.assertEqual(lim.failures, 0)
                self.assertEqual(sum(d.allowed for d in ds), rc["expect_admitted"])
                self.assertTrue(all(d.reason == "over_limit" for d in ds if not d.allowed))

    def test_race_threads(self):
        for rc in RACE["cases"]:
            with self.subTest(rc["algorithm"]):
                lim = RedisLimiter(self.redis.url, {"p": policy_of(rc["algorithm"], rc | {"name": "race"})},
                                   key_prefix=f"conf:{RUN_ID}:py-race-threads:", timeout=5)
                room_for_race(rc)
                ds = in_flight(RACE["requests"], RACE["concurrency"], lambda _: lim.acquire("p", rc["algorithm"]))
                self.assertEqual(lim.failures, 0)
                self.assertEqual(sum(d.allowed for d in ds), rc["expect_admitted"])
                lim.close()


if __name__ == "__main__":
    unittest.main()


class Packaging(unittest.TestCase):
    def test_the_built_package_carries_the_library(self):
        """Issue 31 defect 5: the package shipped no function library, so without
        RATELIMIT_REDIS_LIBRARY the constructor raised library_missing. setup.py's build step
        bundles the build's copy; the built package finds it with no environment variable."""
        import subprocess
        import tempfile
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        with tempfile.TemporaryDirectory() as tmp:  # a copy: the build's leftovers stay out of the source tree
            src, out = os.path.join(tmp, "src"), os.path.join(tmp, "out")
            shutil.copytree(here, src, ignore=shutil.ignore_patterns("tests", "__pycache__", "*.egg-info", "build"))
            r = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", out], cwd=src,
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            env = {k: v for k, v in os.environ.items() if k not in ("RATELIMIT_REDIS_LIBRARY", "PYTHONPATH")}
            probe = "import ratelimit_client.library as l; print(l.find_library().version)"
            r = subprocess.run([sys.executable, "-c", probe], cwd=out, env=env, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), find_library().version)
