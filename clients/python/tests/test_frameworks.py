"""test_frameworks.py — the Python client as users run it: a FastAPI app (uvicorn, the
Starlette middleware) and a Flask app (werkzeug's threaded server, the decorator), each on the
Redis back-end and on a real ratelimitd (the project's build) sharing one Redis, limited at 10
per minute under 200 concurrent requests (the issue's acceptance); their header text equal to
ratelimitd's own; counts shared with ratelimitd; bad input; Redis or ratelimitd down."""
import asyncio
import http.client
import json
import os
import signal
import threading
import time
import unittest

import redis
import redis.asyncio as aioredis
import uvicorn
from fastapi import FastAPI
from flask import Flask
from werkzeug.serving import WSGIRequestHandler, make_server

from ratelimit_client import (AsyncRatelimitdLimiter, AsyncRedisLimiter, RateLimitError, RatelimitdLimiter,
                              RedisLimiter, render_decisions)
from ratelimit_client.flask import rate_limit
from ratelimit_client.starlette import RateLimitMiddleware
from support import RUN_ID, BackEnds, free_port, in_flight, start_ratelimitd, start_redis, test_redis, wait_port

PREFIX = f"rl:py-{RUN_ID}:"
# `bucket` refills one unit in 1000 s, longer than these tests may run: the shared-count test's
# remaining counts cannot gain a unit between its calls however slowly they run (at 1 per second,
# a second between its first and last call would add one).
POLICIES = {"api": {"algorithm": "sliding_window_log", "limit": 10, "window": "60s"},
            "bucket": {"algorithm": "token_bucket", "rate": 0.001, "burst": 5}}
YAML = """store: {{ type: redis, url: "{url}", key_prefix: "{prefix}", on_failure: closed, command_timeout: 30s }}
policies:
  api:    {{ algorithm: sliding_window_log, limit: 10, window: 60s }}
  bucket: {{ algorithm: token_bucket, rate: 0.001, burst: 5 }}
"""


def _name(args) -> str:
    return f"{args[0]} {args[1]}" if args[0] == "FUNCTION" else str(args[0])


class SyncRecording(redis.Redis):
    """The app's own redis-py client; `sent` lists the commands given to it (to count them)."""
    def execute_command(self, *args, **options):
        self.sent.append(_name(args))
        return super().execute_command(*args, **options)


class AsyncRecording(aioredis.Redis):
    async def execute_command(self, *args, **options):
        self.sent.append(_name(args))
        return await super().execute_command(*args, **options)


def get(port, path, client, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", path, headers={"x-client": client, **(headers or {})})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
    finally:
        c.close()


class UvicornThread:
    """A FastAPI app served by uvicorn on a free port, in a thread, stopped by should_exit."""

    def __init__(self, app, **config):
        self.port = free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="error", lifespan="off",
                                                    **config))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        wait_port(self.port, None, "uvicorn")

    def stop(self):
        self.server.should_exit = True
        self.thread.join(timeout=10)


class QuietHandler(WSGIRequestHandler):
    def log_request(self, *args, **kwargs):
        pass


class FlaskThread:
    def __init__(self, app):
        self.server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=QuietHandler)
        self.port = self.server.server_port
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.thread.join(timeout=10)


def fastapi_app(limiter):
    app = FastAPI()
    app.add_middleware(RateLimitMiddleware, limiter=limiter, policy="api", key=lambda req: req.headers["x-client"],
                       skip=lambda req: req.url.path == "/healthz")

    @app.get("/items")
    async def items():
        return {"items": []}

    @app.get("/healthz")
    async def healthz():
        return "ok"
    return app


def flask_app(limiter):
    app = Flask(__name__)

    @app.get("/items")
    @rate_limit(limiter, "api", key=lambda req: req.headers["x-client"])
    def items():
        return {"items": []}
    return app


