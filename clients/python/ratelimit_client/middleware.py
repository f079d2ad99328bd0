"""middleware.py — what the Starlette/FastAPI middleware and the Flask decorator share: one
decision per request (policy, key, cost and skip from the caller) rendered by headers.py, so
both answer exactly what ratelimitd answers. The failure policy is the limiter's own. A key or
cost the request brought that ratelimitd would refuse (RateLimitError invalid_key/invalid_cost)
answers ratelimitd's 400 {"error", "message"} on either back-end (issue 31 defect 6: it was a
500); any other exception from a key or cost function is the application's bug and propagates.
A policy_conflict decision (issue 31 defect 8: another definition of the policy's name holds the
key) is the app's configuration error: counted in the limiter's failures, logged, and answered
by the failure policy, never a 429.
Usage after the response (docs/usage.md): decide_sync / decide_async(..., reserve=True) also
answer the admitted request's Reservation / AsyncReservation (usage.py), which the Flask
decorator and the Starlette middleware reconcile once the response has been sent.
What express-rate-limit / slowapi users expect (issue 31), in Options: the header set and
problem+json as ratelimitd's settings, a refusal of one's own (status_code, message, handler),
the decision visible to the handler (RateLimitInfo), a default key (the client address through
trusted proxies, client_ip.py), skip_successful_requests / skip_failed_requests (the admitted
unit given back once the response is known)."""
import json
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

from .client_ip import TrustedProxies, client_address
from .decision import Decision, answer_conflict
from .errors import RateLimitError
from .headers import HEADER_SETS, Answer, PolicyInfo, ceil_millis, render_decisions

_BAD_REQUEST = ("invalid_key", "invalid_cost")  # ratelimitd's 400s: the request's input


def _bad_request(e: RateLimitError) -> Answer:
    if e.code not in _BAD_REQUEST:
        raise e
    return Answer(400, [("Cache-Control", "no-store")], json.dumps({"error": e.code, "message": str(e)}))


@dataclass(frozen=True)
class RateLimitInfo:
    """The decision as the route handler sees it (Starlette: request.state.rate_limit; Flask:
    flask.g.rate_limit) and as a custom refusal gets it."""
    policy: str
    key: str
    cost: int
    allowed: bool
    limit: int
    remaining: int
    reset_ms: int
    retry_after_ms: int
    decision: Decision


def _info(policy: str, key: str, cost: int, d: Decision) -> RateLimitInfo:
    return RateLimitInfo(policy, key, cost, d.allowed, d.limit, d.remaining, ceil_millis(d.reset_after_us),
                         0 if d.allowed else ceil_millis(d.retry_after_us), d)


@dataclass(frozen=True)
class Options:
    """The adapters' options, checked once when the middleware is made (make_options)."""
    limiter: Any
    policy: Union[str, Callable]
    key: Callable                 # of the request (the default: the client address, see make_options)
    cost: Union[int, Callable] = 1
    skip: Optional[Callable] = None
    header_set: str = "ietf"      # ratelimitd's `headers:` (HEADER_SETS)
    problem_json: bool = False    # ratelimitd's `problem_json: true`
    status_code: Optional[int] = None  # a refusal's status (400-599) instead of 429
    message: Any = None           # a refusal's body: str (text/plain), dict/list (JSON), or fn(request, info)
    handler: Optional[Callable] = None  # fn(request, info) -> the framework's response, answers a refusal
    skip_successful_requests: bool = False  # give the unit back after an answer below 400
    skip_failed_requests: bool = False      # give the unit back after an answer of 400 or more


def make_options(limiter, policy, key, *, peer: Callable, forwarded_for: Callable, trusted_proxies: Sequence[str] = (),
                 headers: str = "ietf", **rest) -> Options:
    """Options, refused at once (RateLimitError invalid_policy) when they would fail every
    request. key=None: the client address — the peer, X-Forwarded-For believed only from
    `trusted_proxies` (peer(request) and forwarded_for(request) -> str or None are the adapter's)."""
    trusted = TrustedProxies(trusted_proxies)
    if key is None:
        def key(req):  # noqa: E306 - the default key, built once per middleware
            return client_address(peer(req) or "", forwarded_for(req), trusted)
    check_options(limiter, policy, key)
    if headers not in HEADER_SETS:
        raise RateLimitError("invalid_policy", f"headers must be one of {', '.join(HEADER_SETS)}, got {headers!r}")
    code = rest.get("status_code")
    if code is not None and (not isinstance(code, int) or isinstance(code, bool) or not 400 <= code <= 599):
        raise RateLimitError("invalid_policy", f"status_code must be an integer from 400 to 599, got {code!r}")
    if rest.get("handler") is not None and not callable(rest["handler"]):
        raise RateLimitError("invalid_policy", "handler must be a function of the request and the RateLimitInfo")
    if rest.get("skip") is not None and not callable(rest["skip"]):
        raise RateLimitError("invalid_policy", "skip must be a function of the request")
    return Options(limiter, policy, key, header_set=headers, **rest)


