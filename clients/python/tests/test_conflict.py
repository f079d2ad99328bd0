"""test_conflict.py — issue 31 defect 8: two definitions of one policy name on one key. Before,
each algorithm read its own fields of the shared state (the issue's repro admitted 21 against a
limit of 10); now the second definition's calls answer policy_conflict and count nothing, on the
Redis back-end (reason 6 from the function library) and through ratelimitd (409)."""
import unittest

from ratelimit_client import RatelimitdLimiter, RedisLimiter
from support import RUN_ID, start_ratelimitd, test_redis

WINDOW = {"api": {"algorithm": "fixed_window", "limit": 10, "window": "60s"}}
BUCKET = {"api": {"algorithm": "token_bucket", "rate": 0.1, "burst": 10},
          "db": {"algorithm": "sliding_window_counter", "limit": 5, "window": "60s"}}


class PolicyConflict(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.redis = test_redis()

    @classmethod
    def tearDownClass(cls):
        cls.redis.stop()

    def test_two_definitions_of_one_name_never_share_a_count(self):
        prefix = f"conflict:{RUN_ID}:py:"
        window = RedisLimiter(self.redis.url, WINDOW, key_prefix=prefix, on_failure="closed", timeout=5)
        bucket = RedisLimiter(self.redis.url, BUCKET, key_prefix=prefix, on_failure="closed", timeout=5)
        admitted = conflicts = 0
        for i in range(100):
            d = (bucket if i % 2 else window).acquire("api", "user-1")
            admitted += d.allowed
            if d.reason == "policy_conflict":
                conflicts += 1
                self.assertTrue(i % 2 == 1 and not d.allowed and d.remaining == 0, (i, d))
                self.assertTrue(0 < d.retry_after_us <= 60_000_000, d)
        self.assertEqual((admitted, conflicts), (10, 50))
        window.close()
        bucket.close()

    def test_ratelimitd_answers_a_conflict_as_a_decision(self):
        prefix = f"conflictd:{RUN_ID}:py:"
        daemon = start_ratelimitd(
            f'store: {{ type: redis, url: "{self.redis.url}", key_prefix: "{prefix}" }}\npolicies:\n'
            "  api: { algorithm: fixed_window, limit: 10, window: 60s }\n"
            "  db: { algorithm: concurrency, limit: 5, lease_ttl: 60s }\n")
        try:
            other = RedisLimiter(self.redis.url, BUCKET, key_prefix=prefix, on_failure="closed", timeout=5)
            self.assertTrue(other.acquire("api", "k").allowed)
            self.assertTrue(other.acquire("db", "k").allowed)
            lim = RatelimitdLimiter(daemon.url, on_failure="closed", timeout=5)
            d = lim.acquire("api", "k")
            self.assertEqual((d.allowed, d.reason), (False, "policy_conflict"), d)
            self.assertTrue(0 < d.retry_after_us <= 11_000_000, d)
            lease = lim.acquire_lease("db", "k")
            self.assertEqual((lease.allowed, lease.reason), (False, "policy_conflict"), lease)
            self.assertEqual(other.peek("api", "k").remaining, 8)  # the bucket's own count: 10 - 1 - 1
            other.close()
        finally:
            daemon.stop()


if __name__ == "__main__":
    unittest.main()
