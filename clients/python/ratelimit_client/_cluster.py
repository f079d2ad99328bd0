"""_cluster.py — what the Redis back-ends need to run on Redis Cluster (issue 31): the hash slot
of a key (CRC16/XMODEM of its hash tag mod 16384, as Redis computes it), a RedisCluster client
(blocking or asyncio) from a redis-cluster:// URL (the URL form ratelimitd takes), and the
function library loaded on every primary.

Why: one FCALL may touch keys of one slot only, and every state key is `prefix{key}:policy` (a
sliding log's second key `...#log` has the same tag), so a batch is cut per slot; redis-py's
RedisCluster routes each FCALL by its keys and follows MOVED and ASK, so a slot migrating under
load keeps its count. A function lives on each primary (FUNCTION LOAD is not routed by key); a
primary that lacks it answers "Function not found" and the caller loads it everywhere again.
Invariants: slot_of matches CLUSTER KEYSLOT (tests/test_cluster.py checks it on a real
cluster); no state here."""
import re
from typing import List, Tuple
from urllib.parse import unquote

from .errors import RateLimitError
from .library import _listed_names


def _table() -> List[int]:
    t = []
    for i in range(256):
        c = i << 8
        for _ in range(8):
            c = ((c << 1) ^ 0x1021) & 0xFFFF if c & 0x8000 else (c << 1) & 0xFFFF
        t.append(c)
    return t


_TABLE = _table()


def _crc16(data: bytes) -> int:
    crc = 0
    for b in data:
        crc = ((crc << 8) & 0xFFFF) ^ _TABLE[((crc >> 8) ^ b) & 0xFF]
    return crc


def slot_of(key: str) -> int:
    """The hash slot of `key`: of the text between its first '{' and the next '}' when that is
    not empty, else of the whole key."""
    data = key.encode()
    start = data.find(b"{")
    if start >= 0:
        end = data.find(b"}", start + 1)
        if end > start + 1:
            return _crc16(data[start + 1:end]) % 16384
    return _crc16(data) % 16384


def is_cluster_url(url: str) -> bool:
    return url.startswith("redis-cluster://") or url.startswith("rediss-cluster://")


def parse_cluster_url(url: str) -> Tuple[List[Tuple[str, int]], dict]:
    """redis-cluster://[user:password@]host:port[,host:port...][/0] -> (seeds, connection kwargs)."""
    rest = url.split("://", 1)[1]
    rest = re.sub(r"/\d*$", "", rest)
    auth, _, hosts = rest.rpartition("@")
    seeds = []
    for hp in hosts.split(","):
        m = re.fullmatch(r"(\[[^\]]+\]|[^:]+)(?::(\d+))?", hp)
        if not m:
            raise RateLimitError("invalid_policy", f"redis-cluster:// URL has a bad node {hp!r} (expected host:port,host:port)")
        seeds.append((m.group(1).strip("[]"), int(m.group(2) or 6379)))
    kwargs = {"ssl": url.startswith("rediss-cluster://")}
    if auth:
        user, colon, password = auth.partition(":")
        kwargs["username"] = unquote(user) if colon else None
        kwargs["password"] = unquote(password if colon else user)
    return seeds, kwargs


def cluster_from_url(url: str, timeout: float, asyncio: bool = False):
    """A RedisCluster (redis.cluster or, with asyncio, redis.asyncio.cluster) on the URL's seeds,
    with the limiter's socket timeouts."""
    seeds, kwargs = parse_cluster_url(url)
    if asyncio:
        from redis.asyncio.cluster import ClusterNode, RedisCluster
    else:
        from redis.cluster import ClusterNode, RedisCluster
    return RedisCluster(startup_nodes=[ClusterNode(h, p) for h, p in seeds], socket_timeout=timeout,
                        socket_connect_timeout=timeout, **kwargs)


def is_cluster(client) -> bool:
    """True for a redis-py RedisCluster (blocking or asyncio), subclasses included."""
    from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster
    from redis.cluster import RedisCluster
    return isinstance(client, (RedisCluster, AsyncRedisCluster))


def cut_by_slot(items, slot, n: int):
    """The first `n` of `items` whose slot(item) is the first one's, and the rest, both in order."""
    first = slot(items[0])
    taken, rest = [], []
    for it in items:
        (taken if len(taken) < n and slot(it) == first else rest).append(it)
    return taken, rest


def _listing(lib):
    return ("FUNCTION", "LIST", "LIBRARYNAME", f"ratelimit_{lib.version}")


def loaded(listed, lib) -> bool:
    """True when a FUNCTION LIST reply names `lib`. The cluster paths ask before they load:
    redis-py 4.3's RedisCluster logs every error reply with a traceback, so the "already exists"
    that ensure_library takes in its stride would print one per primary at each start."""
    return f"ratelimit_{lib.version}" in _listed_names(listed)


def ensure_library_on_primaries(r, lib, ensure_library) -> None:
    """ensure_library on every primary of the blocking RedisCluster `r` that lacks `lib`."""
    for node in r.get_primaries():
        execute = (lambda n: lambda *a: r.execute_command(*a, target_nodes=n))(node)
        if not loaded(execute(*_listing(lib)), lib):
            ensure_library(execute, lib)


async def ensure_library_on_primaries_async(r, lib, ensure_library_async) -> None:
    """The same for redis.asyncio's RedisCluster (initialised first)."""
    await r.initialize()
    for node in r.get_primaries():
        execute = (lambda n: lambda *a: r.execute_command(*a, target_nodes=n))(node)
        if not loaded(await execute(*_listing(lib)), lib):
            await ensure_library_async(execute, lib)
