"""decision.py — the Decision every back-end answers (ratelimitd's and the C++ library's
fields), the function library's reply decoding, and the failure-policy decision.
Invariants: allowed iff reason is within_limit or failed_open; integer microseconds."""
import logging
from dataclasses import dataclass

from .errors import RateLimitError

# The function library's reason numbers (include/ratelimit/decision.h); None: one a rate
# decision never answers. 6, policy_conflict: the key holds live state of another definition of
# the policy's name (another algorithm, window or counting mode); nothing was counted, and
# retry_after_us says when that state ends (docs/redis-functions.md).
REASONS = ("within_limit", "over_limit", "exceeds_capacity", None, None, None, "policy_conflict")
FAILED_CLOSED_RETRY_AFTER_US = 1_000_000
_log = logging.getLogger("ratelimit_client")


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


def report_conflict(limiter, policy: str, key: str, retry_after_us: int) -> None:
    """The middleware's report of a policy_conflict (issue 31 defect 8): counted in the limiter's
    `failures` (both back-ends have it; a limiter of the app's own without one is left alone) and
    logged as an error naming the policy — the app's configuration error, not the end user's
    excess, answered by the failure policy, as Go's and Java's middleware count and report it."""
    if isinstance(getattr(limiter, "failures", None), int):
        limiter.failures += 1
    _log.error("ratelimit: policy %r (key %r) is refused as policy_conflict: its state was written under another "
               "definition of that name (another algorithm, window or counting mode), which lives %d ms more; give a "
               "changed definition a new name. Answered by the failure policy.", policy, key, -(-retry_after_us // 1000))


def answer_conflict(limiter, policy: str, key: str, d: Decision) -> Decision:
    """How the middleware answers a policy_conflict: reported (report_conflict), then the
    limiter's failure policy ('open' passes, 'closed' answers as for a store failure), never a 429
    of its own."""
    report_conflict(limiter, policy, key, d.retry_after_us)
    return failure_decision(getattr(limiter, "on_failure", "open"), d.limit)


def decode_reply(reply, limits) -> list:
    """The decisions of a library reply for items of capacities `limits`: four integers each
    (reason, remaining, reset_after_us, delay_us when allowed else retry_after_us). Checks the
    whole reply before answering any of it; raises RateLimitError('protocol') on anything else."""
    if type(reply) is not list or len(reply) != 4 * len(limits):
        raise RateLimitError("protocol", f"unexpected reply from the function library: {reply!r}")
    out = []
    for i, limit in enumerate(limits):
        b = 4 * i
        r, remaining, reset, last = reply[b:b + 4]
        if type(remaining) is not int or type(reset) is not int or type(last) is not int or r not in (0, 1, 2, 6):
            raise RateLimitError("protocol", f"unexpected decision in the library's reply: {reply[b:b + 4]!r}")
        allowed = r == 0
        out.append(_decision(allowed, REASONS[r], limit, remaining, reset, 0 if allowed else last, last if allowed else 0))
    return out


_new = object.__new__


def _decision(allowed, reason, limit, remaining, reset_after_us, retry_after_us, delay_us) -> Decision:
    """Decision(...) without the frozen dataclass' per-field object.__setattr__ (half its cost,
    per decision on the Redis back-end's hot path): the same instance, equal and hashing alike."""
    d = _new(Decision)
    d.__dict__.update(allowed=allowed, reason=reason, limit=limit, remaining=remaining,
                      reset_after_us=reset_after_us, retry_after_us=retry_after_us, delay_us=delay_us)
    return d
