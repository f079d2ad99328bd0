"""ratelimitd.py — the ratelimitd back-ends: RatelimitdLimiter (blocking, http.client) and
AsyncRatelimitdLimiter (asyncio, httpx): decisions by POST /v1/acquire, /v1/peek and /v1/report of a running
ratelimitd (its policies, its store), as the same Decision the Redis back-end gives.
The body's ms figures (rounded up by ratelimitd) come back as µs and render to the same whole
seconds; the policy's quota and window are learned from RateLimit-Policy (`headers: ietf`, the
default; else pass windows=). 400 unknown_policy / invalid_key / invalid_cost raise
RateLimitError with that code; cost_exceeds_capacity is a Decision; no answer within `timeout`,
a refused connection or a 5xx decide by on_failure, counted in `failures`. Leases of
concurrency policies (acquire_lease, release_lease, renew_lease): leases.py."""
import http.client
import json
import re
import urllib.parse
from typing import Dict, Optional, Tuple

from .decision import Decision, failure_decision
from .errors import RateLimitError
from .headers import PolicyInfo
from .leases import AsyncLeaseMixin, LeaseMixin
from .policy import parse_duration
from .usage import AsyncReservation, Reservation, reserve, reserve_async

_POLICY_ITEM = re.compile(r'"((?:[^"\\]|\\.)*)";q=(\d+);w=(\d+)')
_KNOWN = ("unknown_policy", "invalid_key", "invalid_cost")


class _Common:
    def __init__(self, url: str, on_failure: str, timeout: float, windows, admin_token, on_error):
        u = urllib.parse.urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise RateLimitError("invalid_policy", f"url must be http(s)://host:port, got {url!r}")
        if on_failure not in ("open", "closed"):
            raise RateLimitError("invalid_policy", f"on_failure must be 'open' or 'closed', got {on_failure!r}")
        self.url, self.on_failure, self.timeout = url.rstrip("/"), on_failure, timeout
        self.admin_token, self.on_error = admin_token, on_error
        self.failures = 0
        self._infos: Dict[str, PolicyInfo] = {n: PolicyInfo(n, 0, parse_duration(w)) for n, w in (windows or {}).items()}

    def describe(self, policy: str) -> Optional[PolicyInfo]:
        return self._infos.get(policy)

    @staticmethod
    def _check(key, cost) -> None:
        if not isinstance(key, str) or not key:
            raise RateLimitError("invalid_key", "key must be a non-empty string")
        if not isinstance(cost, int) or isinstance(cost, bool):
            raise RateLimitError("invalid_cost", f"cost must be an integer, got {cost!r}")

    def _failed(self, policy: str, e: Exception) -> Decision:
        self.failures += 1
        if self.on_error:
            self.on_error(e)
        info = self._infos.get(policy)
        return failure_decision(self.on_failure, info.quota if info else 0)

    def _answer(self, policy: str, status: int, policy_field: Optional[str], text: str) -> Decision:
        try:
            body = json.loads(text)
        except ValueError:
            raise RateLimitError("protocol", f"ratelimitd answered something that is not JSON: {text[:200]!r}") from None
        for m in _POLICY_ITEM.finditer(policy_field or ""):
            name = re.sub(r"\\(.)", r"\1", m.group(1))
            if name not in self._infos or self._infos[name].quota == 0:
                self._infos[name] = PolicyInfo(name, int(m.group(2)), int(m.group(3)) * 1_000_000)
        if status == 400 and body.get("error") == "cost_exceeds_capacity":
            return Decision(False, "exceeds_capacity", int(body["limit"]), 0, 0, 0, 0)
        if status == 409 and body.get("error") == "policy_conflict":  # another definition holds the key
            wait_us = int(body.get("retry_after_ms") or 0) * 1000
            return Decision(False, "policy_conflict", 0, 0, wait_us, wait_us, 0)
        if status not in (200, 429):
            raise _error(status, body, text)
        allowed = body.get("allowed") is True
        return Decision(allowed, "within_limit" if allowed else "over_limit", int(body["limit"]), int(body["remaining"]),
                        int(body["reset_ms"]) * 1000, int(body["retry_after_ms"]) * 1000, int(body["delay_ms"]) * 1000)

    def _reset_headers(self) -> Dict[str, str]:
        h = {"content-type": "application/json"}
        if self.admin_token:
            h["authorization"] = f"Bearer {self.admin_token}"
        return h


def _error(status: int, body: dict, text: str) -> RateLimitError:
    err = body.get("error") if isinstance(body, dict) else None
    code = "protocol" if not isinstance(err, str) else err if err in _KNOWN else "invalid_request"
    msg = body.get("message") if isinstance(body, dict) and isinstance(body.get("message"), str) else text[:200]
    return RateLimitError(code, f"ratelimitd answered {status}: {msg}")


