"""flask.py — a Flask view decorator with a blocking limiter (RedisLimiter, RatelimitdLimiter):
    @app.get("/items")
    @rate_limit(limiter, "api", key=lambda req: req.remote_addr)
    def items(): ...
Admitted requests run the view and its response gets RateLimit-Policy and RateLimit; denied ones
get ratelimitd's 429 (400 for a cost over the capacity) without running the view.
Usage after the response (docs/usage.md): with usage=fn, `cost` is the estimate and each
admitted request is reconciled once its response has been sent (werkzeug's call_on_close), by
fn(request, response) -> int or None (None: the estimate stands); a failed report goes to
on_report_error."""
import functools

from flask import Response, make_response, request

from .middleware import check_options, check_usage, decide_sync, reconcile_sync


def rate_limit(limiter, policy, *, key, cost=1, skip=None, usage=None, on_report_error=None):
    check_options(limiter, policy, key)
    check_usage(limiter, usage)
    def wrap(view):
        @functools.wraps(view)
        def limited(*args, **kwargs):
            answer, reservation = decide_sync(limiter, policy, key, cost, skip, request, reserve=True)
            if answer is None:
                return view(*args, **kwargs)
            if answer.status != 200:
                return Response(answer.body, status=answer.status, headers=answer.headers, content_type="application/json")
            response = make_response(view(*args, **kwargs))
            for name, value in answer.headers:
                response.headers[name] = value
            if usage is not None and reservation is not None:
                req = request._get_current_object()  # the proxy is gone once the response is sent
                response.call_on_close(lambda: reconcile_sync(usage, reservation, req, response, on_report_error))
            return response
        return limited
    return wrap
