"""concurrency_starlette.py — ASGI concurrency middleware for Starlette and FastAPI
(concurrency.py says what it does):
    app.add_middleware(ConcurrencyLimitMiddleware, limiter=AsyncRatelimitdLimiter(...), policy="db",
                       key=lambda req: "tenant:7", timeout=2.0, priority_header="x-priority")
The status is read from the app's http.response.start; an exception out of the app (answered 500
by Starlette's ServerErrorMiddleware outside this one) releases 'dropped' and propagates; a
cancelled app (client gone) releases without an outcome from a task of its own, since awaiting
inside a cancelled scope would be cancelled again. Non-HTTP scopes pass untouched."""
import asyncio
import time

from starlette.requests import Request

from .concurrency import bad_request, check_lease_options, granted_headers, lease_args, outcome, render_refusal, unless_conflict
from .errors import RateLimitError


class ConcurrencyLimitMiddleware:
    def __init__(self, app, *, limiter, policy, key, cost=1, skip=None, priority_header=None, max_wait_ms=None,
                 timeout=None, on_release_error=None):
        check_lease_options(limiter, policy, key, timeout)
        self.app, self.limiter, self.policy, self.key, self.cost, self.skip = app, limiter, policy, key, cost, skip
        self.priority_header, self.max_wait_ms, self.timeout = priority_header, max_wait_ms, timeout
        self.on_release_error = on_release_error
        self._pending = set()  # releases of cancelled requests, kept alive until done

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        if self.skip is not None and self.skip(request):
            await self.app(scope, receive, send)
            return
        name, k, c, options = lease_args(self.policy, self.key, self.cost, self.priority_header, self.max_wait_ms,
                                         request, request.headers)
        if hasattr(k, "__await__"):
            k = await k
        try:
            lease = unless_conflict(self.limiter, await self.limiter.acquire_lease(name, k, c, **options))
            answer = None if lease.allowed else render_refusal(lease)
        except RateLimitError as e:
            answer = bad_request(e)
        if answer is not None:
            body = answer.body.encode("utf-8")
            raw = [(n.lower().encode("latin-1"), v.encode("latin-1")) for n, v in answer.headers]
            await send({"type": "http.response.start", "status": answer.status,
                        "headers": raw + [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        raw = [(n.lower().encode("latin-1"), v.encode("latin-1")) for n, v in granted_headers(lease)]
        status = []

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                status.append(message["status"])
                message = dict(message)
                message["headers"] = list(message.get("headers", [])) + raw
            await send(message)

        start = time.monotonic()
        failed = True
        try:
            await self.app(scope, receive, send_with_headers)
            failed = False
        except asyncio.CancelledError:
            task = asyncio.get_running_loop().create_task(self._release(lease, {}))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)
            raise
        except BaseException:
            await self._release(lease, outcome(None, True, time.monotonic() - start, self.timeout))
            raise
        await self._release(lease, outcome(status[0] if status else None, failed, time.monotonic() - start, self.timeout))

    async def _release(self, lease, kwargs) -> None:
        try:
            await self.limiter.release_lease(lease, **kwargs)
        except Exception as e:  # noqa: BLE001 - the response is gone: only the hook can hear of it
            if self.on_release_error is not None:
                self.on_release_error(e)