class RatelimitdLimiter(LeaseMixin, _Common):
    def __init__(self, url: str, *, on_failure: str = "open", timeout: float = 0.25, windows=None,
                 admin_token: Optional[str] = None, on_error=None):
        super().__init__(url, on_failure, timeout, windows, admin_token, on_error)
        u = urllib.parse.urlsplit(self.url)
        self._conn_args = (u.hostname, u.port, u.scheme == "https")

    def _post(self, path: str, payload: dict, headers=None) -> Tuple[int, Optional[str], str]:
        host, port, tls = self._conn_args
        cls = http.client.HTTPSConnection if tls else http.client.HTTPConnection
        conn = cls(host, port, timeout=self.timeout)
        try:
            conn.request("POST", path, json.dumps(payload), headers or {"content-type": "application/json"})
            r = conn.getresponse()
            return r.status, r.getheader("RateLimit-Policy"), r.read().decode("utf-8", "replace")
        finally:
            conn.close()

    def _decide(self, path: str, policy: str, key: str, cost: int) -> Decision:
        self._check(key, cost)
        try:
            status, field, text = self._post(path, {"key": key, "policy": policy, "cost": cost})
            if status >= 500:
                raise RateLimitError("unavailable", f"ratelimitd answered {status}: {text[:200]}")
        except (OSError, http.client.HTTPException, RateLimitError) as e:
            return self._failed(policy, e)
        return self._answer(policy, status, field, text)

    def acquire(self, policy: str, key: str, cost: int = 1) -> Decision:
        return self._decide("/v1/acquire", policy, key, cost)

    def peek(self, policy: str, key: str, cost: int = 1) -> Decision:
        return self._decide("/v1/peek", policy, key, cost)

    def report(self, policy: str, key: str, cost: int) -> Decision:
        """POST /v1/report: usage known after the fact (negative: a refund); ratelimitd checks
        the range (limits.max_cost) and refuses a concurrency policy (400)."""
        return self._decide("/v1/report", policy, key, cost)

    def reserve(self, policy: str, key: str, estimate: int) -> Reservation:
        """Acquires `estimate` now, to reconcile with the actual usage after the work (usage.py)."""
        return reserve(self, policy, key, estimate)

    def reset(self, policy: str, key: str) -> None:
        status, _, text = self._post("/v1/reset", {"key": key, "policy": policy}, self._reset_headers())
        if status != 200:
            raise _error(status, json.loads(text) if text.startswith("{") else {}, text)


class AsyncRatelimitdLimiter(AsyncLeaseMixin, _Common):
    def __init__(self, url: str, *, on_failure: str = "open", timeout: float = 0.25, windows=None,
                 admin_token: Optional[str] = None, on_error=None):
        import httpx  # only the asyncio form needs it (Debian: python3-httpx)
        super().__init__(url, on_failure, timeout, windows, admin_token, on_error)
        self._httpx = httpx
        self._client = httpx.AsyncClient(base_url=self.url, timeout=timeout)

    async def _decide(self, path: str, policy: str, key: str, cost: int) -> Decision:
        self._check(key, cost)
        try:
            r = await self._client.post(path, json={"key": key, "policy": policy, "cost": cost})
            if r.status_code >= 500:
                raise RateLimitError("unavailable", f"ratelimitd answered {r.status_code}: {r.text[:200]}")
        except (OSError, self._httpx.HTTPError, RateLimitError) as e:
            return self._failed(policy, e)
        return self._answer(policy, r.status_code, r.headers.get("ratelimit-policy"), r.text)

    async def acquire(self, policy: str, key: str, cost: int = 1) -> Decision:
        return await self._decide("/v1/acquire", policy, key, cost)

    async def peek(self, policy: str, key: str, cost: int = 1) -> Decision:
        return await self._decide("/v1/peek", policy, key, cost)

    async def report(self, policy: str, key: str, cost: int) -> Decision:
        """As RatelimitdLimiter.report."""
        return await self._decide("/v1/report", policy, key, cost)

    async def reserve(self, policy: str, key: str, estimate: int) -> AsyncReservation:
        """As RatelimitdLimiter.reserve, awaited."""
        return await reserve_async(self, policy, key, estimate)

    async def reset(self, policy: str, key: str) -> None:
        r = await self._client.post("/v1/reset", json={"key": key, "policy": policy}, headers=self._reset_headers())
        if r.status_code != 200:
            raise _error(r.status_code, r.json() if r.text.startswith("{") else {}, r.text)

    async def close(self) -> None:
        await self._client.aclose()
