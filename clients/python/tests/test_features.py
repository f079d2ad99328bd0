"""test_features.py — what slowapi / Flask-Limiter / express-rate-limit users expect of the
middleware (issue 31), each against real Redis and a real ratelimitd in this runtime: the header
sets and problem+json equal to what ratelimitd sends with the same settings, a refusal of one's
own, the decision visible to the handler, the "10/minute" shorthand, the default key through
trusted proxies, skip_successful_requests / skip_failed_requests (the unit read back from Redis)."""
import http.client
import json
import time
import unittest

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse
from flask import Flask, g

from ratelimit_client import AsyncRedisLimiter, RateLimitError, RatelimitdLimiter, RedisLimiter
from ratelimit_client.fastapi import RateLimitDependency, RateLimitExceeded, rate_limit_exceeded_handler
from ratelimit_client.flask import FlaskRateLimit, rate_limit
from ratelimit_client.starlette import RateLimitMiddleware
from support import RUN_ID, start_ratelimitd, test_redis
from test_frameworks import FlaskThread, UvicornThread

PREFIX = f"rl:pyf-{RUN_ID}:"
POLICIES = {"api": "3/1000s", "two": "2/1000s"}


def get(port, path, headers=None):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        c.request("GET", path, headers=headers or {})
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
    finally:
        c.close()


class Recording(RatelimitdLimiter):
    """A RatelimitdLimiter that keeps ratelimitd's last answer whole (status, fields, body)."""

    def _post(self, path, payload, headers=None):
        c = http.client.HTTPConnection(*self._conn_args[:2], timeout=self.timeout)
        try:
            c.request("POST", path, json.dumps(payload), headers or {"content-type": "application/json"})
            r = c.getresponse()
            body = r.read().decode()
            self.seen = (r.status, {k.lower(): v for k, v in r.getheaders()}, body)
            return r.status, r.getheader("RateLimit-Policy"), body
        finally:
            c.close()


def eventually(fn, seconds=10.0):
    end = time.monotonic() + seconds
    while not fn():
        if time.monotonic() > end:
            raise AssertionError("not within %.0fs" % seconds)
        time.sleep(0.02)


