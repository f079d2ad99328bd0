"""flask.py — a Flask view decorator with a blocking limiter (RedisLimiter, RatelimitdLimiter):
    @app.get("/items")
    @rate_limit(limiter, "api")
    def items(): ...
Admitted requests run the view (flask.g.rate_limit is the RateLimitInfo) and its response gets
the rate-limit fields (headers="ietf", "draft6", "x-ratelimit", "none", as ratelimitd's
`headers:`); denied ones get ratelimitd's 429 (problem_json=True: its problem+json), or the
refusal the options give (status_code, message, handler(request, info) -> any view return
value), without running the view; 400 for a cost over the capacity. key=None: the client
address, X-Forwarded-For believed only from trusted_proxies. The policy may be "10/minute" in
the limiter's policies. skip_successful_requests / skip_failed_requests give the admitted unit
back once the view's status is known.
Usage after the response (docs/usage.md): with usage=fn, `cost` is the estimate and each
admitted request is reconciled once its response has been sent (werkzeug's call_on_close), by
fn(request, response) -> int or None (None: the estimate stands); a failed report goes to
on_report_error."""
import functools

from flask import Response, g, make_response, request

from .middleware import check_usage, decide_sync, gives_back, make_options, reconcile_sync, refusal


def _forwarded_for(req):
    values = req.headers.getlist("X-Forwarded-For")
    return ", ".join(values) if values else None


def rate_limit(limiter, policy, *, key=None, cost=1, skip=None, usage=None, on_report_error=None, **options):
    opts = make_options(limiter, policy, key, peer=lambda req: req.remote_addr, forwarded_for=_forwarded_for,
                        cost=cost, skip=skip, **options)
    check_usage(limiter, usage)

    def wrap(view):
        @functools.wraps(view)
        def limited(*args, **kwargs):
            answer, reservation, info = decide_sync(opts, request)
            if answer is None:
                return view(*args, **kwargs)
            if answer.status != 200:
                r = refusal(opts, request, answer, info)
                if r is None:
                    response = make_response(opts.handler(request, info))
                    for name, value in answer.headers:
                        response.headers[name] = value
                    return response
                status, content_type, body = r
                return Response(body, status=status, headers=answer.headers, content_type=content_type)
            g.rate_limit = info
            response = make_response(view(*args, **kwargs))
            for name, value in answer.headers:
                response.headers[name] = value
            if reservation is None:
                return response
            if gives_back(opts, response.status_code):
                settle = lambda: reconcile_sync(lambda *_: 0, reservation, None, None, on_report_error)  # noqa: E731
                response.call_on_close(settle)
            elif usage is not None:
                req = request._get_current_object()  # the proxy is gone once the response is sent
                response.call_on_close(lambda: reconcile_sync(usage, reservation, req, response, on_report_error))
            return response
        return limited
    return wrap
