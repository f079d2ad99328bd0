"""concurrency_flask.py — a Flask view decorator holding a lease while the view runs, with a
blocking RatelimitdLimiter (concurrency.py says what it does):
    @app.get("/report")
    @concurrency_limit(limiter, "db", key=lambda req: "tenant:7", timeout=2.0, priority_header="x-priority")
    def report(): ...
The lease is released when the view returns (its response's status decides ok or dropped) or
raises (dropped; the exception propagates to Flask, which answers 500), in a finally: a WSGI
server gives a view no sign that its client went away, so the view's end is the release."""
import functools
import time

from flask import Response, make_response, request

from .concurrency import bad_request, check_lease_options, granted_headers, lease_args, outcome, render_refusal, unless_conflict
from .errors import RateLimitError


def concurrency_limit(limiter, policy, *, key, cost=1, skip=None, priority_header=None, max_wait_ms=None,
                      timeout=None, on_release_error=None):
    check_lease_options(limiter, policy, key, timeout)

    def wrap(view):
        @functools.wraps(view)
        def limited(*args, **kwargs):
            if skip is not None and skip(request):
                return view(*args, **kwargs)
            name, k, c, options = lease_args(policy, key, cost, priority_header, max_wait_ms, request, request.headers)
            try:
                lease = unless_conflict(limiter, limiter.acquire_lease(name, k, c, **options))
                answer = None if lease.allowed else render_refusal(lease)
            except RateLimitError as e:
                answer = bad_request(e)
            if answer is not None:
                return Response(answer.body, status=answer.status, headers=answer.headers, content_type="application/json")
            start, status = time.monotonic(), None
            try:
                response = make_response(view(*args, **kwargs))
                status = response.status_code
            finally:
                try:
                    limiter.release_lease(lease, **outcome(status, status is None, time.monotonic() - start, timeout))
                except Exception as e:  # noqa: BLE001 - the view's answer stands; the hook hears
                    if on_release_error is not None:
                        on_release_error(e)
            for n, v in granted_headers(lease):
                response.headers[n] = v
            return response
        return limited
    return wrap