def refusal(opts: Options, req, answer: Answer, info: Optional[RateLimitInfo]):
    """What a refusal (a 429) answers: ratelimitd's answer, or the status and body the options
    give (status, content type, body); None when opts.handler answers it instead. Any other
    answer (400) stands as it is. The rate-limit fields and Retry-After stay either way."""
    if answer.status != 429 or info is None:
        return answer.status, answer.content_type, answer.body
    if opts.handler is not None:
        return None
    status = opts.status_code or 429
    if opts.message is None:
        return status, answer.content_type, answer.body
    m = opts.message(req, info) if callable(opts.message) else opts.message
    if isinstance(m, str):
        return status, "text/plain; charset=utf-8", m
    return status, "application/json", json.dumps(m)


def gives_back(opts: Options, status: int) -> bool:
    """Whether an admitted request's unit is given back once its answer's status is known."""
    return (opts.skip_successful_requests and status < 400) or (opts.skip_failed_requests and status >= 400)


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


def render(limiter, policy: str, decision, header_set: str = "ietf", problem_json: bool = False) -> Answer:
    info = limiter.describe(policy)
    if info is None:
        # ratelimitd has not answered once since the app started, so nothing says the policy's
        # quota and window: the failure policy still answers (issue 31 defect 1), without the
        # RateLimit-Policy and RateLimit fields it cannot fill in truthfully.
        if decision.reason not in ("failed_open", "failed_closed"):
            raise RateLimitError("protocol", f"no quota or window known for policy {policy!r}")
        answer = render_decisions([decision], [PolicyInfo(policy, decision.limit, 0)], header_set, problem_json)
        headers = [(k, v) for k, v in answer.headers if k not in ("RateLimit-Policy", "RateLimit")]
        return Answer(answer.status, headers, answer.body, answer.content_type)
    if decision.limit:
        info = type(info)(info.name, decision.limit, info.window_us)
    return render_decisions([decision], [info], header_set, problem_json)


def check_usage(limiter, usage) -> None:
    """Refuses a usage that is not a function, or one with a limiter that cannot report."""
    if usage is not None and (not callable(usage) or not hasattr(limiter, "report")):
        raise RateLimitError("invalid_policy", "usage must be a function of the request and response, with a limiter that has report()")


def _decided(opts: Options, name, k, c, decision, reservation_cls):
    """The rendered answer, the reservation of an admitted request (usage.py), the RateLimitInfo.
    A policy_conflict is the app's configuration error: counted in the limiter's failures, logged,
    and answered by the failure policy."""
    if decision.reason == "policy_conflict":
        decision = answer_conflict(opts.limiter, name, k, decision)
    answer = render(opts.limiter, name, decision, opts.header_set, opts.problem_json)
    reservation = reservation_cls(opts.limiter, name, k, c, decision) if decision.allowed else None
    return answer, reservation, _info(name, k, c, decision)


def decide_sync(opts: Options, req):
    """(answer, the admitted request's Reservation or None, RateLimitInfo or None); answer None:
    skipped. A 400 from the request's own input has no info."""
    from .usage import Reservation
    if opts.skip is not None and opts.skip(req):
        return None, None, None
    name, k, c = _resolve(opts.policy, req), opts.key(req), _resolve(opts.cost, req)
    try:
        return _decided(opts, name, k, c, opts.limiter.acquire(name, k, c), Reservation)
    except RateLimitError as e:
        return _bad_request(e), None, None


def reconcile_sync(usage, reservation, request, response, on_report_error) -> None:
    """Reports the usage of a response already sent; never raises (on_report_error hears)."""
    try:
        actual = usage(request, response)
        if actual is not None:
            reservation.reconcile(actual)
    except Exception as e:  # noqa: BLE001 - the response is gone: only the hook can hear of it
        if on_report_error is not None:
            on_report_error(e)


async def decide_async(opts: Options, req):
    """As decide_sync, with an asyncio limiter (the key function may be a coroutine function)."""
    from .usage import AsyncReservation
    if opts.skip is not None and opts.skip(req):
        return None, None, None
    name = _resolve(opts.policy, req)
    k = opts.key(req)
    if hasattr(k, "__await__"):
        k = await k
    c = _resolve(opts.cost, req)
    try:
        return _decided(opts, name, k, c, await opts.limiter.acquire(name, k, c), AsyncReservation)
    except RateLimitError as e:
        return _bad_request(e), None, None
