"""middleware.py — what the Starlette/FastAPI middleware and the Flask decorator share: one
decision per request (policy, key, cost and skip from the caller) rendered by headers.py, so
both answer exactly what ratelimitd answers. The failure policy is the limiter's own. A key or
cost the request brought that ratelimitd would refuse (RateLimitError invalid_key/invalid_cost)
answers ratelimitd's 400 {"error", "message"} on either back-end (issue 31 defect 6: it was a
500); any other exception from a key or cost function is the application's bug and propagates.
Usage after the response (docs/usage.md): decide_async(..., reserve=True) also answers the
admitted request's AsyncReservation (usage.py), which the Starlette middleware reconciles once
the response has been sent."""
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


def decide_sync(limiter, policy, key, cost, skip, req) -> Optional[Answer]:
    if skip is not None and skip(req):
        return None
    name = _resolve(policy, req)
    try:
        decision = limiter.acquire(name, key(req), _resolve(cost, req))
    except RateLimitError as e:
        return _bad_request(e)
    return render(limiter, name, decision)


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
            decision = await limiter.acquire(name, k, c)
        except RateLimitError as e:
            answer = _bad_request(e)
        else:
            answer = render(limiter, name, decision)
            if decision.allowed:
                reservation = AsyncReservation(limiter, name, k, c, decision)
    return (answer, reservation) if reserve else answer
