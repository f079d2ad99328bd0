"""policy.py — what a limit is, validated as ratelimitd validates its config (src/core/policy.cc),
and the five policy arguments the Redis function library takes (docs/redis-functions.md).
The arguments must be the very numbers ratelimitd sends for the same policy: the bucket window
is time_to_drain_us of a full bucket in the same double arithmetic, and the rate is repr(), which
parses back to the same double."""
import json
import math
import os
import re
from dataclasses import dataclass
from typing import Tuple, Union

from .errors import RateLimitError

ALGORITHMS = ("fixed_window", "sliding_window_log", "sliding_window_counter", "token_bucket", "leaky_bucket")
# The bounds of include/ratelimit/policy.h, generated into this package (policy_bounds.json;
# tests/redis/policy_bounds_test.cc fails when it drifts), never copied by hand.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "policy_bounds.json"), encoding="utf-8") as _f:
    _BOUNDS = json.load(_f)
MAX_LIMIT = _BOUNDS["max_limit"]
MAX_EVERY_HIT_LIMIT = _BOUNDS["max_every_hit_limit"]
MAX_COST = _BOUNDS["max_cost"]
MAX_SLIDING_LOG_LIMIT = _BOUNDS["max_sliding_log_limit"]
MAX_KEY_BYTES = _BOUNDS["max_key_bytes"]
_MIN_WINDOW_US, _MAX_WINDOW_US = _BOUNDS["min_window_us"], _BOUNDS["max_window_us"]
_MIN_RATE, _MAX_RATE = float(_BOUNDS["min_rate"]), float(_BOUNDS["max_rate"])
_UNIT = _BOUNDS["unit"]
_TWO_POW_53 = float(_BOUNDS["exact_integer_limit"])
_NAME = re.compile(_BOUNDS["policy_name_pattern"])
_DURATION = re.compile(r"^([0-9]+)(us|ms|s|m|h|d)$")
_SCALE = {"us": 1, "ms": 1_000, "s": 1_000_000, "m": 60_000_000, "h": 3_600_000_000, "d": 86_400_000_000}


@dataclass(frozen=True)
class Policy:
    name: str
    algorithm: str
    limit: int        # capacity: the limit, or a bucket's burst (q of RateLimit-Policy)
    window_us: int    # the window, or the time to drain a full bucket (w of RateLimit-Policy)
    every_hit: bool
    args: Tuple[str, str, str, str, str, str]  # algorithm index, limit, window_us, rate, shape, counting


def parse_duration(text: Union[str, int]) -> int:
    """'500ms', '1s', '60s', '1m', '1h', '2d', '250us' (ratelimitd's syntax), or µs as an int."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text <= 0:
            raise RateLimitError("invalid_policy", f"window must be a positive number of µs, got {text}")
        return text
    m = _DURATION.match(str(text))
    if not m:
        raise RateLimitError("invalid_policy", f"bad duration {text!r} (expected e.g. 500ms, 1s, 60s, 1m, 1h, 2d)")
    return int(m.group(1)) * _SCALE[m.group(2)]


def _drained_u(elapsed_us: int, rate: float) -> int:
    return int(float(elapsed_us) * rate)


def _time_to_drain_us(need_u: int, rate: float) -> int:  # units.h time_to_drain_us
    if need_u <= 0:
        return 0
    t = math.ceil(float(need_u) / rate)
    while t > 0 and _drained_u(t - 1, rate) >= need_u:
        t -= 1
    while _drained_u(t, rate) < need_u:
        t += 1
    return t


def _check_int(what: str, v, lo: int, hi: int) -> None:
    if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
        raise RateLimitError("invalid_policy", f"{what} must be an integer between {lo} and {hi}, got {v!r}")


def make_policy(name: str, algorithm: str, *, limit=None, window=None, rate=None, burst=None,
                mode: str = "police", count_denied: bool = False, every_hit: bool = False) -> Policy:
    """A validated Policy; raises RateLimitError('invalid_policy') naming the problem."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise RateLimitError("invalid_policy", f"policy name must be 1-64 characters of [A-Za-z0-9_.:-], got {name!r}")
    if algorithm not in ALGORITHMS:
        raise RateLimitError("invalid_policy", f"policy {name!r}: unknown algorithm {algorithm!r} (expected {', '.join(ALGORITHMS)})")
    index = str(ALGORITHMS.index(algorithm))
    if algorithm in ("token_bucket", "leaky_bucket"):
        _check_int("burst", burst, 1, MAX_LIMIT)
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not math.isfinite(rate) or not _MIN_RATE <= rate <= _MAX_RATE:
            raise RateLimitError("invalid_policy", f"policy {name!r}: rate must be a finite number of units per second between 1e-06 and 1e9, got {rate!r}")
        rate = float(rate)
        if 2.0 * burst * _UNIT / rate > _TWO_POW_53:
            raise RateLimitError("invalid_policy", f"policy {name!r}: burst / rate is too long (over 140 years to refill)")
        if mode not in ("police", "shape"):
            raise RateLimitError("invalid_policy", f"policy {name!r}: mode must be police or shape, got {mode!r}")
        shape = algorithm == "leaky_bucket" and mode == "shape"
        window_us = _time_to_drain_us(burst * _UNIT, rate)
        return Policy(name, algorithm, burst, window_us, False,
                      (index, str(burst), str(window_us), repr(rate), "1" if shape else "0", "1" if count_denied else "0"))
    every_hit = bool(every_hit) and algorithm == "fixed_window"
    _check_int("limit", limit, 0 if every_hit else 1, MAX_EVERY_HIT_LIMIT if every_hit else MAX_LIMIT)
    window_us = parse_duration(window)
    if not _MIN_WINDOW_US <= window_us <= _MAX_WINDOW_US:
        raise RateLimitError("invalid_policy", f"window must be between 1ms and 366d, got {window_us}us")
    if algorithm == "sliding_window_log" and limit > MAX_SLIDING_LOG_LIMIT:
        raise RateLimitError("invalid_policy", f"policy {name!r}: sliding_window_log keeps one entry per admitted request, so its limit is capped at {MAX_SLIDING_LOG_LIMIT} (got {limit}); use sliding_window_counter for larger limits")
    if algorithm == "sliding_window_counter" and float(limit + 1) * float(window_us) > _TWO_POW_53:
        raise RateLimitError("invalid_policy", f"policy {name!r}: limit x window overflows exact arithmetic ((limit + 1) * window_us must be <= 2^53)")
    counting = "2" if every_hit else "1" if count_denied else "0"
    return Policy(name, algorithm, limit, window_us, every_hit, (index, str(limit), str(window_us), "0", "0", counting))


