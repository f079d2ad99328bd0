"""test_leases.py — concurrency leases through a real ratelimitd (on a real Redis): the lease API
(acquire, renew, release with an outcome, bad input refused before sending, ratelimitd's codes
raised) and the FastAPI and Flask concurrency middleware under `db: limit 2` — with the handler
blocked exactly 2 requests get through and the 3rd gets ratelimitd's 429; once they finish
(200, 5xx, an exception) the leases are back, observed as `remaining` of the next acquire; on an
AIMD policy a 5xx and a timeout lower the learned limit (the outcomes reach ratelimitd);
ratelimitd down → the failure policy."""
import asyncio
import json
import logging
import threading
import time
import unittest

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from flask import Flask

from ratelimit_client import AsyncRatelimitdLimiter, RateLimitError, RatelimitdLimiter
from ratelimit_client.concurrency_flask import concurrency_limit
from ratelimit_client.concurrency_starlette import ConcurrencyLimitMiddleware
from support import RUN_ID, free_port, start_ratelimitd, start_redis, test_redis
from test_frameworks import FlaskThread, UvicornThread, get

YAML = """store: {{ type: redis, url: "{url}", key_prefix: "rl:py-leases-{run}:", on_failure: closed, command_timeout: 30s }}
policies:
  db:  {{ algorithm: concurrency, limit: 2, lease_ttl: 60s }}
  api: {{ algorithm: fixed_window, limit: 5, window: 60s }}
  cls: {{ algorithm: concurrency, limit: 2, lease_ttl: 60s, classes: [{{ name: critical }}, {{ name: sheddable, headroom: 0.5 }}] }}
"""
AIMD = """policies:
  ad: { algorithm: concurrency, limit: adaptive, estimator: aimd, max_limit: 64, initial_limit: 16, sample_window: 0, lease_ttl: 60s }
"""


def eventually(what, check, seconds=30.0):
    """Returns when check() is true, polling every 20 ms; fails after `seconds` (a hang guard)."""
    end = time.monotonic() + seconds
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.02)


class Gate:
    """Handlers wait on it; `entered` counts them."""

    def __init__(self):
        self.event, self.entered, self.lock = threading.Event(), 0, threading.Lock()

    def enter_and_wait(self):
        with self.lock:
            self.entered += 1
        self.event.wait(30)


def fastapi_app(limiter, gate, **options):
    app = FastAPI()
    app.add_middleware(ConcurrencyLimitMiddleware, limiter=limiter, policy=options.pop("policy", "db"),
                       key=lambda req: req.headers["x-client"], **options)

    @app.get("/slow")
    async def slow():
        await asyncio.get_running_loop().run_in_executor(None, gate.enter_and_wait)
        return PlainTextResponse("done")

    @app.get("/fail")
    async def fail():
        return PlainTextResponse("busy", status_code=503)

    @app.get("/throw")
    async def throw():
        raise RuntimeError("handler bug")
    return app


def flask_app(limiter, gate, **options):
    app = Flask(__name__)
    app.logger.setLevel(logging.CRITICAL)  # no traceback of /throw on stderr
    limit = concurrency_limit(limiter, options.pop("policy", "db"), key=lambda req: req.headers["x-client"], **options)

    @app.get("/slow")
    @limit
    def slow():
        gate.enter_and_wait()
        return "done"

    @app.get("/fail")
    @limit
    def fail():
        return "broken", 500

    @app.get("/quick")
    @limit
    def quick():
        return "quick"

    @app.get("/throw")
    @limit
    def throw():
        raise RuntimeError("handler bug")
    return app


