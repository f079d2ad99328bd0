"""test_usage.py — usage known after the response (docs/usage.md) from the Python client, on the
Redis back-end and on a real ratelimitd sharing that Redis: report (debt, refund, bad input),
reserve -> reconcile / cancel (and the context managers that cancel an abandoned reservation),
and the Starlette/FastAPI middleware reconciling after the response with the usage the
handler's response carries (an LLM-style token count in a header, or request.state)."""
import asyncio
import unittest

from fastapi import FastAPI, Request, Response
from flask import Flask, request as flask_request

from ratelimit_client import AsyncRatelimitdLimiter, AsyncRedisLimiter, RateLimitError
from ratelimit_client.flask import rate_limit
from ratelimit_client.starlette import RateLimitMiddleware
from support import RUN_ID, BackEnds
from loopback import wait_for
from test_frameworks import FlaskThread, UvicornThread, get

PREFIX = f"rl:py-usage-{RUN_ID}:"
# A 1 h sliding log: nothing recorded here ages out while the file runs.
POLICIES = {"tokens": {"algorithm": "sliding_window_log", "limit": 10000, "window": "1h"}}
YAML = """store: {{ type: redis, url: "{url}", key_prefix: "{prefix}", on_failure: closed, command_timeout: 30s }}
policies:
  tokens: {{ algorithm: sliding_window_log, limit: 10000, window: 1h }}
  db:     {{ algorithm: concurrency, limit: 2, lease_ttl: 10s }}
"""


def left(limiter, key):
    """What is left of `key` now: a report of 0 records nothing and answers the state."""
    return limiter.report("tokens", key, 0).remaining