_RATE = re.compile(r"^([1-9][0-9]{0,15})/(?:(second|minute|hour|day)|([1-9][0-9]{0,8})(s|m|h|d))$")
_RATE_UNIT_S = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_rate(text: str) -> dict:
    """"10/minute" (second, hour, day too) or "100/30s" (a count per a whole number of s, m, h or
    d) -> a sliding_window_counter policy's dict: the window algorithm whose memory does not grow
    with the limit and whose boundary burst is bounded (a fixed window's is not). Strict, as the
    Node client's parseRate: no spaces, plurals or "per"; anything else raises invalid_policy
    naming the accepted forms, so a typo fails when the limiter is made."""
    m = _RATE.match(text) if isinstance(text, str) else None
    if not m:
        raise RateLimitError("invalid_policy", f"bad rate {text!r}: expected \"<count>/<second|minute|hour|day>\" or "
                             "\"<count>/<n><s|m|h|d>\", e.g. \"10/minute\" or \"100/30s\"")
    seconds = _RATE_UNIT_S[m.group(2)] if m.group(2) else int(m.group(3)) * _RATE_UNIT_S[m.group(4)]
    return {"algorithm": "sliding_window_counter", "limit": int(m.group(1)), "window": f"{seconds}s"}


def policy_from_dict(name: str, spec: Union[dict, str]) -> Policy:
    """make_policy from a dict as in ratelimitd's YAML: {algorithm, limit, window} or {algorithm,
    rate, burst, mode}; or from the "10/minute" shorthand (parse_rate)."""
    if isinstance(spec, str):
        spec = parse_rate(spec)
    if not isinstance(spec, dict) or "algorithm" not in spec:
        raise RateLimitError("invalid_policy", f"policy {name!r}: expected a dict with an 'algorithm'")
    spec = dict(spec)
    algorithm = spec.pop("algorithm")
    try:
        return make_policy(name, algorithm, **spec)
    except TypeError as e:
        raise RateLimitError("invalid_policy", f"policy {name!r}: {e}") from None


def validate_request(policy: Policy, key: str, cost) -> None:
    """A key of 1 ... 512 bytes (UTF-8) and a cost of 1 ... 1e9 (0 too when every hit counts)."""
    if not isinstance(key, str) or not key:
        raise RateLimitError("invalid_key", "key must be a non-empty string")
    # At most 4 bytes a code point: a key of <= 128 code points cannot exceed 512 bytes.
    n = len(key) if len(key) <= MAX_KEY_BYTES // 4 else len(key.encode("utf-8", "surrogatepass"))
    if n > MAX_KEY_BYTES:
        raise RateLimitError("invalid_key", f"key is {n} bytes; the maximum is {MAX_KEY_BYTES}")
    lo = 0 if policy.every_hit else 1
    if not isinstance(cost, int) or isinstance(cost, bool) or not lo <= cost <= MAX_COST:
        raise RateLimitError("invalid_cost", f"cost must be an integer between {lo} and {MAX_COST}, got {cost!r}")


def validate_report(policy: Policy, key: str, cost) -> None:
    """A report's key and cost (usage known after the fact, docs/usage.md): a whole number from
    -MAX_COST (a refund) to MAX_COST, 0 included, as ratelimitd's validate_report_cost."""
    validate_request(policy, key, 1)
    if not isinstance(cost, int) or isinstance(cost, bool) or not -MAX_COST <= cost <= MAX_COST:
        raise RateLimitError("invalid_cost", f"cost of a report must be an integer between {-MAX_COST} and {MAX_COST}, got {cost!r}")
