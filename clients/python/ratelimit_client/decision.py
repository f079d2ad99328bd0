"""decision.py — the Decision every back-end answers (ratelimitd's and the C++ library's
fields), the function library's reply decoding, and the failure-policy decision.
Invariants: allowed iff reason is within_limit or failed_open; integer microseconds."""
from dataclasses import dataclass

from .errors import RateLimitError

REASONS = ("within_limit", "over_limit", "exceeds_capacity")
FAILED_CLOSED_RETRY_AFTER_US = 1_000_000


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str
    limit: int
    remaining: int
    reset_after_us: int
    retry_after_us: int
    delay_us: int


def failure_decision(policy: str, limit: int) -> Decision:
    """What a decision answers when the store cannot: 'open' admits, 'closed' denies for 1 s."""
    if policy == "open":
        return Decision(True, "failed_open", limit, 0, 0, 0, 0)
    return Decision(False, "failed_closed", limit, 0, 0, FAILED_CLOSED_RETRY_AFTER_US, 0)


def decode_at(reply, i: int, limit: int) -> Decision:
    """Decision i of a library reply: reason, remaining, reset_after_us, delay_us when allowed
    else retry_after_us."""
    if not isinstance(reply, list) or len(reply) < 4 * (i + 1):
        raise RateLimitError("protocol", f"unexpected reply from the function library: {reply!r}")
    r, remaining, reset, last = reply[4 * i: 4 * i + 4]
    if not all(isinstance(v, int) for v in (r, remaining, reset, last)) or not 0 <= r <= 2:
        raise RateLimitError("protocol", f"unexpected decision in the library's reply: {reply[4 * i: 4 * i + 4]!r}")
    allowed = r == 0
    return Decision(allowed, REASONS[r], limit, remaining, reset, 0 if allowed else last, last if allowed else 0)