class Leases(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.redis = test_redis()
        cls.daemon = start_ratelimitd(YAML.format(url=cls.redis.url, run=RUN_ID))
        cls.limiter = RatelimitdLimiter(cls.daemon.url, timeout=30, on_failure="closed")

    @classmethod
    def tearDownClass(cls):
        cls.daemon.stop()
        cls.redis.stop()

    def free(self, key, limiter=None, policy="db"):
        """Units free for `key`: the remaining of a lease taken and given straight back, + 1."""
        limiter = limiter or self.limiter
        lease = limiter.acquire_lease(policy, key)
        if not lease.allowed:
            return 0
        self.assertTrue(limiter.release_lease(lease))
        return lease.remaining + 1

    def test_lease_api(self):
        key, lim = f"api-{RUN_ID}", self.limiter
        a = lim.acquire_lease("db", key)
        self.assertEqual((a.allowed, a.reason, a.limit, a.remaining, a.expires_ms), (True, "within_limit", 2, 1, 60_000))
        self.assertIsInstance(a.id, str)
        self.assertEqual(a.ratelimit_policy, '"db";q=2;qu="concurrent-requests"')
        b = lim.acquire_lease("db", key)
        c = lim.acquire_lease("db", key)
        self.assertEqual((c.allowed, c.reason, c.id), (False, "over_limit", None))
        self.assertGreater(c.retry_after_us, 0)
        self.assertTrue(lim.renew_lease(a))
        self.assertTrue(lim.release_lease(a, outcome="ok", latency_ms=12.5))
        self.assertFalse(lim.release_lease(a), "a second release frees nothing")
        self.assertFalse(lim.renew_lease(a), "a released lease cannot be renewed")
        self.assertTrue(lim.release_lease(b, outcome="dropped"))
        self.assertEqual(self.free(key), 2)

        failures = lim.failures

        def code(fn):
            with self.assertRaises(RateLimitError) as cm:
                fn()
            return cm.exception.code
        self.assertEqual(code(lambda: lim.acquire_lease("db", "")), "invalid_key")
        self.assertEqual(code(lambda: lim.acquire_lease("", key)), "invalid_policy")
        self.assertEqual(code(lambda: lim.acquire_lease("db", key, 0)), "invalid_cost")
        self.assertEqual(code(lambda: lim.acquire_lease("db", key, 1.5)), "invalid_cost")
        self.assertEqual(code(lambda: lim.acquire_lease("db", key, max_wait_ms=-1)), "invalid_max_wait")
        self.assertEqual(code(lambda: lim.release_lease(a, outcome="bad")), "invalid_outcome")
        for latency in (-1, float("nan"), float("inf"), 3_600_000, True):
            self.assertEqual(code(lambda: lim.release_lease(a, latency_ms=latency)), "invalid_latency")
        # ratelimitd's own codes, as it names them.
        self.assertEqual(code(lambda: lim.acquire_lease("nope", key)), "unknown_policy")
        self.assertEqual(code(lambda: lim.acquire_lease("api", key)), "not_a_concurrency_policy")
        a.id = "not-a-lease"
        self.assertEqual(code(lambda: lim.renew_lease(a)), "invalid_lease_id")
        big = lim.acquire_lease("db", key, 3)
        self.assertEqual((big.allowed, big.reason), (False, "exceeds_capacity"))
        self.assertEqual(lim.failures, failures, "no failure-policy answers")
        self.assertEqual(self.free(key), 2)

    def blocked_race(self, port, key, gate):
        answers = []
        threads = [threading.Thread(target=lambda: answers.append(get(port, "/slow", key))) for _ in range(2)]
        for t in threads:
            t.start()
        eventually("both handlers running", lambda: gate.entered == 2)
        status, h, body = get(port, "/slow", key)
        self.assertEqual(status, 429)
        self.assertGreaterEqual(int(h["retry-after"]), 1)
        self.assertEqual(h["ratelimit-policy"], '"db";q=2;qu="concurrent-requests"')
        self.assertEqual(h["cache-control"], "no-store")
        self.assertEqual((json.loads(body)["allowed"], json.loads(body)["policy"], json.loads(body)["limit"]), (False, "db", 2))
        self.assertEqual(gate.entered, 2, "the refused request never reached the handler")
        gate.event.set()
        for t in threads:
            t.join(30)
        self.assertEqual([a[0] for a in answers], [200, 200])
        eventually("both leases released", lambda: self.free(key) == 2)
        self.assertEqual(get(port, "/slow", key)[0], 200, "a new request passes")

    def released_after(self, port, path, key, status):
        self.assertEqual(get(port, path, key)[0], status)
        eventually(f"the lease of {path} released", lambda: self.free(key) == 2)

    def test_fastapi(self):
        gate = Gate()
        server = UvicornThread(fastapi_app(AsyncRatelimitdLimiter(self.daemon.url, timeout=30, on_failure="closed"), gate))
        try:
            key = f"fastapi-{RUN_ID}"
            self.blocked_race(server.port, key, gate)
            self.released_after(server.port, "/fail", key, 503)
            self.released_after(server.port, "/throw", key, 500)
        finally:
            server.stop()

    def test_flask(self):
        gate = Gate()
        server = FlaskThread(flask_app(self.limiter, gate))
        try:
            key = f"flask-{RUN_ID}"
            self.blocked_race(server.port, key, gate)
            self.released_after(server.port, "/fail", key, 500)
            self.released_after(server.port, "/throw", key, 500)
        finally:
            server.stop()

    def test_priority_classes(self):
        """`cls` (limit 2; sheddable keeps half): a lease's class sets its limit; unnamed is the lowest
        class; the middleware's priority_header names it; ratelimitd's unknown_priority is raised."""
        key, lim = f"cls-{RUN_ID}", self.limiter
        crit = lim.acquire_lease("cls", key, priority="critical")
        self.assertEqual((crit.allowed, crit.limit), (True, 2))
        self.assertTrue(lim.release_lease(crit))
        shed = lim.acquire_lease("cls", key)
        self.assertEqual((shed.allowed, shed.limit, shed.remaining), (True, 1, 0))
        with self.assertRaises(RateLimitError) as cm:
            lim.acquire_lease("cls", key, priority="urgent")
        self.assertEqual(cm.exception.code, "unknown_priority")
        with self.assertRaises(RateLimitError) as cm:
            lim.acquire_lease("db", key, priority="critical")
        self.assertEqual(cm.exception.code, "unknown_priority", "a policy without classes takes none")
        gate = Gate()
        gate.event.set()
        server = FlaskThread(flask_app(lim, gate, policy="cls", priority_header="x-priority"))
        try:
            # One unit held by `shed`: unlabelled (sheddable) requests are refused, critical pass.
            self.assertEqual(get(server.port, "/quick", key)[0], 429)
            status, _, body = get(server.port, "/quick", key, {"x-priority": "critical"})
            self.assertEqual((status, body), (200, "quick"))
        finally:
            server.stop()
            self.assertTrue(lim.release_lease(shed))

    def test_outcomes_reach_an_adaptive_limit(self):
        """AIMD, memory store: a 5xx and a timeout each lower the limit (16 → 14 → 12 on the first app)."""
        ad = start_ratelimitd(AIMD)
        gate = Gate()
        try:
            lim = RatelimitdLimiter(ad.url, timeout=30, on_failure="closed")

            def limit():
                lease = lim.acquire_lease("ad", "k")
                lim.release_lease(lease, outcome="ok", latency_ms=1)
                return lease.limit
            for make in (lambda: FlaskThread(flask_app(lim, gate, policy="ad", timeout=0.05)),
                         lambda: UvicornThread(fastapi_app(AsyncRatelimitdLimiter(ad.url, timeout=30), gate, policy="ad", timeout=0.05))):
                server = make()
                try:
                    base = limit()
                    self.assertEqual(get(server.port, "/fail", "k")[0] // 100, 5)
                    eventually("the drop learned", lambda: limit() < base)
                    dropped = limit()
                    gate.event.clear()
                    threading.Timer(0.2, gate.event.set).start()   # past timeout (50 ms) by construction
                    self.assertEqual(get(server.port, "/slow", "k")[0], 200)
                    eventually("the timeout learned", lambda: limit() < dropped)
                finally:
                    server.stop()
        finally:
            ad.stop()

    def test_ratelimitd_down(self):
        dead = f"http://127.0.0.1:{free_port()}"
        for on_failure in ("open", "closed"):
            down = RatelimitdLimiter(dead, timeout=2, on_failure=on_failure)
            gate = Gate()
            gate.event.set()
            server = FlaskThread(flask_app(down, gate))
            try:
                status, h, body = get(server.port, "/slow", "k")
                if on_failure == "open":
                    self.assertEqual((status, body), (200, "done"))
                else:
                    self.assertEqual((status, h["retry-after"]), (429, "1"))
                self.assertEqual(down.failures, 1)
                lease = down.acquire_lease("db", "k")
                self.assertEqual(lease.reason, "failed_open" if on_failure == "open" else "failed_closed")
                self.assertFalse(down.release_lease(lease, outcome="ok"))
                self.assertEqual(down.renew_lease(lease), on_failure == "open")
            finally:
                server.stop()

    def test_store_failing_open_inside_ratelimitd(self):
        """ratelimitd's own Redis down behind an `on_failure: open` store grants with "lease_id":
        null: the failure policy's grant (nothing to release), not a protocol error (a 500)."""
        redis = start_redis()
        daemon = None
        try:
            daemon = start_ratelimitd(f'store: {{ type: redis, url: "{redis.url}", on_failure: open, command_timeout: 300ms }}\n'
                                      "policies:\n  db: { algorithm: concurrency, limit: 2, lease_ttl: 30s }\n")
            limiter = RatelimitdLimiter(daemon.url, timeout=30, on_failure="closed")
            self.assertIsNotNone(limiter.acquire_lease("db", "k").id)
            redis.stop()
            lease = limiter.acquire_lease("db", "k")
            self.assertEqual((lease.allowed, lease.reason, lease.id), (True, "failed_open", None))
            self.assertFalse(limiter.release_lease(lease, outcome="ok"))
            self.assertEqual(limiter.failures, 0)
            gate = Gate()
            gate.event.set()
            server = FlaskThread(flask_app(limiter, gate))
            try:
                status, _, body = get(server.port, "/slow", "k")
                self.assertEqual((status, body), (200, "done"))
            finally:
                server.stop()
        finally:
            if daemon is not None:
                daemon.stop()
            redis.stop()


if __name__ == "__main__":
    unittest.main()
