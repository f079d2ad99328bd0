"""concurrency.py — what the concurrency middleware (concurrency_starlette.py,
concurrency_flask.py) share: each request holds a lease of a ratelimitd concurrency policy
(leases.py) while its handler runs, as Netflix's concurrency-limits servlet filter does.
Acquired before the handler: refused → ratelimitd's 429 (Retry-After, its RateLimit fields, the
body headers.py renders for the rate middleware's denials); an unreachable ratelimitd answers by
the limiter's failure policy (failed_open runs the handler without a lease), which answers a
policy_conflict too (counted in failures and logged: the app's configuration error, not the
caller's). Released once, whatever happens (finally), with the outcome of `outcome()`:
  - the handler took longer than `timeout` seconds → 'timeout' (it is not cut off);
  - status >= 500 or an exception → 'dropped'; else 'ok'; each with the measured latency;
  - cancelled (the client went away, the server shut down) → no outcome (ratelimitd takes
    grant-to-release as the round trip: a cancel says nothing about the backend's load).
A priority class is read from `priority_header` when configured and sent as `priority`."""
import json
from dataclasses import replace
from typing import Optional

from .decision import Decision, FAILED_CLOSED_RETRY_AFTER_US, report_conflict
from .errors import RateLimitError
from .headers import Answer, PolicyInfo, render_decisions
from .leases import MAX_LATENCY_MS, Lease

_BAD_REQUEST = ("invalid_key", "invalid_cost")  # ratelimitd's 400s: the request's input


def check_lease_options(limiter, policy, key, timeout) -> None:
    if limiter is None or not hasattr(limiter, "acquire_lease"):
        raise RateLimitError("invalid_policy", "limiter must have acquire_lease (a RatelimitdLimiter)")
    if not callable(key):
        raise RateLimitError("invalid_policy", "key must be a function of the request")
    if not callable(policy) and (not isinstance(policy, str) or not policy):
        raise RateLimitError("invalid_policy", "policy must be a policy name or a function of the request")
    if timeout is not None and not timeout > 0:
        raise RateLimitError("invalid_policy", "timeout must be above 0 seconds")


def render_refusal(lease: Lease) -> Answer:
    """A refused lease as the rate middleware renders a denial, with ratelimitd's own fields."""
    d = Decision(False, lease.reason, lease.limit, lease.remaining, lease.retry_after_us, lease.retry_after_us, 0)
    answer = render_decisions([d], [PolicyInfo(lease.policy, lease.limit, 0)])
    own = granted_headers(lease)
    if answer.status != 429:  # exceeds_capacity (400): no RateLimit field, as ratelimitd
        own = [h for h in own if h[0] == "RateLimit-Policy"]
    return Answer(answer.status, own + [(k, v) for k, v in answer.headers if k not in ("RateLimit-Policy", "RateLimit")],
                  answer.body)


def unless_conflict(limiter, lease: Lease) -> Lease:
    """`lease`, or for a policy_conflict the failure policy's lease, the conflict reported
    (report_conflict: counted in the limiter's failures and logged)."""
    if lease.reason != "policy_conflict":
        return lease
    report_conflict(limiter, lease.policy, lease.key, lease.retry_after_us)
    if getattr(limiter, "on_failure", "open") == "open":
        return replace(lease, allowed=True, reason="failed_open", id=None, retry_after_us=0)
    return replace(lease, reason="failed_closed", retry_after_us=FAILED_CLOSED_RETRY_AFTER_US)


def granted_headers(lease: Lease):
    h = []
    if lease.ratelimit_policy is not None:
        h.append(("RateLimit-Policy", lease.ratelimit_policy))
    if lease.ratelimit is not None:
        h.append(("RateLimit", lease.ratelimit))
    return h


def lease_args(policy, key, cost, priority_header, max_wait_ms, req, headers):
    """(policy, key, cost, options) of acquire_lease for `req`; key may be awaitable."""
    name = policy(req) if callable(policy) else policy
    c = cost(req) if callable(cost) else cost
    options = {"max_wait_ms": max_wait_ms}
    p = headers.get(priority_header) if priority_header else None
    if p:
        options["priority"] = p
    return name, key(req), c, options


def bad_request(e: RateLimitError) -> Answer:
    if e.code not in _BAD_REQUEST:
        raise e
    return Answer(400, [("Cache-Control", "no-store")], json.dumps({"error": e.code, "message": str(e)}))


def outcome(status: Optional[int], failed: bool, seconds: float, timeout: Optional[float]) -> dict:
    """release_lease's keyword arguments for a handler that ran `seconds`."""
    ms = seconds * 1000
    latency = ms if ms < MAX_LATENCY_MS else None
    if timeout is not None and seconds > timeout:
        return {"outcome": "timeout", "latency_ms": latency}
    if failed or status is None or status >= 500:
        return {"outcome": "dropped", "latency_ms": latency}
    return {"outcome": "ok", "latency_ms": latency}
