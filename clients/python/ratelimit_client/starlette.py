"""starlette.py — ASGI middleware for Starlette and FastAPI:
    app.add_middleware(RateLimitMiddleware, limiter=..., policy="api", key=lambda req: req.client.host)
with an asyncio limiter (AsyncRedisLimiter, AsyncRatelimitdLimiter). Admitted requests go on and
their response gets RateLimit-Policy and RateLimit; denied ones are answered here with
ratelimitd's 429 (400 for a cost over the capacity). Non-HTTP scopes pass untouched.
Usage after the response (docs/usage.md): with usage=fn, `cost` is the estimate and each admitted
request is reconciled once the app has sent its response (after the app's call returns: what
call_next would give), by fn(request, response) -> int or None: response has .status_code and
.headers (the response's, e.g. an LLM usage header); request.state is what the handler set.
None: the estimate stands. A failed report (bad usage, the limiter refused it) goes to
on_report_error (default: ignored); the limiter's failure policy answers store failures."""
from types import SimpleNamespace

from starlette.datastructures import Headers
from starlette.requests import Request

from .middleware import check_options, check_usage, decide_async


class RateLimitMiddleware:
    def __init__(self, app, *, limiter, policy, key, cost=1, skip=None, usage=None, on_report_error=None):
        check_options(limiter, policy, key)
        check_usage(limiter, usage)
        self.app, self.limiter, self.policy, self.key, self.cost, self.skip = app, limiter, policy, key, cost, skip
        self.usage, self.on_report_error = usage, on_report_error

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        answer, reservation = await decide_async(self.limiter, self.policy, self.key, self.cost, self.skip, request,
                                                 reserve=True)
        if answer is None:
            await self.app(scope, receive, send)
            return
        raw = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers]
        if answer.status != 200:
            body = answer.body.encode("utf-8")
            await send({"type": "http.response.start", "status": answer.status,
                        "headers": raw + [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return

        response = SimpleNamespace(status_code=None, headers=Headers())

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                response.status_code, response.headers = message["status"], Headers(raw=list(message.get("headers", [])))
                message = dict(message)
                message["headers"] = list(message.get("headers", [])) + raw
            await send(message)

        await self.app(scope, receive, send_with_headers)
        if self.usage is not None and reservation is not None and response.status_code is not None:
            await self._reconcile(reservation, request, response)

    async def _reconcile(self, reservation, request, response) -> None:
        """Reports the usage of the response just sent; never raises (on_report_error hears)."""
        try:
            actual = self.usage(request, response)
            if actual is not None:
                await reservation.reconcile(actual)
        except Exception as e:  # noqa: BLE001 - the response is gone: only the hook can hear of it
            if self.on_report_error is not None:
                self.on_report_error(e)
