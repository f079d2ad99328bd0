"""ratelimit_client — ratelimit's decisions from Python: the Redis function library called
directly (redis-py, sync and asyncio; the same code, keys and counts as ratelimitd's Redis store)
or a running ratelimitd over HTTP, with FastAPI/Starlette middleware and a Flask decorator that
answer exactly as ratelimitd does (docs/redis-functions.md, clients/python/README.md).
The framework adapters are imported from their modules (ratelimit_client.starlette,
ratelimit_client.fastapi, ratelimit_client.flask) so no framework is needed to use the rest.
Typed (py.typed)."""
from .decision import Decision, failure_decision
from .errors import RateLimitError
from .headers import Answer, PolicyInfo, render_decisions
from .leases import Lease
from .library import Library, find_library
from .client_ip import TrustedProxies, client_address
from .middleware import RateLimitInfo
from .policy import Policy, make_policy, parse_duration, parse_rate
from .ratelimitd import AsyncRatelimitdLimiter, RatelimitdLimiter
from .redis_limiter import AsyncRedisLimiter, RedisLimiter
from ._core import escape_key
from .usage import AsyncReservation, Reservation, recorded_by

__all__ = ["Decision", "failure_decision", "RateLimitError", "Answer", "PolicyInfo", "render_decisions",
           "Library", "find_library", "Policy", "make_policy", "parse_duration", "parse_rate", "RateLimitInfo",
           "TrustedProxies", "client_address", "AsyncRatelimitdLimiter",
           "RatelimitdLimiter", "AsyncRedisLimiter", "RedisLimiter", "escape_key", "AsyncReservation", "Reservation",
           "recorded_by", "Lease"]
