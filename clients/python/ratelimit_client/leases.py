"""leases.py — concurrency leases through ratelimitd (docs/throttling.md): POST /v1/leases takes
`cost` units of a concurrency policy, DELETE /v1/leases/{id} gives them back (with the work's
outcome and latency, which an adaptive limit learns from), POST /v1/leases/{id}/renew extends one.
LeaseMixin / AsyncLeaseMixin give RatelimitdLimiter / AsyncRatelimitdLimiter acquire_lease,
release_lease and renew_lease.
Input ratelimitd would refuse (empty key or policy, a cost that is not a whole number >= 1, an
outcome or latency it answers 400 for) raises RateLimitError before anything is sent;
ratelimitd's own 4xx codes (unknown_policy, not_a_concurrency_policy, invalid_lease_id, ...) are
raised with ratelimitd's code. No answer within the limiter's timeout, a refused connection or a
5xx is answered by its failure policy, as the rate path: 'open' grants a Lease without an id (the
work proceeds unprotected; releasing it sends nothing), 'closed' refuses (reason failed_closed,
retry after 1 s). A release never raises for an unreachable ratelimitd (it answers False: the
lease then lapses at its TTL), so a `finally` can call it."""
import http.client
import json
import math
import urllib.parse
from dataclasses import dataclass, replace
from typing import Optional

from .decision import FAILED_CLOSED_RETRY_AFTER_US
from .errors import RateLimitError

OUTCOMES = ("ok", "dropped", "timeout")
MAX_LATENCY_MS = 3_600_000  # ratelimitd's bound (src/server/api/request.cc): under an hour


@dataclass
class Lease:
    """A granted lease (allowed) or a refusal; a grant without an id is the failure policy's."""
    allowed: bool
    reason: str
    id: Optional[str]
    policy: str
    key: str
    limit: int = 0
    remaining: int = 0
    expires_ms: int = 0          # until it lapses unless renewed (granted)
    retry_after_us: int = 0      # the shortest wait before the same request could be granted (refused)
    ratelimit_policy: Optional[str] = None  # ratelimitd's RateLimit-Policy and RateLimit fields
    ratelimit: Optional[str] = None


def _fail(code: str, message: str):
    raise RateLimitError(code, message)


def lease_request(policy, key, cost, priority, max_wait_ms) -> dict:
    """The POST /v1/leases body, or RateLimitError for what ratelimitd would refuse."""
    if not isinstance(policy, str) or not policy:
        _fail("invalid_policy", "policy must be a non-empty string")
    if not isinstance(key, str) or not key:
        _fail("invalid_key", "key must be a non-empty string")
    if not isinstance(cost, int) or isinstance(cost, bool) or cost < 1:
        _fail("invalid_cost", f"cost must be a whole number of at least 1, got {cost!r}")
    if priority is not None and (not isinstance(priority, str) or not priority):
        _fail("invalid_priority", "priority must be a non-empty string")
    if max_wait_ms is not None and (not isinstance(max_wait_ms, int) or isinstance(max_wait_ms, bool) or max_wait_ms < 0):
        _fail("invalid_max_wait", f"max_wait_ms must be a whole number of ms, 0 or more, got {max_wait_ms!r}")
    body = {"key": key, "policy": policy, "cost": cost}
    if priority is not None:
        body["priority"] = priority
    if max_wait_ms is not None:
        body["max_wait_ms"] = max_wait_ms
    return body


def release_request(outcome, latency_ms) -> Optional[dict]:
    if outcome is not None and outcome not in OUTCOMES:
        _fail("invalid_outcome", f"outcome must be one of {', '.join(OUTCOMES)}, got {outcome!r}")
    if latency_ms is not None and (isinstance(latency_ms, bool) or not isinstance(latency_ms, (int, float))
                                   or not math.isfinite(latency_ms) or not 0 <= latency_ms < MAX_LATENCY_MS):
        _fail("invalid_latency", f"latency_ms must be a number of ms, 0 or more and under {MAX_LATENCY_MS}, got {latency_ms!r}")
    body = {}
    if outcome is not None:
        body["outcome"] = outcome
    if latency_ms is not None:
        body["latency_ms"] = latency_ms
    return body or None


def _json(status: int, text: str) -> dict:
    try:
        body = json.loads(text)
    except ValueError:
        raise RateLimitError("protocol", f"ratelimitd answered something that is not JSON: {text[:200]!r}") from None
    if not isinstance(body, dict):
        raise RateLimitError("protocol", f"ratelimitd answered {status}: {text[:200]!r}")
    return body


def _raised(status: int, body: dict) -> RateLimitError:
    code = body.get("error") if isinstance(body.get("error"), str) else "protocol"
    message = body.get("message") if isinstance(body.get("message"), str) else json.dumps(body)
    return RateLimitError(code, f"ratelimitd answered {status}: {message}")


def _failure_lease(on_failure: str, policy: str, key: str) -> Lease:
    if on_failure == "open":
        return Lease(True, "failed_open", None, policy, key)
    return Lease(False, "failed_closed", None, policy, key, retry_after_us=FAILED_CLOSED_RETRY_AFTER_US)


