"""usage.py — usage known after the response (docs/usage.md) on either back-end: a reservation
acquires an estimate before the work and reconciles it with the actual usage after (a report of
actual - estimate: a refund when the work used less), or gives the estimate back when the work
is abandoned. Reservation (blocking limiters) and AsyncReservation (asyncio ones) are also
context managers: leaving the block unsettled — an exception, or no reconcile — cancels.
The Starlette middleware (starlette.py, usage=) reconciles the same way after the response.
Invariant: a reservation reports at most once, and only what the store did not already count:
the estimate counts only when the acquire recorded it (reason within_limit); after a denial or a
failure-policy answer nothing was recorded, so reconcile(actual) reports the whole actual (the
work was done anyway) and cancel() sends nothing."""
from typing import Optional

from .decision import Decision
from .errors import RateLimitError


def recorded_by(decision: Decision, cost: int) -> int:
    """The units the acquire that answered `decision` for `cost` recorded: cost if the store
    admitted it, else 0 (a denial, or the failure policy's answer: the store counted nothing)."""
    return cost if decision.reason == "within_limit" else 0


class _Base:
    def __init__(self, limiter, policy: str, key: str, estimate: int, decision: Decision):
        self.limiter, self.policy, self.key, self.estimate = limiter, policy, key, estimate
        self.decision = decision  # the acquire's answer: do the work only when decision.allowed
        self.settled = False
        self._settlement: Optional[Decision] = None

    def _delta(self, actual) -> int:
        """actual - what the acquire recorded; marks the reservation settled."""
        if self.settled:
            raise RateLimitError("invalid_request", f"reservation for {self.key!r} under {self.policy!r} is already settled")
        if not isinstance(actual, int) or isinstance(actual, bool) or actual < 0:
            raise RateLimitError("invalid_cost", f"actual usage must be a non-negative integer, got {actual!r}")
        self.settled = True
        return actual - recorded_by(self.decision, self.estimate)


class Reservation(_Base):
    """From RedisLimiter.reserve / RatelimitdLimiter.reserve."""

    def reconcile(self, actual: int) -> Optional[Decision]:
        """Reports actual - estimate (negative: a refund); the report's answer, or None when
        there is nothing to report. RateLimitError('invalid_request') once settled."""
        delta = self._delta(actual)
        self._settlement = None if delta == 0 else self.limiter.report(self.policy, self.key, delta)
        return self._settlement

    def cancel(self) -> Optional[Decision]:
        """The work was abandoned: gives the recorded estimate back (nothing is sent when nothing
        was recorded). Once settled, does nothing and answers the first settlement."""
        return self._settlement if self.settled else self.reconcile(0)

    def __enter__(self) -> "Reservation":
        return self

    def __exit__(self, *exc) -> None:
        self.cancel()


class AsyncReservation(_Base):
    """From AsyncRedisLimiter.reserve / AsyncRatelimitdLimiter.reserve: as Reservation, awaited."""

    async def reconcile(self, actual: int) -> Optional[Decision]:
        delta = self._delta(actual)
        self._settlement = None if delta == 0 else await self.limiter.report(self.policy, self.key, delta)
        return self._settlement

    async def cancel(self) -> Optional[Decision]:
        return self._settlement if self.settled else await self.reconcile(0)

    async def __aenter__(self) -> "AsyncReservation":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.cancel()


def reserve(limiter, policy: str, key: str, estimate: int) -> Reservation:
    """Acquires `estimate` units of `key` under `policy` on a blocking limiter."""
    return Reservation(limiter, policy, key, estimate, limiter.acquire(policy, key, estimate))


async def reserve_async(limiter, policy: str, key: str, estimate: int) -> AsyncReservation:
    """Acquires `estimate` units of `key` under `policy` on an asyncio limiter."""
    return AsyncReservation(limiter, policy, key, estimate, await limiter.acquire(policy, key, estimate))
