"""test_cluster.py — the Redis back-ends on a real Redis Cluster (three primaries, support.Cluster;
issue 31): the client's hash slot is Redis' own; 200 acquires with 50 in flight on a limit of 10
admit exactly 10 on each of 30 keys spread over every primary at once (blocking and asyncio:
batches are cut per slot); acquire_many over many slots answers in order; a key's slot migrated
from one primary to another under load (MIGRATING/IMPORTING, the keys moved mid-round, then the
slot handed over: ASK, then MOVED) keeps an exact count — 350 of 600 per policy, no decision
answered by the failure policy."""
import asyncio
import logging
import threading
import unittest

from ratelimit_client import AsyncRedisLimiter, RedisLimiter
from ratelimit_client._cluster import slot_of
from support import RUN_ID, Cluster, await_window_room, in_flight

# redis-py 4.3's RedisCluster logs every MOVED, ASK and error reply with a traceback at ERROR;
# the redirections are what the migration test provokes, not failures.
logging.getLogger("redis.cluster").setLevel(logging.CRITICAL)

HOUR_S = 3600
KEYS = [f"user-{i}" for i in range(30)]


class ClusterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = Cluster()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def limiter(self, prefix, policies):
        # 30 s: a hang guard on a loaded machine, not a claim on speed.
        lim = RedisLimiter(self.cluster.url, policies, key_prefix=prefix, on_failure="closed", timeout=30)
        self.addCleanup(lim.close)
        return lim

    def test_the_hash_slot_is_the_one_redis_computes(self):
        keys = ["rl:{user-1}:api", "rl:{}:x", "no-tag", "{a}{b}", "rl:{ключ ✓}:p#log", "rl:{%7Bx%7D}:p", "x{}{y}", "x{y"]
        keys += [f"rl:{{k{i * 7919}}}:api" for i in range(50)]
        for k in keys:
            self.assertEqual(slot_of(k), self.cluster.clients[0].execute_command("CLUSTER", "KEYSLOT", k), k)

    def test_exactly_10_of_200_on_each_of_30_keys_over_every_primary(self):
        prefix = f"rl-race-{RUN_ID}:"
        lim = self.limiter(prefix, {"api": {"algorithm": "fixed_window", "limit": 10, "window": "1h"}})
        owners = {self.cluster.owner_of(slot_of(f"{prefix}{{{k}}}:api")) for k in KEYS}
        self.assertEqual(owners, {0, 1, 2}, "the keys should land on every primary")
        calls = [k for k in KEYS for _ in range(200)]
        await_window_room([HOUR_S], 60)
        decisions = in_flight(len(calls), 50, lambda i: lim.acquire("api", calls[i]))
        for k in KEYS:
            self.assertEqual(sum(d.allowed for d, c in zip(decisions, calls) if c == k), 10, k)
        self.assertEqual(lim.failures, 0)
        # acquire_many over every slot at once: in order, each key now refused.
        many = lim.acquire_many([("api", k, 1) for k in KEYS])
        self.assertEqual([d.allowed for d in many], [False] * len(KEYS))
        self.assertEqual(lim.failures, 0)

    def test_asyncio_exactly_10_of_200_on_each_of_30_keys(self):
        prefix = f"rl-arace-{RUN_ID}:"

        async def run():
            lim = AsyncRedisLimiter(self.cluster.url, {"api": {"algorithm": "fixed_window", "limit": 10, "window": "1h"}},
                                    key_prefix=prefix, on_failure="closed", timeout=30)
            gate = asyncio.Semaphore(50 * len(KEYS))

            async def one(k):
                async with gate:
                    return k, await lim.acquire("api", k)
            try:
                out = await asyncio.gather(*[one(k) for k in KEYS for _ in range(200)])
                return out, lim.failures
            finally:
                await lim.close()
        await_window_room([HOUR_S], 60)
        out, failures = asyncio.run(run())
        for k in KEYS:
            self.assertEqual(sum(d.allowed for key, d in out if key == k), 10, k)
        self.assertEqual(failures, 0)

    def test_a_slot_migrated_under_load_keeps_an_exact_count(self):
        prefix = f"rl-move-{RUN_ID}:"
        policies = {"fw": {"algorithm": "fixed_window", "limit": 350, "window": "1h"},
                    "swl": {"algorithm": "sliding_window_log", "limit": 350, "window": "60s"},
                    "tb": {"algorithm": "token_bucket", "rate": 1e-6, "burst": 350}}
        lim = self.limiter(prefix, policies)
        key = next(f"moving-{i}" for i in range(10_000) if self.cluster.owner_of(slot_of(f"{prefix}{{moving-{i}}}:fw")) == 0)
        slot = slot_of(f"{prefix}{{{key}}}:fw")
        src, dst, third = self.cluster.clients
        from_id, to_id = src.execute_command("CLUSTER", "MYID"), dst.execute_command("CLUSTER", "MYID")
        allowed = {p: 0 for p in policies}
        lock = threading.Lock()

        def round_(during=None):
            calls = [p for p in policies for _ in range(100)]
            side = threading.Thread(target=during) if during else None
            if side:
                side.start()
            ds = in_flight(len(calls), 50, lambda i: lim.acquire(calls[i], key))
            if side:
                side.join()
            with lock:
                for p, d in zip(calls, ds):
                    allowed[p] += d.allowed

        def migrate():
            keys = src.execute_command("CLUSTER", "GETKEYSINSLOT", slot, 1000)
            src.execute_command("MIGRATE", "127.0.0.1", self.cluster.nodes[1].port, "", 0, 5000, "KEYS", *keys)

        def hand_over():
            for n in (dst, src, third):
                n.execute_command("CLUSTER", "SETSLOT", slot, "NODE", to_id)

        await_window_room([HOUR_S], 60)
        round_()  # 1: before
        dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", from_id)
        src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", to_id)
        round_()  # 2: migrating, the keys still on the source
        round_(migrate)  # 3: the keys move mid-round
        round_()  # 4: the keys on the target, the slot not yet: ASK
        round_(hand_over)  # 5: the slot handed over mid-round
        round_()  # 6: after: MOVED, then the target
        self.assertEqual(self.cluster.owner_of(slot), 1)
        self.assertEqual(allowed, {"fw": 350, "swl": 350, "tb": 350})
        self.assertEqual(lim.failures, 0)


if __name__ == "__main__":
    unittest.main()