class Features(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.redis = test_redis()
        cls.limiter = RedisLimiter(cls.redis.url, POLICIES, key_prefix=PREFIX, on_failure="closed", timeout=30)

    @classmethod
    def tearDownClass(cls):
        cls.limiter.close()
        cls.redis.stop()

    def remaining(self, policy, key):
        """The units left (a peek answers what would remain after one more)."""
        d = self.limiter.peek(policy, key)
        return d.remaining + 1 if d.allowed else 0

    def test_rate_shorthand(self):
        p = self.limiter.policy("api")
        self.assertEqual((p.algorithm, p.limit, p.window_us), ("sliding_window_counter", 3, 1000 * 1_000_000))
        for bad in ["10 per minute", "10/minutes", "10/ minute", "0/minute", "10/0s", "ten/minute", "10/minute ", "10/1w"]:
            with self.assertRaises(RateLimitError) as e:
                RedisLimiter(self.redis.url, {"x": bad})
            self.assertEqual(e.exception.code, "invalid_policy")
            self.assertIn('e.g. "10/minute"', str(e.exception))

    def test_header_sets_and_problem_json_equal_ratelimitds(self):
        d = start_ratelimitd("store: { type: memory }\nheaders: draft6\nproblem_json: true\n"
                             "policies:\n  api: { algorithm: sliding_window_log, limit: 3, window: 1000s }\n")
        try:
            via_daemon = Recording(d.url, timeout=30, windows={"api": "1000s"})
            app = Flask(__name__)

            @app.get("/r")
            @rate_limit(via_daemon, "api", key=lambda _: f"hs-{RUN_ID}", headers="draft6", problem_json=True)
            def r():
                return "ok"
            server = FlaskThread(app)
            try:
                statuses = []
                for i in range(5):
                    status, mine, body = get(server.port, "/r")
                    t_status, theirs, t_body = via_daemon.seen
                    statuses.append(status)
                    self.assertEqual(status, t_status)
                    for h in ("ratelimit-limit", "ratelimit-remaining", "ratelimit-reset", "retry-after", "cache-control",
                              "ratelimit-policy", "ratelimit"):
                        self.assertEqual(mine.get(h), theirs.get(h), f"{h} of request {i}")
                    if status == 429:
                        self.assertEqual(body, t_body)
                        self.assertTrue(mine["content-type"].startswith("application/problem+json"))
                        self.assertEqual(json.loads(body)["violated-policies"], ["api"])
                self.assertEqual(statuses, [200, 200, 200, 429, 429])
            finally:
                server.stop()
        finally:
            d.stop()
        for header_set, present, absent in (("x-ratelimit", "x-ratelimit-remaining", "ratelimit"), ("none", None, "ratelimit-policy")):
            app = Flask(__name__)

            @app.get("/r")
            @rate_limit(self.limiter, "api", key=lambda _: f"set-{header_set}-{RUN_ID}", headers=header_set)
            def r2():
                return "ok"
            server = FlaskThread(app)
            try:
                status, h, _ = get(server.port, "/r")
                self.assertEqual(status, 200)
                if present:
                    self.assertEqual(h[present], "2")
                self.assertNotIn(absent, h)
                for _ in range(2):
                    get(server.port, "/r")
                status, h, _ = get(server.port, "/r")
                self.assertEqual(status, 429)
                self.assertGreaterEqual(int(h["retry-after"]), 1)
            finally:
                server.stop()
        with self.assertRaisesRegex(RateLimitError, "headers must be one of ietf, draft6, x-ratelimit, none"):
            rate_limit(self.limiter, "api", headers="draft7")

    def test_custom_refusal_and_the_decision_visible(self):
        app = Flask(__name__)

        @app.get("/dict")
        @rate_limit(self.limiter, "two", key=lambda _: f"dict-{RUN_ID}", status_code=503, message={"error": "slow down"})
        def d():
            return {"remaining": g.rate_limit.remaining, "limit": g.rate_limit.limit}

        @app.get("/text")
        @rate_limit(self.limiter, "two", key=lambda _: f"text-{RUN_ID}", message=lambda req, info: f"wait {info.retry_after_ms} ms")
        def t():
            return "ok"
        server = FlaskThread(app)
        try:
            self.assertEqual([json.loads(get(server.port, "/dict")[2]) for _ in range(2)],
                             [{"remaining": 1, "limit": 2}, {"remaining": 0, "limit": 2}])
            status, h, body = get(server.port, "/dict")
            self.assertEqual((status, json.loads(body)), (503, {"error": "slow down"}))
            self.assertGreaterEqual(int(h["retry-after"]), 1, "Retry-After kept")
            self.assertEqual(h["ratelimit-policy"], '"two";q=2;w=1000')
            for _ in range(2):
                get(server.port, "/text")
            status, h, body = get(server.port, "/text")
            self.assertEqual(status, 429)
            self.assertTrue(h["content-type"].startswith("text/plain"))
            self.assertRegex(body, r"^wait [0-9]+ ms$")
        finally:
            server.stop()
        with self.assertRaisesRegex(RateLimitError, "status_code must be an integer from 400 to 599"):
            rate_limit(self.limiter, "api", status_code=200)

        fa = FastAPI()
        fa_limiter = AsyncRedisLimiter(self.redis.url, POLICIES, key_prefix=PREFIX, on_failure="closed", timeout=30)
        fa.add_middleware(RateLimitMiddleware, limiter=fa_limiter, policy="two", key=lambda _: f"fa-{RUN_ID}",
                          handler=lambda req, info: JSONResponse({"mine": True, "policy": info.policy}, status_code=429))

        @fa.get("/r")
        async def fr(request: Request):
            return PlainTextResponse(str(request.state.rate_limit.remaining))
        server = UvicornThread(fa)
        try:
            self.assertEqual([get(server.port, "/r")[2] for _ in range(2)], ["1", "0"])
            status, h, body = get(server.port, "/r")
            self.assertEqual((status, json.loads(body)), (429, {"mine": True, "policy": "two"}))
            self.assertEqual(h["ratelimit"], f'"two";r=0;t={h["retry-after"]}')
        finally:
            server.stop()

    def test_default_key_through_trusted_proxies(self):
        fa = FastAPI()
        fa_limiter = AsyncRedisLimiter(self.redis.url, {"k": "2/1000s"}, key_prefix=f"{PREFIX}trust:", on_failure="closed", timeout=30)
        fa.add_middleware(RateLimitMiddleware, limiter=fa_limiter, policy="k", trusted_proxies=["127.0.0.0/8"])

        @fa.get("/r")
        async def fr(request: Request):
            return PlainTextResponse(request.state.rate_limit.key)
        # uvicorn's own proxy_headers (on by default, trusting 127.0.0.1) would rewrite the peer
        # from X-Forwarded-For before the middleware sees it: off, so the middleware's walk is tested
        server = UvicornThread(fa, proxy_headers=False)
        try:
            a = [get(server.port, "/r", {"x-forwarded-for": "198.51.100.7"}) for _ in range(3)]
            self.assertEqual([s for s, _, _ in a], [200, 200, 429])
            self.assertEqual(a[0][2], "198.51.100.7")
            # another client behind the proxy has its own count; a spoofed hop left of an
            # untrusted one is not believed
            self.assertEqual(get(server.port, "/r", {"x-forwarded-for": "203.0.113.9, 198.51.100.8"})[2], "198.51.100.8")
        finally:
            server.stop()
        fa2 = FastAPI()
        fa2_limiter = AsyncRedisLimiter(self.redis.url, {"k": "2/1000s"}, key_prefix=f"{PREFIX}trust2:", on_failure="closed", timeout=30)
        fa2.add_middleware(RateLimitMiddleware, limiter=fa2_limiter, policy="k")  # trusts nobody

        @fa2.get("/r")
        async def fr2(request: Request):
            return PlainTextResponse(request.state.rate_limit.key)
        server = UvicornThread(fa2, proxy_headers=False)
        try:
            self.assertEqual(get(server.port, "/r", {"x-forwarded-for": "198.51.100.99"})[2], "127.0.0.1")
        finally:
            server.stop()
        with self.assertRaisesRegex(RateLimitError, "trusted_proxies: '10.0.0/8' is not an IP address"):
            RateLimitMiddleware(fa, limiter=fa_limiter, policy="k", trusted_proxies=["10.0.0/8"])

    def test_skip_successful_and_failed_requests(self):
        app = Flask(__name__)

        @app.get("/login/<result>")
        @rate_limit(self.limiter, "two", key=lambda _: f"login-{RUN_ID}", skip_successful_requests=True)
        def login(result):
            return ("ok", 200) if result == "ok" else ("no", 401)

        @app.get("/work/<result>")
        @rate_limit(self.limiter, "two", key=lambda _: f"work-{RUN_ID}", skip_failed_requests=True)
        def work(result):
            return ("ok", 200) if result == "ok" else ("boom", 500)
        server = FlaskThread(app)
        try:
            for _ in range(4):  # successful logins do not count: the unit is back after each
                self.assertEqual(get(server.port, "/login/ok")[0], 200)
                eventually(lambda: self.remaining("two", f"login-{RUN_ID}") == 2)
            self.assertEqual([get(server.port, "/login/bad")[0] for _ in range(3)], [401, 401, 429])
            for _ in range(4):  # failures do not count
                self.assertEqual(get(server.port, "/work/bad")[0], 500)
                eventually(lambda: self.remaining("two", f"work-{RUN_ID}") == 2)
            self.assertEqual([get(server.port, "/work/ok")[0] for _ in range(3)], [200, 200, 429])
        finally:
            server.stop()

        fa = FastAPI()
        fa_limiter = AsyncRedisLimiter(self.redis.url, POLICIES, key_prefix=PREFIX, on_failure="closed", timeout=30)
        fa.add_middleware(RateLimitMiddleware, limiter=fa_limiter, policy="two", key=lambda _: f"fa-skip-{RUN_ID}",
                          skip_failed_requests=True)

        @fa.get("/r/{result}")
        async def fr(result: str):
            return PlainTextResponse("x", status_code=200 if result == "ok" else 503)
        server = UvicornThread(fa)
        try:
            for _ in range(3):
                self.assertEqual(get(server.port, "/r/bad")[0], 503)
                eventually(lambda: self.remaining("two", f"fa-skip-{RUN_ID}") == 2)
            self.assertEqual([get(server.port, "/r/ok")[0] for _ in range(3)], [200, 200, 429])
        finally:
            server.stop()

    def test_a_limit_per_route_in_fastapi(self):
        fa = FastAPI()
        fa_limiter = AsyncRedisLimiter(self.redis.url, {"login": "2/1000s"}, key_prefix=f"{PREFIX}route:",
                                       on_failure="closed", timeout=30)
        fa.add_exception_handler(RateLimitExceeded, rate_limit_exceeded_handler)
        login = RateLimitDependency(fa_limiter, "login", key=lambda _: f"route-{RUN_ID}", problem_json=True)

        @fa.post("/login")
        async def do_login(info=Depends(login)):
            return {"left": info.remaining}

        @fa.get("/free")
        async def free():
            return "free"
        server = UvicornThread(fa)
        try:
            answers = []
            for _ in range(3):
                c = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
                c.request("POST", "/login")
                r = c.getresponse()
                answers.append((r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()))
                c.close()
            self.assertEqual([(s, json.loads(b)) for s, _, b in answers[:2]], [(200, {"left": 1}), (200, {"left": 0})])
            self.assertEqual(answers[0][1]["ratelimit-policy"], '"login";q=2;w=1000')
            status, h, body = answers[2]
            self.assertEqual(status, 429)
            self.assertTrue(h["content-type"].startswith("application/problem+json"))
            self.assertEqual(json.loads(body)["violated-policies"], ["login"])
            self.assertGreaterEqual(int(h["retry-after"]), 1)
            self.assertEqual([get(server.port, "/free")[0] for _ in range(4)], [200] * 4)  # other routes unlimited
        finally:
            server.stop()
        with self.assertRaisesRegex(RateLimitError, "use RateLimitMiddleware"):
            RateLimitDependency(fa_limiter, "login", skip_failed_requests=True)

    def test_an_app_wide_default_in_flask(self):
        """FlaskRateLimit: every route counts against the default ("two": 2 per 1000 s) unless it
        has its own @rate_limit (then only its own) or is exempt; init_app for app factories."""
        ext = FlaskRateLimit(limiter=self.limiter, policy="two", key=lambda _: f"default-{RUN_ID}")
        app = Flask(__name__)
        ext.init_app(app)

        @app.get("/a")
        def a():
            return {"left": g.rate_limit.remaining}

        @app.get("/own")
        @rate_limit(self.limiter, "api", key=lambda _: f"own-{RUN_ID}")
        def own():
            return "own"

        @app.get("/free")
        @FlaskRateLimit.exempt
        def free():
            return "free"
        server = FlaskThread(app)
        try:
            self.assertEqual([get(server.port, "/own")[0] for _ in range(4)], [200, 200, 200, 429])  # "api": 3
            self.assertEqual([get(server.port, "/free")[0] for _ in range(4)], [200] * 4)
            answers = [get(server.port, "/a") for _ in range(3)]
            self.assertEqual([(s, json.loads(b)) for s, _, b in answers[:2]], [(200, {"left": 1}), (200, {"left": 0})])
            self.assertEqual(answers[0][1]["ratelimit-policy"], '"two";q=2;w=1000')
            status, h, _ = answers[2]
            self.assertEqual((status, h["ratelimit"]), (429, f'"two";r=0;t={h["retry-after"]}'))
            self.assertEqual(self.remaining("api", f"own-{RUN_ID}"), 0)
        finally:
            server.stop()
        with self.assertRaises(RateLimitError):
            FlaskRateLimit(limiter=self.limiter, policy="nope")


if __name__ == "__main__":
    unittest.main()
