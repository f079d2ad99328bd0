"""fastapi.py — a limit per route in FastAPI, as slowapi users write it:
    limited = RateLimitDependency(limiter, "login")
    app.add_exception_handler(RateLimitExceeded, rate_limit_exceeded_handler)
    @app.post("/login", dependencies=[Depends(limited)])   # or info = Depends(limited)
with an asyncio limiter. The dependency takes the same options as RateLimitMiddleware (key=None:
the client address through trusted_proxies; headers, problem_json, status_code, message,
handler). Admitted: the route's response gets the rate-limit fields, the dependency's value
(and request.state.rate_limit) is the RateLimitInfo. Refused: RateLimitExceeded carries the
whole answer (ratelimitd's 429, or the options' refusal), which rate_limit_exceeded_handler
sends as it is. skip_successful_requests / skip_failed_requests need the response's status,
which a dependency never sees: they are refused here (use RateLimitMiddleware)."""
from starlette.requests import Request
from starlette.responses import Response

from .errors import RateLimitError
from .middleware import decide_async, make_options, refusal
from .starlette import forwarded_for, peer


class RateLimitExceeded(Exception):
    """A refusal, with the response to send (rate_limit_exceeded_handler sends it)."""

    def __init__(self, response: Response):
        super().__init__(f"rate limited: {response.status_code}")
        self.response = response


async def rate_limit_exceeded_handler(request: Request, exc: RateLimitExceeded) -> Response:
    return exc.response


class RateLimitDependency:
    def __init__(self, limiter, policy, *, key=None, cost=1, **options):
        for no in ("skip_successful_requests", "skip_failed_requests"):
            if options.get(no):
                raise RateLimitError("invalid_policy", f"{no} needs the response's status, which a dependency never sees: "
                                     "use RateLimitMiddleware")
        self.opts = make_options(limiter, policy, key, peer=peer, forwarded_for=forwarded_for, cost=cost, **options)

    async def __call__(self, request: Request, response: Response):
        answer, _, info = await decide_async(self.opts, request)
        if answer is None:
            return None
        if answer.status != 200:
            r = refusal(self.opts, request, answer, info)
            if r is None:
                out = self.opts.handler(request, info)
            else:
                status, content_type, body = r
                out = Response(body, status_code=status, media_type=content_type)
            for k, v in answer.headers:
                out.headers[k] = v
            raise RateLimitExceeded(out)
        for k, v in answer.headers:
            response.headers[k] = v
        request.state.rate_limit = info
        return info
