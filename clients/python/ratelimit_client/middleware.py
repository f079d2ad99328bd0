"""middleware.py — what the Starlette/FastAPI middleware and the Flask decorator share: one
decision per request (policy, key, cost and skip from the caller) rendered by headers.py, so
both answer exactly what ratelimitd answers. The failure policy is the limiter's own. A key or
cost the request brought that ratelimitd would refuse (RateLimitError invalid_key/invalid_cost)
answers ratelimitd's 400 {"error", "message"} on either back-end (issue 31 defect 6: it was a
500); any other exception from a key or cost function is the application's bug and propagates.
Usage after the response (docs/usage.md): decide_sync / decide_async(..., reserve=True) also
answer the admitted request's Reservation / AsyncReservation (usage.py), which the Flask
decorator and the Starlette middleware reconcile once the response has been sent."""
from typing import Optional

from .errors import RateLimitError
from .headers import Answer, PolicyInfo, render_decisions


import json

_BAD_REQUEST = ("invalid_key", "invalid_cost")  # ratelimitd's 400s: the request's input


def _bad_request(e: RateLimitError) -> Answer:
    if e.code not in _BAD_REQUEST:
        raise e
    return Answer(400, [("Cache-Control", "no-store")], json.dumps({"error": e.code, "message": str(e)}))


def check_options(limiter, policy, key) -> None:
    """Refuses options that would fail every request (issue 31 defect 7): no limiter, a key that
    is not callable, no policy, or a policy name a Redis limiter lacks (ratelimitd's policies are
    its own, known from its answers). The adapters call it when they are made."""
    from ._core import LimiterCore  # here: _core imports redis-py, the adapters' users have it
    if limiter is None:
        raise RateLimitError("invalid_policy", "a limiter is required")
    if not callable(key):
        raise RateLimitError("invalid_policy", "key must be a function of the request")
    if not callable(policy) and (not isinstance(policy, str) or not policy):
        raise RateLimitError("invalid_policy", "policy must be a policy name or a function of the request")
    if isinstance(policy, str) and isinstance(limiter, LimiterCore):
        limiter.policy(policy)


def _resolve(value, req):
    return value(req) if callable(value) else value


def render(limiter, policy: str, decision) -> Answer:
    info = limiter.describe(policy)
    if info is None:
        # ratelimitd has not answered once since the app started, so nothing says the policy's
        # quota and window: the failure policy still answers (issue 31 defect 1), without the
        # RateLimit-Policy and RateLimit fields it cannot fill in truthfully.
        if decision.reason not in ("failed_open", "failed_closed"):
            raise RateLimitError("protocol", f"no quota or window known for policy {policy!r}")
        answer = render_decisions([decision], [PolicyInfo(policy, decision.limit, 0)])
        headers = [(k, v) for k, v in answer.headers if k not in ("RateLimit-Policy", "RateLimit")]
        return Answer(answer.status, headers, answer.body)
    if decision.limit:
        info = type(info)(info.name, decision.limit, info.window_us)
    return render_decisions([decision], [info])


def check_usage(limiter, usage) -> None:
    """Refuses a usage that is not a function, or one with a limiter that cannot report."""
    if usage is not None and (not callable(usage) or not hasattr(limiter, "report")):
        raise RateLimitError("invalid_policy", "usage must be a function of the request and response, with a limiter that has report()")


def _decided(limiter, name, k, c, decision, reservation_cls):
    """The rendered answer, and the reservation of an admitted request (usage.py)."""
    return render(limiter, name, decision), reservation_cls(limiter, name, k, c, decision) if decision.allowed else None


def decide_sync(limiter, policy, key, cost, skip, req, reserve: bool = False):
    """The rendered answer (None: skipped); with reserve=True a pair (answer, the admitted
    request's Reservation or None)."""
    from .usage import Reservation
    answer, reservation = None, None
    if skip is None or not skip(req):
        name, k, c = _resolve(policy, req), key(req), _resolve(cost, req)
        try:
            answer, reservation = _decided(limiter, name, k, c, limiter.acquire(name, k, c), Reservation)
        except RateLimitError as e:
            answer = _bad_request(e)
    return (answer, reservation) if reserve else answer


def reconcile_sync(usage, reservation, request, response, on_report_error) -> None:
    """Reports the usage of a response already sent; never raises (on_report_error hears)."""
    try:
        actual = usage(request, response)
        if actual is not None:
            reservation.reconcile(actual)
    except Exception as e:  # noqa: BLE001 - the response is gone: only the hook can hear of it
        if on_report_error is not None:
            on_report_error(e)


async def decide_async(limiter, policy, key, cost, skip, req, reserve: bool = False):
    """The rendered answer (None: skipped); with reserve=True a pair (answer, the admitted
    request's AsyncReservation or None)."""
    from .usage import AsyncReservation
    answer, reservation = None, None
    if skip is None or not skip(req):
        name = _resolve(policy, req)
        k = key(req)
        if hasattr(k, "__await__"):
            k = await k
        c = _resolve(cost, req)
        try:
            answer, reservation = _decided(limiter, name, k, c, await limiter.acquire(name, k, c), AsyncReservation)
        except RateLimitError as e:
            answer = _bad_request(e)
    return (answer, reservation) if reserve else answer
