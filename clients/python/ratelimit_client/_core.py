"""_core.py — what the sync and asyncio Redis limiters share: policies, keys, and the
rl<version>_batch call's encoding (run_batch in src/redis/lua/multi.lua; docs/redis-functions.md).
Pure: no I/O."""
import re
from typing import Dict, List, Optional, Sequence, Tuple

from .decision import failure_decision
from .errors import RateLimitError
from .headers import PolicyInfo
from .library import find_library
from .policy import Policy, policy_from_dict, validate_report, validate_request

_ESCAPE = re.compile(r"[%{}]")


def escape_key(key: str) -> str:
    """'%' -> %25, '{' -> %7B, '}' -> %7D: no user key can leave its hash tag."""
    return _ESCAPE.sub(lambda m: {"%": "%25", "{": "%7B", "}": "%7D"}[m.group(0)], key)


# The library's ops (docs/redis-functions.md). A report (usage known after the fact,
# docs/usage.md) is recorded even past the limit; its cost may be negative, a refund.
ACQUIRE, PEEK, REPORT = 0, 1, 4


class Item:
    """One decision to send: its policy, state key (a sliding log's second key is state + "#log"),
    cost, op (ACQUIRE, PEEK, REPORT) and test-mode time (None: Redis' clock)."""
    __slots__ = ("policy", "state", "cost", "op", "now_us")

    def __init__(self, policy: Policy, state: str, cost: int, op: int, now_us: Optional[int]):
        self.policy, self.state, self.cost, self.op, self.now_us = policy, state, cost, op, now_us


class LimiterCore:
    def __init__(self, policies: Dict[str, object], key_prefix: str, on_failure: str, library):
        if not policies:
            raise RateLimitError("invalid_policy", "at least one policy is required")
        self.policies: Dict[str, Policy] = {
            name: spec if isinstance(spec, Policy) else policy_from_dict(name, spec) for name, spec in policies.items()}
        if "{" in key_prefix or "}" in key_prefix or len(key_prefix.encode()) > 128:
            raise RateLimitError("invalid_policy", "key_prefix must be at most 128 bytes, without { or }")
        if on_failure not in ("open", "closed"):
            raise RateLimitError("invalid_policy", f"on_failure must be 'open' or 'closed', got {on_failure!r}")
        self.prefix = key_prefix
        self.on_failure = on_failure
        self.library = find_library(library)
        self.function = f"rl{self.library.version}_batch"
        self.failures = 0
        self.on_error = None  # the subclasses' constructors set it
        self._loaded = False

    def policy(self, name: str) -> Policy:
        p = self.policies.get(name)
        if p is None:
            raise RateLimitError("unknown_policy", f"unknown policy {name!r} (configured: {', '.join(self.policies)})")
        return p

    def describe(self, name: str) -> Optional[PolicyInfo]:
        p = self.policies.get(name)
        return PolicyInfo(p.name, p.limit, p.window_us) if p else None

    def state_key(self, p: Policy, key: str) -> str:
        if "%" in key or "{" in key or "}" in key:
            key = escape_key(key)
        return f"{self.prefix}{{{key}}}:{p.name}"

    def item(self, policy: str, key: str, cost: int, op: int, now_us: Optional[int]) -> Item:
        p = self.policy(policy)
        if op == REPORT:
            validate_report(p, key, cost)
        else:
            validate_request(p, key, cost)
        if now_us is not None and (not isinstance(now_us, int) or now_us < 0):
            raise RateLimitError("invalid_cost", f"now_us must be a non-negative integer, got {now_us!r}")
        return Item(p, self.state_key(p, key), cost, op, now_us)

    def _failed(self, items, e) -> list:
        """The failure policy's decisions for `items` that Redis did not decide (error `e`):
        counted and reported to on_error. The library stays known loaded: a flushed one answers
        "Function not found" and is loaded again then; re-sending it after every failure cost a
        second timeout per call and 49 KB per call through an outage (issue 31 defect 3)."""
        self.failures += len(items)
        if self.on_error:
            self.on_error(e)
        return [failure_decision(self.on_failure, it.policy.limit) for it in items]

    def reset_keys(self, policy: str, key: str) -> Tuple[str, str]:
        p = self.policy(policy)
        validate_request(p, key, 1)
        state = self.state_key(p, key)
        return state, state + "#log"

    def encode(self, items: Sequence[Item]) -> list:
        """FCALL's arguments after the function name: numkeys, keys, then the batch's args (the
        number of distinct policies, the clock, six per policy, then per item its policy's index,
        with ':<cost>:<op>' unless an acquire of 1, and with clock 't' its time)."""
        first = items[0].policy
        index = None  # policy id -> its index text, only when the batch mixes policies
        timed = False
        keys: List[str] = []
        for it in items:
            p = it.policy
            if p is not first and index is None:
                index = {id(first): "1"}
            if index is not None and id(p) not in index:
                index[id(p)] = str(len(index) + 1)
            if it.now_us is not None:
                timed = True
            keys.append(it.state)
            if p.algorithm == "sliding_window_log":
                keys.append(it.state + "#log")
        policies = [first] if index is None else list({id(it.policy): it.policy for it in items}.values())
        args: List[str] = [str(len(policies)), "t" if timed else "-"]
        for p in policies:
            args.extend(p.args)
        for it in items:
            p = "1" if index is None else index[id(it.policy)]
            args.append(p if it.cost == 1 and it.op == ACQUIRE else f"{p}:{it.cost}:{it.op}")
            if timed:
                args.append("-" if it.now_us is None else str(it.now_us))
        return [len(keys), *keys, *args]
