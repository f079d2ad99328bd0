"""starlette.py — ASGI middleware for Starlette and FastAPI:
    app.add_middleware(RateLimitMiddleware, limiter=..., policy="api")
with an asyncio limiter (AsyncRedisLimiter, AsyncRatelimitdLimiter). Admitted requests go on and
their response gets the rate-limit fields (the header set ratelimitd offers: headers="ietf",
"draft6", "x-ratelimit", "none"); request.state.rate_limit is the RateLimitInfo; denied ones are
answered here with ratelimitd's 429 (problem_json=True: its problem+json), or the refusal the
options give (status_code, message, handler(request, info) -> a Response), 400 for a cost over
the capacity. key=None: the client address, X-Forwarded-For believed only from trusted_proxies.
skip_successful_requests / skip_failed_requests: the admitted unit is given back once the app's
status is known. Non-HTTP scopes pass untouched.
Usage after the response (docs/usage.md): with usage=fn, `cost` is the estimate and each admitted
request is reconciled once the app has sent its response (after the app's call returns: what
call_next would give), by fn(request, response) -> int or None: response has .status_code and
.headers (the response's, e.g. an LLM usage header); request.state is what the handler set.
None: the estimate stands. A failed report (bad usage, the limiter refused it) goes to
on_report_error (default: ignored); the limiter's failure policy answers store failures.
Per route in FastAPI: RateLimitDependency (fastapi.py)."""
from types import SimpleNamespace

from starlette.datastructures import Headers
from starlette.requests import Request

from .middleware import check_usage, decide_async, gives_back, make_options, refusal


def peer(req: Request):
    return req.client.host if req.client else None


def forwarded_for(req: Request):
    values = req.headers.getlist("x-forwarded-for")
    return ", ".join(values) if values else None


def _raw(headers):
    return [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]


class RateLimitMiddleware:
    def __init__(self, app, *, limiter, policy, key=None, cost=1, skip=None, usage=None, on_report_error=None,
                 **options):
        self.opts = make_options(limiter, policy, key, peer=peer, forwarded_for=forwarded_for, cost=cost, skip=skip,
                                 **options)
        check_usage(limiter, usage)
        self.app, self.usage, self.on_report_error = app, usage, on_report_error

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        answer, reservation, info = await decide_async(self.opts, request)
        if answer is None:
            await self.app(scope, receive, send)
            return
        raw = _raw(answer.headers)
        if answer.status != 200:
            await self._refuse(request, answer, info, raw, scope, receive, send)
            return
        request.state.rate_limit = info  # scope["state"]: the handler's Request sees it
        response = SimpleNamespace(status_code=None, headers=Headers())

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                response.status_code, response.headers = message["status"], Headers(raw=list(message.get("headers", [])))
                message = dict(message)
                message["headers"] = list(message.get("headers", [])) + raw
            await send(message)

        await self.app(scope, receive, send_with_headers)
        if reservation is None or response.status_code is None:
            return
        if gives_back(self.opts, response.status_code):
            await self._settle(reservation.cancel())
        elif self.usage is not None:
            await self._settle(self._reconcile(reservation, request, response))

    async def _refuse(self, request, answer, info, raw, scope, receive, send) -> None:
        r = refusal(self.opts, request, answer, info)
        if r is None:
            response = self.opts.handler(request, info)
            for k, v in answer.headers:
                response.headers[k] = v
            await response(scope, receive, send)
            return
        status, content_type, text = r
        body = text.encode("utf-8")
        await send({"type": "http.response.start", "status": status,
                    "headers": raw + [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})

    async def _settle(self, awaitable) -> None:
        """Awaits a report after the response; never raises (on_report_error hears)."""
        try:
            await awaitable
        except Exception as e:  # noqa: BLE001 - the response is gone: only the hook can hear of it
            if self.on_report_error is not None:
                self.on_report_error(e)

    async def _reconcile(self, reservation, request, response) -> None:
        actual = self.usage(request, response)
        if actual is not None:
            await reservation.reconcile(actual)