def lease_answer(policy, key, status, headers, text) -> Lease:
    body = _json(status, text)
    lease = Lease(False, "over_limit", None, policy, key, limit=int(body.get("limit") or 0),
                  ratelimit_policy=headers.get("ratelimit-policy"), ratelimit=headers.get("ratelimit"))
    if status == 400 and body.get("error") == "cost_exceeds_capacity":
        return replace(lease, reason="exceeds_capacity")
    if status == 409 and body.get("error") == "policy_conflict":  # another definition holds the key
        return replace(lease, reason="policy_conflict", retry_after_us=int(body.get("retry_after_ms") or 0) * 1000)
    if status not in (200, 429):
        raise _raised(status, body)
    lease.remaining = int(body.get("remaining") or 0)
    if status == 429:
        return replace(lease, retry_after_us=int(body.get("retry_after_ms") or 0) * 1000)
    if "lease_id" in body and body["lease_id"] is None:
        # ratelimitd's own store failed and its failure policy admitted: a grant with nothing to
        # release or renew (the same Lease as this client's failed_open). It used to be a
        # protocol error, and so a 500 in the middleware.
        return replace(lease, allowed=True, reason="failed_open", expires_ms=int(body.get("expires_ms") or 0))
    if not isinstance(body.get("lease_id"), str):
        raise RateLimitError("protocol", f"a granted lease without a lease_id: {text[:200]!r}")
    return replace(lease, allowed=True, reason="within_limit", id=body["lease_id"], expires_ms=int(body["expires_ms"]))


def release_answer(status, text) -> bool:
    body = _json(status, text)
    if status == 409 and body.get("error") == "policy_conflict":
        return False  # nothing released: the key now holds another definition's state
    if status != 200:
        raise _raised(status, body)
    return body.get("released") is True


def renew_answer(lease: Lease, status, text) -> bool:
    body = _json(status, text)
    if (status == 404 and body.get("error") == "lease_not_held") or \
            (status == 409 and body.get("error") == "policy_conflict"):
        return False
    if status != 200:
        raise _raised(status, body)
    if isinstance(body.get("expires_ms"), int):
        lease.expires_ms = body["expires_ms"]
    return body.get("renewed") is True


def _path(lease: Lease, tail: str = "") -> str:
    return "/v1/leases/" + urllib.parse.quote(lease.id, safe="") + tail


class LeaseMixin:
    """acquire_lease / release_lease / renew_lease on the blocking RatelimitdLimiter."""

    def _lease_call(self, method: str, path: str, payload: Optional[dict]):
        """(status, headers, text), or None when the failure policy must answer."""
        host, port, tls = self._conn_args
        cls = http.client.HTTPSConnection if tls else http.client.HTTPConnection
        try:
            conn = cls(host, port, timeout=self.timeout)
            try:
                body = None if payload is None else json.dumps(payload)
                conn.request(method, path, body, {"content-type": "application/json"} if body else {})
                r = conn.getresponse()
                text = r.read().decode("utf-8", "replace")
                headers = {k.lower(): v for k, v in r.getheaders()}
            finally:
                conn.close()
            if r.status >= 500:
                raise RateLimitError("unavailable", f"ratelimitd answered {r.status}: {text[:200]}")
        except (OSError, http.client.HTTPException, RateLimitError) as e:
            self._failed("", e)
            return None
        return r.status, headers, text

    def acquire_lease(self, policy: str, key: str, cost: int = 1, *, priority: Optional[str] = None,
                      max_wait_ms: Optional[int] = None) -> Lease:
        a = self._lease_call("POST", "/v1/leases", lease_request(policy, key, cost, priority, max_wait_ms))
        return _failure_lease(self.on_failure, policy, key) if a is None else lease_answer(policy, key, *a)

    def release_lease(self, lease: Lease, *, outcome: Optional[str] = None, latency_ms: Optional[float] = None) -> bool:
        body = release_request(outcome, latency_ms)
        if not lease.allowed or lease.id is None:
            return False
        a = self._lease_call("DELETE", _path(lease), body)
        return False if a is None else release_answer(a[0], a[2])

    def renew_lease(self, lease: Lease) -> bool:
        if not lease.allowed or lease.id is None:
            return lease.allowed
        a = self._lease_call("POST", _path(lease, "/renew"), None)
        return self.on_failure == "open" if a is None else renew_answer(lease, a[0], a[2])


class AsyncLeaseMixin:
    """The same on AsyncRatelimitdLimiter (httpx), awaited."""

    async def _lease_call(self, method: str, path: str, payload: Optional[dict]):
        try:
            r = await self._client.request(method, path, json=payload)
            if r.status_code >= 500:
                raise RateLimitError("unavailable", f"ratelimitd answered {r.status_code}: {r.text[:200]}")
        except (OSError, self._httpx.HTTPError, RateLimitError) as e:
            self._failed("", e)
            return None
        return r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.text

    async def acquire_lease(self, policy: str, key: str, cost: int = 1, *, priority: Optional[str] = None,
                            max_wait_ms: Optional[int] = None) -> Lease:
        a = await self._lease_call("POST", "/v1/leases", lease_request(policy, key, cost, priority, max_wait_ms))
        return _failure_lease(self.on_failure, policy, key) if a is None else lease_answer(policy, key, *a)

    async def release_lease(self, lease: Lease, *, outcome: Optional[str] = None, latency_ms: Optional[float] = None) -> bool:
        body = release_request(outcome, latency_ms)
        if not lease.allowed or lease.id is None:
            return False
        a = await self._lease_call("DELETE", _path(lease), body)
        return False if a is None else release_answer(a[0], a[2])

    async def renew_lease(self, lease: Lease) -> bool:
        if not lease.allowed or lease.id is None:
            return lease.allowed
        a = await self._lease_call("POST", _path(lease, "/renew"), None)
        return self.on_failure == "open" if a is None else renew_answer(lease, a[0], a[2])
