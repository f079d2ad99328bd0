"""middleware.py — what the Starlette/FastAPI middleware and the Flask decorator share: one
decision per request (policy, key, cost and skip from the caller) rendered by headers.py, so
both answer exactly what ratelimitd answers. The failure policy is the limiter's own; an
exception from a key or cost function, or bad input, is the application's bug and propagates."""
from typing import Optional

from .errors import RateLimitError
from .headers import Answer, PolicyInfo, render_decisions


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
    return render(limiter, name, limiter.acquire(name, key(req), _resolve(cost, req)))


async def decide_async(limiter, policy, key, cost, skip, req) -> Optional[Answer]:
    if skip is not None and skip(req):
        return None
    name = _resolve(policy, req)
    k = key(req)
    if hasattr(k, "__await__"):
        k = await k
    return render(limiter, name, await limiter.acquire(name, k, _resolve(cost, req)))
