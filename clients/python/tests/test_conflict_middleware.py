"""test_conflict_middleware.py — the middleware facing two definitions of one policy name on one
key (issue 31 defect 8; the decisions themselves: test_conflict.py), on real Redis and a real
ratelimitd sharing it: a policy_conflict is the app's configuration error, so the rate middleware
(Flask, FastAPI) and the concurrency middleware answer it as the limiter failing — 'open' passes
the request, 'closed' answers what a store failure answers — with an error logged naming the
policy and counted in the limiter's failures, never a 429 of its own."""
import contextlib
import json
import logging
import unittest

from ratelimit_client import AsyncRedisLimiter, RatelimitdLimiter, RedisLimiter
from ratelimit_client.concurrency_flask import concurrency_limit
from support import RUN_ID, free_port, start_ratelimitd, test_redis
from test_frameworks import FlaskThread, UvicornThread, fastapi_app, flask_app, get
from flask import Flask

PREFIX = f"rl:py-conflict-mw-{RUN_ID}:"
FIXED = {"api": {"algorithm": "fixed_window", "limit": 10, "window": "60s"}}
BUCKET = {"api": {"algorithm": "token_bucket", "rate": 10 / 60, "burst": 10}}
FIXED_DB = {"db": {"algorithm": "fixed_window", "limit": 10, "window": "60s"}}
YAML = """store: {{ type: redis, url: "{url}", key_prefix: "{prefix}", on_failure: closed, command_timeout: 30s }}
policies:
  api: {{ algorithm: sliding_window_log, limit: 10, window: 60s }}
  db:  {{ algorithm: concurrency, limit: 2, lease_ttl: 60s }}
"""


@contextlib.contextmanager
def logged_errors():
    """The messages of ERROR records of the client's logger while the block runs (assertLogs
    fails before the block's answer can be asserted and shown)."""
    got = []
    handler = logging.Handler(logging.ERROR)
    handler.emit = lambda record: got.append(record.getMessage())
    log = logging.getLogger("ratelimit_client")
    log.addHandler(handler)
    try:
        yield got
    finally:
        log.removeHandler(handler)


class Conflict(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.redis = test_redis()
        cls.daemon = start_ratelimitd(YAML.format(url=cls.redis.url, prefix=PREFIX))
        cls.limiters = []

    @classmethod
    def tearDownClass(cls):
        for lim in cls.limiters:
            lim.close()
        cls.daemon.stop()
        cls.redis.stop()

    def via_redis(self, policies, on_failure="closed", url=None, timeout=30):
        lim = RedisLimiter(url or self.redis.url, policies, key_prefix=PREFIX, on_failure=on_failure, timeout=timeout)
        self.limiters.append(lim)
        return lim

    def test_middleware_answers_a_conflict_by_the_failure_policy(self):
        key = f"mw-{RUN_ID}"
        self.assertTrue(self.via_redis(FIXED).acquire("api", key).allowed)  # the other definition's live state
        servers = []
        try:
            def serve(limiter):
                servers.append(FlaskThread(flask_app(limiter)))
                return servers[-1].port
            opened = self.via_redis(BUCKET, "open")
            with self.assertLogs("ratelimit_client", "ERROR") as logged:
                status, _, body = get(serve(opened), "/items", key)
            self.assertEqual((status, json.loads(body)), (200, {"items": []}))
            self.assertTrue(any("'api'" in m and "policy_conflict" in m for m in logged.output), logged.output)
            self.assertEqual(opened.failures, 1)  # counted as the limiter failing, as Go and Java count it

            dead = self.via_redis(BUCKET, "closed", f"redis://127.0.0.1:{free_port()}/0", timeout=0.3)
            store_down = get(serve(dead), "/items", key)
            with self.assertLogs("ratelimit_client", "ERROR"):
                refused = get(serve(self.via_redis(BUCKET, "closed")), "/items", key)
            self.assertEqual(refused[0], store_down[0])
            self.assertEqual(refused[2], store_down[2])
            self.assertEqual(refused[1].get("retry-after"), "1")  # the failure policy's 1 s, not the conflict's TTL
            self.assertEqual(refused[1].get("retry-after"), store_down[1].get("retry-after"))

            # FastAPI (the ASGI middleware) on the asyncio back-end, under 'open'.
            fa = AsyncRedisLimiter(self.redis.url, BUCKET, key_prefix=PREFIX, on_failure="open", timeout=30)
            servers.append(UvicornThread(fastapi_app(fa)))
            with self.assertLogs("ratelimit_client", "ERROR"):
                status, _, body = get(servers[-1].port, "/items", key)
            self.assertEqual((status, json.loads(body)), (200, {"items": []}))
            self.assertEqual(fa.failures, 1)
        finally:
            for s in servers:
                s.stop()

    def test_lease_middleware_answers_a_conflict_by_the_failure_policy(self):
        key = f"lease-mw-{RUN_ID}"
        self.assertTrue(self.via_redis(FIXED_DB).acquire("db", key).allowed)
        for on_failure in ("open", "closed"):
            app = Flask(__name__)
            limiter = RatelimitdLimiter(self.daemon.url, timeout=30, on_failure=on_failure)

            @app.get("/quick")
            @concurrency_limit(limiter, "db", key=lambda req: req.headers["x-client"])
            def quick():
                return "quick"
            server = FlaskThread(app)
            try:
                with logged_errors() as logged:
                    status, headers, body = get(server.port, "/quick", key)
            finally:
                server.stop()
            self.assertTrue(any("'db'" in m for m in logged), (on_failure, logged, status, body))
            self.assertEqual(limiter.failures, 1, on_failure)
            if on_failure == "open":
                self.assertEqual((status, body), (200, "quick"))
            else:
                self.assertFalse(json.loads(body)["allowed"])
                self.assertEqual(headers.get("retry-after"), "1")


if __name__ == "__main__":
    unittest.main()
