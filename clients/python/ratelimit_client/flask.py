"""flask.py — a Flask view decorator with a blocking limiter (RedisLimiter, RatelimitdLimiter):
    @app.get("/items")
    @rate_limit(limiter, "api", key=lambda req: req.remote_addr)
    def items(): ...
Admitted requests run the view and its response gets RateLimit-Policy and RateLimit; denied ones
get ratelimitd's 429 (400 for a cost over the capacity) without running the view."""
import functools

from flask import Response, make_response, request

from .middleware import check_options, decide_sync


def rate_limit(limiter, policy, *, key, cost=1, skip=None):
    check_options(limiter, policy, key)
    def wrap(view):
        @functools.wraps(view)
        def limited(*args, **kwargs):
            answer = decide_sync(limiter, policy, key, cost, skip, request)
            if answer is None:
                return view(*args, **kwargs)
            if answer.status != 200:
                return Response(answer.body, status=answer.status, headers=answer.headers, content_type="application/json")
            response = make_response(view(*args, **kwargs))
            for name, value in answer.headers:
                response.headers[name] = value
            return response
        return limited
    return wrap
