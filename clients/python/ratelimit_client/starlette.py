"""starlette.py — ASGI middleware for Starlette and FastAPI:
    app.add_middleware(RateLimitMiddleware, limiter=..., policy="api", key=lambda req: req.client.host)
with an asyncio limiter (AsyncRedisLimiter, AsyncRatelimitdLimiter). Admitted requests go on and
their response gets RateLimit-Policy and RateLimit; denied ones are answered here with
ratelimitd's 429 (400 for a cost over the capacity). Non-HTTP scopes pass untouched."""
from starlette.requests import Request

from .middleware import check_options, decide_async


class RateLimitMiddleware:
    def __init__(self, app, *, limiter, policy, key, cost=1, skip=None):
        check_options(limiter, policy, key)
        self.app, self.limiter, self.policy, self.key, self.cost, self.skip = app, limiter, policy, key, cost, skip

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        answer = await decide_async(self.limiter, self.policy, self.key, self.cost, self.skip, Request(scope))
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

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = list(message.get("headers", [])) + raw
            await send(message)

        await self.app(scope, receive, send_with_headers)
