"""flask.py — Flask: a view decorator for one route, and an app-wide default, both with a
blocking limiter (RedisLimiter, RatelimitdLimiter):
    @app.get("/items")
    @rate_limit(limiter, "api")
    def items(): ...

    FlaskRateLimit(app, limiter=limiter, policy="api")  # every route ...
    @FlaskRateLimit.exempt                               # ... but this one
(as Flask-Limiter's default limits: a route with its own @rate_limit, or marked exempt, is not
counted by the default; init_app for the application-factory pattern).
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

_LIMITED = "_ratelimit_route"  # set on a view that has its own limit or is exempt from the default


def _forwarded_for(req):
    values = req.headers.getlist("X-Forwarded-For")
    return ", ".join(values) if values else None


def _options(limiter, policy, key, cost, skip, usage, options):
    opts = make_options(limiter, policy, key, peer=lambda req: req.remote_addr, forwarded_for=_forwarded_for,
                        cost=cost, skip=skip, **options)
    check_usage(limiter, usage)
    return opts


def _refused(opts, answer, info):
    """The response to a request not admitted (a 429 or a 400)."""
    r = refusal(opts, request, answer, info)
    if r is None:
        response = make_response(opts.handler(request, info))
        for name, value in answer.headers:
            response.headers[name] = value
        return response
    status, content_type, body = r
    return Response(body, status=status, headers=answer.headers, content_type=content_type)


def _admitted(opts, answer, reservation, response, usage, on_report_error):
    """The view's response with the rate-limit fields, settled once it has been sent."""
    for name, value in answer.headers:
        response.headers[name] = value
    if reservation is None:
        return response
    if gives_back(opts, response.status_code):
        response.call_on_close(lambda: reconcile_sync(lambda *_: 0, reservation, None, None, on_report_error))
    elif usage is not None:
        req = request._get_current_object()  # the proxy is gone once the response is sent
        response.call_on_close(lambda: reconcile_sync(usage, reservation, req, response, on_report_error))
    return response


def rate_limit(limiter, policy, *, key=None, cost=1, skip=None, usage=None, on_report_error=None, **options):
    opts = _options(limiter, policy, key, cost, skip, usage, options)

    def wrap(view):
        @functools.wraps(view)
        def limited(*args, **kwargs):
            answer, reservation, info = decide_sync(opts, request)
            if answer is None:
                return view(*args, **kwargs)
            if answer.status != 200:
                return _refused(opts, answer, info)
            g.rate_limit = info
            return _admitted(opts, answer, reservation, make_response(view(*args, **kwargs)), usage, on_report_error)
        setattr(limited, _LIMITED, True)
        return limited
    return wrap


class FlaskRateLimit:
    """An app-wide default limit: every request whose view has no @rate_limit of its own and is
    not @FlaskRateLimit.exempt (static files and 404s included: they cost the server too).
    Options as rate_limit's."""

    def __init__(self, app=None, *, limiter, policy, key=None, cost=1, skip=None, usage=None, on_report_error=None,
                 **options):
        self.opts = _options(limiter, policy, key, cost, skip, usage, options)
        self.usage, self.on_report_error = usage, on_report_error
        if app is not None:
            self.init_app(app)

    @staticmethod
    def exempt(view):
        """A view the default does not count (it may have no limit at all)."""
        setattr(view, _LIMITED, True)
        return view

    def init_app(self, app) -> None:
        app.before_request(self._before)
        app.after_request(self._after)

    def _before(self):
        if request.endpoint is not None and getattr(self._app_view(request.endpoint), _LIMITED, False):
            return None
        answer, reservation, info = decide_sync(self.opts, request)
        if answer is None:
            return None
        if answer.status != 200:
            return _refused(self.opts, answer, info)
        g.rate_limit = info
        g._ratelimit_default = (answer, reservation)
        return None

    @staticmethod
    def _app_view(endpoint):
        from flask import current_app
        return current_app.view_functions.get(endpoint)

    def _after(self, response):
        admitted = g.pop("_ratelimit_default", None)
        if admitted is None:
            return response
        answer, reservation = admitted
        return _admitted(self.opts, answer, reservation, response, self.usage, self.on_report_error)