class Usage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.fixture = BackEnds(YAML, PREFIX, POLICIES)
        cls.redis, cls.daemon = cls.fixture.redis, cls.fixture.daemon
        cls.via_redis, cls.via_daemon = cls.fixture.via_redis, cls.fixture.via_daemon
        cls.back_ends = [("redis", cls.via_redis), ("ratelimitd", cls.via_daemon)]

    @classmethod
    def tearDownClass(cls):
        cls.fixture.stop()

    def test_report_debt_refund_and_bad_input(self):
        for name, lim in self.back_ends:
            with self.subTest(name):
                k = f"report-{name}"
                self.assertEqual(lim.acquire("tokens", k, 9900).remaining, 100)
                d = lim.report("tokens", k, 500)
                self.assertEqual((d.allowed, d.reason, d.remaining, d.retry_after_us), (True, "within_limit", 0, 0))
                refused = lim.acquire("tokens", k)
                self.assertTrue(not refused.allowed and refused.retry_after_us > 0, refused)
                self.assertEqual(lim.report("tokens", k, -900).remaining, 500)
                self.assertEqual(lim.report("tokens", k, -20000).remaining, 10000)  # never above the limit
                for cost in (1.5, 10**9 + 1, -(10**9) - 1, True):
                    with self.assertRaises(RateLimitError) as e:
                        lim.report("tokens", k, cost)
                    self.assertEqual(e.exception.code, "invalid_cost", cost)
                with self.assertRaises(RateLimitError) as e:
                    lim.report("nope", k, 1)
                self.assertEqual(e.exception.code, "unknown_policy")
                self.assertEqual(left(lim, k), 10000)  # nothing recorded by the bad ones
        with self.assertRaises(RateLimitError) as e:  # a concurrency policy's usage is its leases
            self.via_daemon.report("db", "k", 1)
        self.assertIn("concurrency", str(e.exception))

    def test_reserve_reconcile_cancel(self):
        for name, lim in self.back_ends:
            with self.subTest(name):
                k = f"reserve-{name}"
                r = lim.reserve("tokens", k, 500)
                self.assertEqual(r.decision.remaining, 9500)
                self.assertEqual(r.reconcile(700).remaining, 9300)  # 200 more than the estimate
                with self.assertRaises(RateLimitError) as e:
                    r.reconcile(700)
                self.assertEqual(e.exception.code, "invalid_request")
                self.assertEqual(lim.reserve("tokens", k, 500).reconcile(100).remaining, 9200)  # 400 refunded
                self.assertIsNone(lim.reserve("tokens", k, 500).reconcile(500))  # nothing to report
                gone = lim.reserve("tokens", k, 500)
                self.assertEqual(gone.cancel().remaining, 8700)
                self.assertEqual(gone.cancel().remaining, 8700)  # the first settlement; nothing sent
                # Leaving the block unsettled (here by an exception) gives the estimate back.
                with self.assertRaises(ZeroDivisionError):
                    with lim.reserve("tokens", k, 500) as r2:
                        self.assertEqual(r2.decision.remaining, 8200)
                        1 / 0
                self.assertTrue(r2.settled)
                with lim.reserve("tokens", k, 500) as r3:
                    r3.reconcile(600)
                self.assertEqual(left(lim, k), 8100)
                # Driven into debt: the next reservation is refused, records nothing, and its
                # cancel sends nothing.
                self.assertEqual(lim.reserve("tokens", k, 8000).reconcile(9000).remaining, 0)
                denied = lim.reserve("tokens", k, 500)
                self.assertFalse(denied.decision.allowed)
                self.assertIsNone(denied.cancel())
                self.assertEqual(left(lim, k), 0)
                with self.assertRaises(RateLimitError) as e:
                    lim.reserve("tokens", f"{k}-neg", 1).reconcile(-1)
                self.assertEqual(e.exception.code, "invalid_cost")

    def test_async_reserve(self):
        async def run(lim, k):
            try:
                r = await lim.reserve("tokens", k, 500)
                self.assertEqual((await r.reconcile(800)).remaining, 9200)
                with self.assertRaises(KeyError):
                    async with await lim.reserve("tokens", k, 1000) as r2:
                        self.assertEqual(r2.decision.remaining, 8200)
                        raise KeyError("abandoned")
                return (await lim.report("tokens", k, 0)).remaining
            finally:
                await lim.close()
        for name, make in (("redis", lambda: AsyncRedisLimiter(self.redis.url, POLICIES, key_prefix=PREFIX,
                                                                on_failure="closed", timeout=30)),
                           ("ratelimitd", lambda: AsyncRatelimitdLimiter(self.daemon.url, on_failure="closed", timeout=30))):
            with self.subTest(name):
                self.assertEqual(asyncio.run(run(make(), f"async-{name}")), 9200)

    def fastapi_with_usage(self, limiter, errors):
        app = FastAPI()

        @app.get("/chat")
        async def chat(request: Request, response: Response, tokens: int = None, state: int = None):
            # The "model" answers with its usage: in a header, as an LLM API's usage field, or
            # left on request.state for the middleware's usage function.
            if tokens is not None:
                response.headers["x-usage-tokens"] = str(tokens)
            if state is not None:
                request.state.tokens = state
            return {"answer": "..."}

        def usage(request, response):
            if "x-usage-tokens" in response.headers:
                return int(response.headers["x-usage-tokens"])
            return getattr(request.state, "tokens", None)

        app.add_middleware(RateLimitMiddleware, limiter=limiter, policy="tokens", cost=500,
                           key=lambda req: req.headers["x-client"], usage=usage, on_report_error=errors.append)
        return app

    def test_fastapi_reconciles_after_the_response(self):
        for name, make in (("redis", lambda: AsyncRedisLimiter(self.redis.url, POLICIES, key_prefix=PREFIX,
                                                                on_failure="closed", timeout=30)),
                           ("ratelimitd", lambda: AsyncRatelimitdLimiter(self.daemon.url, on_failure="closed", timeout=30))):
            with self.subTest(name):
                sync = dict(self.back_ends)[name]
                errors = []
                server = UvicornThread(self.fastapi_with_usage(make(), errors))
                k = f"mw-{name}"
                try:
                    self.assertEqual(get(server.port, "/chat?tokens=700", k)[0], 200)
                    self.assertTrue(wait_for(lambda: left(sync, k) == 9300, 30), left(sync, k))
                    self.assertEqual(get(server.port, "/chat?state=100", k)[0], 200)
                    self.assertTrue(wait_for(lambda: left(sync, k) == 9200, 30), left(sync, k))  # 400 refunded
                    self.assertEqual(get(server.port, "/chat?tokens=-5", k)[0], 200)
                    self.assertTrue(wait_for(lambda: len(errors) == 1, 30))
                    self.assertEqual(errors[0].code, "invalid_cost")
                    self.assertEqual(get(server.port, "/chat?tokens=20000", k)[0], 200)
                    self.assertTrue(wait_for(lambda: left(sync, k) == 0, 30), left(sync, k))
                    self.assertEqual(get(server.port, "/chat?tokens=1", k)[0], 429)  # in debt
                finally:
                    server.stop()

    def test_flask_reconciles_after_the_response(self):
        for name, lim in self.back_ends:
            with self.subTest(name):
                errors = []
                app = Flask(__name__)

                @app.get("/chat")
                @rate_limit(lim, "tokens", key=lambda req: req.headers["x-client"], cost=500, on_report_error=errors.append,
                            usage=lambda req, res: int(res.headers["X-Usage-Tokens"]) if "X-Usage-Tokens" in res.headers else None)
                def chat():
                    tokens = flask_request.args.get("tokens")
                    return {"answer": "..."}, 200, ({"X-Usage-Tokens": tokens} if tokens is not None else {})
                server = FlaskThread(app)
                k = f"flask-{name}"
                try:
                    for path, want in (("/chat?tokens=700", 9300), ("/chat?tokens=100", 9200), ("/chat", 8700)):
                        self.assertEqual(get(server.port, path, k)[0], 200)
                        self.assertTrue(wait_for(lambda: left(lim, k) == want, 30), (path, left(lim, k)))
                    self.assertEqual(get(server.port, "/chat?tokens=-5", k)[0], 200)
                    self.assertTrue(wait_for(lambda: len(errors) == 1, 30))
                    self.assertEqual(errors[0].code, "invalid_cost")
                finally:
                    server.stop()

    def test_usage_needs_a_function_and_a_limiter_that_reports(self):
        class NoReport:
            async def acquire(self, policy, key, cost=1):
                raise AssertionError("not called")

            def describe(self, policy):
                return None
        for limiter, usage in ((NoReport(), lambda req, res: 1), (self.via_daemon, 5)):
            with self.assertRaises(RateLimitError):
                RateLimitMiddleware(FastAPI(), limiter=limiter, policy="tokens", key=lambda r: "k", usage=usage)


if __name__ == "__main__":
    unittest.main()