class Frameworks(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.back_ends = BackEnds(YAML, PREFIX, POLICIES)
        cls.redis, cls.daemon = cls.back_ends.redis, cls.back_ends.daemon
        cls.sync_redis, cls.sync_daemon = cls.back_ends.via_redis, cls.back_ends.via_daemon

    @classmethod
    def tearDownClass(cls):
        cls.back_ends.stop()

    def race(self, port, client):
        answers = in_flight(200, 200, lambda _: get(port, "/items", client))  # all 200 at once
        ok = [a for a in answers if a[0] == 200]
        denied = [a for a in answers if a[0] == 429]
        self.assertEqual((len(ok), len(denied)), (10, 190))
        for _, h, body in ok:
            self.assertEqual(h["ratelimit-policy"], '"api";q=10;w=60')
            self.assertRegex(h["ratelimit"], r'^"api";r=[0-9];t=60$')
            self.assertEqual(json.loads(body), {"items": []})
        for _, h, body in denied:
            retry = int(h["retry-after"])
            self.assertTrue(1 <= retry <= 60)
            self.assertEqual(h["ratelimit-policy"], '"api";q=10;w=60')
            self.assertEqual(h["ratelimit"], f'"api";r=0;t={retry}')
            self.assertEqual(h["cache-control"], "no-store")
            self.assertTrue(h["content-type"].startswith("application/json"))
            b = json.loads(body)
            self.assertEqual((b["allowed"], b["policy"], b["limit"], b["remaining"]), (False, "api", 10, 0))
            self.assertEqual(-(-b["retry_after_ms"] // 1000), retry)

    def test_fastapi_on_redis(self):
        limiter = AsyncRedisLimiter(self.redis.url, POLICIES, key_prefix=PREFIX, on_failure="closed", timeout=30)
        server = UvicornThread(fastapi_app(limiter))
        try:
            self.race(server.port, f"fa-redis-{RUN_ID}")
            status, h, _ = get(server.port, "/healthz", f"fa-redis-{RUN_ID}")
            self.assertEqual(status, 200)
            self.assertNotIn("ratelimit", h)
            self.assertEqual(limiter.failures, 0)
        finally:
            server.stop()

    def test_fastapi_on_ratelimitd(self):
        server = UvicornThread(fastapi_app(AsyncRatelimitdLimiter(self.daemon.url, on_failure="closed", timeout=30)))
        try:
            self.race(server.port, f"fa-d-{RUN_ID}")
        finally:
            server.stop()

    def test_flask_on_redis(self):
        server = FlaskThread(flask_app(self.sync_redis))
        try:
            self.race(server.port, f"fl-redis-{RUN_ID}")
        finally:
            server.stop()

    def test_flask_on_ratelimitd(self):
        server = FlaskThread(flask_app(self.sync_daemon))
        try:
            self.race(server.port, f"fl-d-{RUN_ID}")
        finally:
            server.stop()

    def test_header_text_equals_ratelimitds(self):
        """Each of 12 decisions ratelimitd answered, rendered by headers.py: byte for byte its own."""
        key = f"hdr-{RUN_ID}"
        for i in range(12):
            c = http.client.HTTPConnection("127.0.0.1", self.daemon.port, timeout=5)
            c.request("POST", "/v1/acquire", json.dumps({"key": key, "policy": "api"}), {"content-type": "application/json"})
            r = c.getresponse()
            theirs = {k.lower(): v for k, v in r.getheaders()}
            body = r.read().decode()
            c.close()
            d = self.sync_daemon._answer("api", r.status, theirs.get("ratelimit-policy"), body)
            mine = render_decisions([d], [self.sync_daemon.describe("api")])
            self.assertEqual(mine.status, r.status)
            for name, value in mine.headers:
                self.assertEqual(value, theirs.get(name.lower()), f"{name} of request {i}")
            self.assertEqual({n.lower() for n, _ in mine.headers},
                             {n for n in theirs if n in ("ratelimit-policy", "ratelimit", "retry-after", "cache-control")})
            self.assertEqual(mine.body, body)

    def test_counts_shared_with_ratelimitd(self):
        key = f"shared-{RUN_ID}"
        for i in range(3):
            self.assertEqual(self.sync_redis.acquire("bucket", key).remaining, 4 - i)
        self.assertEqual(self.sync_daemon.acquire("bucket", key).remaining, 1)
        self.assertFalse(self.sync_redis.acquire("bucket", key, 2).allowed)
        self.assertEqual(self.sync_redis.acquire("bucket", key).remaining, 0)
        self.assertFalse(self.sync_daemon.acquire("bucket", key).allowed)

    def test_bad_input(self):
        key = f"bad-{RUN_ID}"

        def code(fn):
            with self.assertRaises(RateLimitError) as cm:
                fn()
            return cm.exception.code
        self.assertEqual(code(lambda: self.sync_redis.acquire("nope", key)), "unknown_policy")
        self.assertEqual(code(lambda: self.sync_daemon.acquire("nope", key)), "unknown_policy")
        for bad in (0, -1, 1.5, True, 10**10):
            self.assertEqual(code(lambda: self.sync_redis.acquire("api", key, bad)), "invalid_cost", bad)
        self.assertEqual(code(lambda: self.sync_daemon.acquire("api", key, 0)), "invalid_cost")
        self.assertEqual(code(lambda: self.sync_redis.acquire("api", "k" * 513)), "invalid_key")
        self.assertEqual(code(lambda: self.sync_redis.acquire("api", "")), "invalid_key")
        self.assertEqual(code(lambda: self.sync_daemon.acquire("api", "k" * 513)), "invalid_key")
        with self.assertRaisesRegex(RateLimitError, "limit must be an integer between 1"):
            RedisLimiter(self.redis.url, {"x": {"algorithm": "fixed_window", "limit": 0, "window": "1s"}})
        with self.assertRaisesRegex(RateLimitError, "rate must be a finite number"):
            RedisLimiter(self.redis.url, {"x": {"algorithm": "token_bucket", "rate": float("nan"), "burst": 1}})
        with self.assertRaisesRegex(RateLimitError, "bad duration"):
            RedisLimiter(self.redis.url, {"x": {"algorithm": "fixed_window", "limit": 1, "window": "1 minute"}})
        with self.assertRaisesRegex(RateLimitError, "policy name"):
            RedisLimiter(self.redis.url, {"bad name": {"algorithm": "fixed_window", "limit": 1, "window": "1s"}})
        self.assertEqual(self.sync_redis.acquire("api", key, 11).reason, "exceeds_capacity")
        self.assertEqual(self.sync_redis.acquire("api", key).remaining, 9)  # nothing was consumed

    def test_library_missing(self):
        from ratelimit_client import Library
        lim = RedisLimiter(self.redis.url, POLICIES, library=Library("000000000000", None))
        with self.assertRaises(RateLimitError) as cm:
            lim.acquire("api", f"v-{RUN_ID}")
        self.assertEqual(cm.exception.code, "library_missing")
        self.assertIn("version 000000000000", str(cm.exception))
        self.assertRegex(str(cm.exception), r"it has ratelimit_[0-9a-f]{12}")
        lim.close()

    @staticmethod
    def answers_within_limit(acquire):
        """Before Redis goes, the limiter has had a real answer (connected, the library loaded).
        Its first call also loads the library, which a busy machine may not finish within a 0.2 s
        timeout: the failure policy answering then is the limiter doing its job, not what the test
        is about, so it asks again, on fresh keys, up to 50 times (10 s at most)."""
        for i in range(50):
            if acquire("api", f"warm-{i}").reason == "within_limit":
                return True
        return False

    @staticmethod
    async def answers_within_limit_async(acquire):
        for i in range(50):
            if (await acquire("api", f"warm-{i}")).reason == "within_limit":
                return True
        return False

    def test_redis_down(self):
        own = start_redis()
        closed = RedisLimiter(own.url, POLICIES, on_failure="closed", timeout=0.2)
        opened = RedisLimiter(own.url, POLICIES, on_failure="open", timeout=0.2)

        async def async_side():  # one event loop for the asyncio limiter's whole life
            aclosed = AsyncRedisLimiter(own.url, POLICIES, on_failure="closed", timeout=0.2)
            before = await self.answers_within_limit_async(aclosed.acquire)
            own.stop()
            after = await asyncio.wait_for(aclosed.acquire("api", "k"), 3)
            await aclosed.close()
            return before, after
        try:
            self.assertTrue(self.answers_within_limit(closed.acquire))
            self.assertTrue(self.answers_within_limit(opened.acquire))
            failed_before = closed.failures
            before, da = asyncio.run(async_side())
            self.assertTrue(before)
            t0 = time.monotonic()
            dc, do = closed.acquire("api", "k"), opened.acquire("api", "k")
            self.assertLess(time.monotonic() - t0, 3)
            self.assertEqual((dc.allowed, dc.reason, dc.retry_after_us), (False, "failed_closed", 1_000_000))
            self.assertEqual((do.allowed, do.reason), (True, "failed_open"))
            self.assertEqual((da.allowed, da.reason), (False, "failed_closed"))
            self.assertGreater(closed.failures, failed_before)
            server = FlaskThread(flask_app(closed))
            try:
                status, h, _ = get(server.port, "/items", "x")
                self.assertEqual((status, h["retry-after"]), (429, "1"))
            finally:
                server.stop()
        finally:
            own.stop()

    def test_key_over_the_limit_answers_400_as_ratelimitd(self):
        """Issue 31 defect 6: a key ratelimitd refuses (600 bytes, over both back-ends' limits)
        answered 500 through the middleware; now ratelimitd's own 400 invalid_key, in FastAPI and
        Flask, on both back-ends."""
        servers = [FlaskThread(flask_app(self.sync_redis)), FlaskThread(flask_app(self.sync_daemon)),
                   UvicornThread(fastapi_app(AsyncRedisLimiter(self.redis.url, POLICIES, key_prefix=PREFIX, timeout=30))),
                   UvicornThread(fastapi_app(AsyncRatelimitdLimiter(self.daemon.url, timeout=30)))]
        try:
            for server in servers:
                status, _, body = get(server.port, "/items", "k" * 600)
                self.assertEqual((status, json.loads(body)["error"]), (400, "invalid_key"), body)
        finally:
            for server in servers:
                server.stop()

    def test_options_that_would_fail_every_request_are_refused_at_construction(self):
        """Issue 31 defect 7: a misspelt policy answered 500 on every request; now the Flask
        decorator and the Starlette middleware refuse it, and a key that is not a function, when
        they are made (no key at all is the default key: the client address)."""
        def key(req):
            return "k"

        for make in (lambda **o: rate_limit(**o), lambda **o: RateLimitMiddleware(None, **o)):
            for options, code in (({"policy": "apii", "key": key}, "unknown_policy"),
                                  ({"policy": "api", "key": "k"}, "invalid_policy"),
                                  ({"policy": "", "key": key}, "invalid_policy")):
                with self.assertRaises(RateLimitError) as e:
                    make(limiter=self.sync_redis, **options)
                self.assertEqual(e.exception.code, code)
            make(limiter=self.sync_redis, policy="api", key=key)
            make(limiter=self.sync_daemon, policy="whatever-ratelimitd-has", key=key)  # its own policies

    def test_redis_hung_under_the_apps_own_client(self):
        """Issue 31 defects 2 and 3, Redis stopped by SIGSTOP. An AsyncRedisLimiter on the app's own
        client (no socket_timeout) still answered nothing after 3 s: now its timeout bounds each
        call. And every call through the outage re-sent the library (FUNCTION LOAD timing out,
        swallowed, then FUNCTION LIST timing out: twice the timeout, 49 KB a call): now one FCALL
        a call, so one timeout. Counted in commands, not measured in seconds."""
        own = start_redis()
        sync_client = SyncRecording.from_url(own.url, socket_timeout=0.2)
        sync_client.sent = []
        sync_l = RedisLimiter(sync_client, POLICIES, on_failure="closed", timeout=0.2)

        async def scenario():  # one event loop for the asyncio limiter's whole life
            bare = AsyncRecording.from_url(own.url)
            bare.sent = []
            async_l = AsyncRedisLimiter(bare, POLICIES, on_failure="closed", timeout=0.2)
            self.assertTrue(self.answers_within_limit(sync_l.acquire))
            self.assertTrue(await self.answers_within_limit_async(async_l.acquire))
            os.kill(own.proc.pid, signal.SIGSTOP)
            try:
                sync_client.sent.clear()
                bare.sent.clear()
                da = [await asyncio.wait_for(async_l.acquire("api", "k"), 3) for _ in range(3)]
                ds = [sync_l.acquire("api", "k") for _ in range(3)]
            finally:
                os.kill(own.proc.pid, signal.SIGCONT)
            sent = (list(bare.sent), list(sync_client.sent))
            await async_l.close()
            return da, ds, sent
        try:
            da, ds, (async_sent, sync_sent) = asyncio.run(scenario())
            self.assertEqual([d.reason for d in da + ds], ["failed_closed"] * 6)
            self.assertEqual(async_sent, ["FCALL"] * 3)
            self.assertEqual(sync_sent, ["FCALL"] * 3)
        finally:
            sync_l.close()
            own.stop()

    def test_ratelimitd_never_reached_answers_by_the_failure_policy(self):
        # Issue 31 defect 1: no policy header ever seen (ratelimitd down since the app started)
        # answered a plain 500; the failure policy answers instead, without quota or window.
        for on_failure, want in (("open", 200), ("closed", 429)):
            never = RatelimitdLimiter("http://127.0.0.1:9", on_failure=on_failure, timeout=0.5)
            server = FlaskThread(flask_app(never))
            try:
                status, h, body = get(server.port, "/items", "x")
                self.assertEqual(status, want, f"{on_failure}: {body}")
                self.assertNotIn("ratelimit-policy", h)
                if want == 429:
                    self.assertEqual(h["retry-after"], "1")
            finally:
                server.stop()

    def test_ratelimitd_down(self):
        gone = RatelimitdLimiter("http://127.0.0.1:9", on_failure="closed", timeout=0.5)
        self.assertEqual(gone.acquire("api", "k").reason, "failed_closed")
        self.assertEqual(gone.failures, 1)
        self.assertTrue(RatelimitdLimiter("http://127.0.0.1:9", on_failure="open", timeout=0.5).acquire("api", "k").allowed)


if __name__ == "__main__":
    unittest.main()
