"""headers.py — the one place this package turns decisions into an HTTP answer, exactly as
ratelimitd renders them (src/http/render.cc, `headers: ietf`): 200 / 429 / 400 (cost over the
capacity); RateLimit-Policy `"name";q=<quota>;w=<s>` and RateLimit `"name";r=<remaining>;t=<s>`
per policy; on 429 Retry-After = max(1, ceil(retry_after s)) of the most restrictive decision
and Cache-Control: no-store; the JSON body of the most restrictive decision (ms rounded up).
Header sets (ratelimitd's `headers:`): "ietf" as above; "draft6" RateLimit-Limit, -Remaining,
-Reset of the most restrictive decision; "x-ratelimit" the same values as X-RateLimit-*; "none"
no rate-limit fields (Retry-After and Cache-Control stay on a 429). problem_json (ratelimitd's
`problem_json: true`): a 429's body is an RFC 9457 problem (application/problem+json).
Invariant: Retry-After equals the t of the denying item with the longest wait (and -Reset)."""
import json
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from .decision import Decision


@dataclass(frozen=True)
class PolicyInfo:
    name: str
    quota: int      # q: capacity
    window_us: int  # w: the window, or the time to drain a full bucket


@dataclass(frozen=True)
class Answer:
    status: int
    headers: List[Tuple[str, str]]
    body: str
    content_type: str = "application/json"  # "application/problem+json" for a problem


HEADER_SETS = ("ietf", "draft6", "x-ratelimit", "none")
_TRIPLES = {"draft6": ("RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"),
            "x-ratelimit": ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset")}
_QUOTA_EXCEEDED = "https://iana.org/assignments/http-problem-types#quota-exceeded"
_REDUCED_CAPACITY = "https://iana.org/assignments/http-problem-types#temporary-reduced-capacity"


def _ceil(us: int, unit: int) -> int:
    return 0 if us <= 0 else (us - 1) // unit + 1


def ceil_seconds(us: int) -> int:
    return _ceil(us, 1_000_000)


def ceil_millis(us: int) -> int:
    return _ceil(us, 1_000)


def _retry_after_s(d: Decision) -> int:
    return max(1, ceil_seconds(d.retry_after_us))


def _reset_s(d: Decision) -> int:
    return ceil_seconds(d.reset_after_us) if d.allowed else _retry_after_s(d)


def sf_string(s: str) -> str:
    out = ['"']
    for b in s.encode("utf-8"):
        if b in (0x22, 0x5C):
            out.append("\\" + chr(b))
        elif 0x20 <= b <= 0x7E:
            out.append(chr(b))
        else:
            out.append("?")
    out.append('"')
    return "".join(out)


def _most_restrictive(ds: Sequence[Decision]) -> int:
    # algo::most_restrictive: highest (denied, exceeds capacity, retry_after, -remaining); first of equals.
    def rank(d):
        return (not d.allowed, d.reason == "exceeds_capacity", d.retry_after_us, -d.remaining)
    best = 0
    for i in range(1, len(ds)):
        if rank(ds[i]) > rank(ds[best]):
            best = i
    return best


def _json(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def render_decisions(decisions: Sequence[Decision], policies: Sequence[PolicyInfo], header_set: str = "ietf",
                     problem_json: bool = False) -> Answer:
    """The answer for one or several policies' decisions (same order in both sequences)."""
    k = _most_restrictive(decisions)
    d, p = decisions[k], policies[k]
    triple: Optional[Tuple[str, str, str]] = _TRIPLES.get(header_set)
    policy_field = ", ".join(f"{sf_string(pi.name)};q={pi.quota};w={ceil_seconds(pi.window_us)}" for pi in policies)
    if d.reason == "exceeds_capacity":
        msg = f"the request's cost exceeds the capacity ({d.limit}) of policy '{p.name}': it can never be admitted"
        headers = [("RateLimit-Policy", policy_field)] if header_set == "ietf" else []
        if triple:
            headers.append((triple[0], str(d.limit)))
        return Answer(400, headers + [("Cache-Control", "no-store")],
                      _json({"error": "cost_exceeds_capacity", "message": msg, "policy": p.name, "limit": d.limit}))
    headers = []
    if header_set == "ietf":
        headers = [("RateLimit-Policy", policy_field),
                   ("RateLimit", ", ".join(f"{sf_string(pi.name)};r={di.remaining};t={_reset_s(di)}" for pi, di in zip(policies, decisions)))]
    elif triple:
        headers = [(triple[0], str(d.limit)), (triple[1], str(d.remaining)), (triple[2], str(_reset_s(d)))]
    if not d.allowed:
        headers += [("Retry-After", str(_retry_after_s(d))), ("Cache-Control", "no-store")]
    members = {"allowed": d.allowed, "policy": p.name, "limit": d.limit, "remaining": d.remaining,
               "reset_ms": ceil_millis(d.reset_after_us), "retry_after_ms": 0 if d.allowed else ceil_millis(d.retry_after_us),
               "delay_ms": ceil_millis(d.delay_us)}
    if not d.allowed and problem_json:
        store = d.reason == "failed_closed"
        problem = {"type": _REDUCED_CAPACITY if store else _QUOTA_EXCEEDED,
                   "title": "Request cannot be satisfied due to temporary server capacity constraints" if store
                   else "Request cannot be satisfied as assigned quota has been exceeded",
                   "violated-policies": [pi.name for pi, di in zip(policies, decisions) if not di.allowed], **members}
        return Answer(429, headers, _json(problem), "application/problem+json")
    return Answer(200 if d.allowed else 429, headers, _json(members))
