"""redis_limiter.py — the Redis back-ends on redis-py: RedisLimiter (blocking) and
AsyncRedisLimiter (asyncio). Decisions by the ratelimit function library (FCALL
rl<version>_batch), the same keys, arguments and code as ratelimitd's Redis store, so both share
one count. The clock is Redis' TIME; now_us (conformance tests only) overrides it.

Both batch: a call is sent at once while fewer than max_in_flight are outstanding; the
decisions that arrive meanwhile (other tasks, or other threads) leave together as one batch (at
most 1024) when a reply comes back — one Redis call for many decisions. In RedisLimiter the
thread whose call returns sends the next batch on the others' behalf while they wait.
AsyncRedisLimiter's batches take even shares of what is outstanding (default 4 calls in flight),
so Redis decides one batch while the event loop answers another. acquire_many() sends its own
batch.

Failures: a refused or lost connection, a timeout (`timeout`, default 0.25 s: the socket
timeout of a client made from a URL; AsyncRedisLimiter also bounds each call by it with its own
timer, so a client the caller passed in cannot hang a request: issue 31 defect 2) or an error
reply decide by on_failure ('open' admits, 'closed' denies for 1 s), counted in `failures`; a
flushed library is loaded again and the call retried once. report() is op 4 of the same
batch (usage known after the fact); a failed report answers the failure policy's decision
(failed_open / failed_closed: nothing was recorded). Bad input raises RateLimitError
before anything is sent; a library Redis lacks and this client cannot load raises
RateLimitError('library_missing') naming the versions Redis has.
Redis Cluster (a redis-cluster:// URL or a redis-py RedisCluster): a batch holds decisions of one
hash slot only, the library is loaded on every primary (_cluster.py); the blocking client is made
at the first call, so a cluster that is down answers by on_failure instead of failing the
constructor.
Thread-safety: RedisLimiter may be shared by threads (a sender thread keeps sending while
decisions queue, so under constant load one caller may wait for a few batches of others);
AsyncRedisLimiter belongs to one event loop."""
import asyncio
import threading
from typing import Dict, List, Optional

import redis
import redis.asyncio as aioredis
from redis.exceptions import RedisClusterException

from ._cluster import (cluster_from_url, cut_by_slot, ensure_library_on_primaries, ensure_library_on_primaries_async,
                       is_cluster, is_cluster_url, slot_of)
from ._core import ACQUIRE, PEEK, REPORT, Item, LimiterCore
from .decision import Decision, decode_reply
from .errors import RateLimitError
from .library import ensure_library, ensure_library_async
from .usage import AsyncReservation, Reservation, reserve, reserve_async

MAX_BATCH = 1024


def _not_found(e: Exception) -> bool:
    return "function not found" in str(e).lower()


def _slot(waiting) -> int:
    item = waiting[0] if isinstance(waiting, tuple) else waiting.item
    return slot_of(item.state)


class _Waiting:
    __slots__ = ("item", "done", "decision", "error")

    def __init__(self, item: Item):
        self.item, self.done, self.decision, self.error = item, threading.Event(), None, None


class RedisLimiter(LimiterCore):
    def __init__(self, redis_url_or_client, policies: Dict[str, object], *, key_prefix: str = "rl:",
                 on_failure: str = "open", timeout: float = 0.25, library=None, on_error=None,
                 max_in_flight: int = 2):
        super().__init__(policies, key_prefix, on_failure, library)
        self.max_in_flight = max(1, max_in_flight)
        self._lock = threading.Lock()
        self._queue: List[_Waiting] = []
        self._in_flight = 0
        self._redis = None
        self._url, self._timeout = None, timeout
        if isinstance(redis_url_or_client, str) and is_cluster_url(redis_url_or_client):
            self._url = redis_url_or_client  # RedisCluster connects in its constructor: at the first call
            self._cluster = True
        elif isinstance(redis_url_or_client, str):
            self._redis = redis.Redis.from_url(redis_url_or_client, socket_timeout=timeout, socket_connect_timeout=timeout)
            self._cluster = False
        else:
            self._redis = redis_url_or_client
            self._cluster = is_cluster(redis_url_or_client)
        self.on_error = on_error
        self._loaded = False

    @property
    def redis(self):
        """The redis-py client (made from a redis-cluster:// URL at first use)."""
        if self._redis is None:
            with self._lock:
                if self._redis is None:
                    self._redis = cluster_from_url(self._url, self._timeout)
        return self._redis

    def connect(self) -> None:
        """Makes sure Redis has the library (loads it when this client has the text), on every
        primary of a cluster. Optional."""
        r = self.redis
        if self._cluster:
            ensure_library_on_primaries(r, self.library, ensure_library)
        else:
            ensure_library(r.execute_command, self.library)
        self._loaded = True

    def acquire(self, policy: str, key: str, cost: int = 1, *, now_us: Optional[int] = None) -> Decision:
        return self._one(self.item(policy, key, cost, ACQUIRE, now_us))

    def peek(self, policy: str, key: str, cost: int = 1, *, now_us: Optional[int] = None) -> Decision:
        return self._one(self.item(policy, key, cost, PEEK, now_us))

    def report(self, policy: str, key: str, cost: int, *, now_us: Optional[int] = None) -> Decision:
        """Records usage known after the fact (docs/usage.md): `cost` units even past the limit
        (the key is then in debt: acquires are refused until the algorithm repays it), or,
        negative, a refund; 0 records nothing. Always allowed, with what is left now."""
        return self._one(self.item(policy, key, cost, REPORT, now_us))

    def reserve(self, policy: str, key: str, estimate: int) -> Reservation:
        """Acquires `estimate` now, to reconcile with the actual usage after the work (usage.py)."""
        return reserve(self, policy, key, estimate)

    def _one(self, item: Item) -> Decision:
        w = _Waiting(item)
        with self._lock:
            self._queue.append(w)
            send = self._in_flight < self.max_in_flight
            if send:
                self._in_flight += 1
        if send:
            self._drain()
        # Bounded: a sender always finishes its call within the socket timeout.
        w.done.wait()
        if w.error is not None:
            raise w.error
        return w.decision

    def _drain(self) -> None:
        """Sends what is queued, batch after batch, until the queue is empty."""
        while True:
            with self._lock:
                if not self._queue:
                    self._in_flight -= 1
                    return
                if self._cluster:
                    batch, self._queue = cut_by_slot(self._queue, _slot, MAX_BATCH)
                else:
                    batch, self._queue = self._queue[:MAX_BATCH], self._queue[MAX_BATCH:]
            try:
                results = self._decide([w.item for w in batch])
                for w, d in zip(batch, results):
                    w.decision = d
            except Exception as e:  # noqa: BLE001 - library_missing: every waiter gets it
                for w in batch:
                    w.error = e
            for w in batch:
                w.done.set()

    def acquire_many(self, requests) -> List[Decision]:
        """[(policy, key, cost), ...] as one call: independent decisions, in order."""
        items = [self.item(p, k, c, ACQUIRE, None) for p, k, c in requests]
        if self._cluster:  # one call per slot, answers put back in order
            out: List[Optional[Decision]] = [None] * len(items)
            pending = list(enumerate(items))
            while pending:
                part, pending = cut_by_slot(pending, lambda p: slot_of(p[1].state), MAX_BATCH)
                for (i, _), d in zip(part, self._decide([it for _, it in part])):
                    out[i] = d
            return out  # type: ignore[return-value]
        out = []
        for i in range(0, len(items), MAX_BATCH):
            out += self._decide(items[i:i + MAX_BATCH])
        return out

    def reset(self, policy: str, key: str) -> None:
        self.redis.delete(*self.reset_keys(policy, key))

    def close(self) -> None:
        if self._redis is not None:
            self._redis.close()

    def _call(self, items: List[Item]):
        if not self._loaded:
            self.connect()
        args = self.encode(items)
        try:
            return self.redis.execute_command("FCALL", self.function, *args)
        except redis.ResponseError as e:
            if not _not_found(e):
                raise
            self.connect()
            return self.redis.execute_command("FCALL", self.function, *args)

    def _decide(self, items: List[Item]) -> List[Decision]:
        try:
            reply = self._call(items)
            return decode_reply(reply, [it.policy.limit for it in items])
        except RateLimitError as e:
            if e.code == "library_missing":
                raise
            return self._failed(items, e)
        except (redis.RedisError, RedisClusterException, OSError) as e:
            return self._failed(items, e)


class AsyncRedisLimiter(LimiterCore):
    def __init__(self, redis_url_or_client, policies: Dict[str, object], *, key_prefix: str = "rl:",
                 on_failure: str = "open", timeout: float = 0.25, library=None, max_in_flight: int = 4,
                 on_error=None):
        super().__init__(policies, key_prefix, on_failure, library)
        if isinstance(redis_url_or_client, str) and is_cluster_url(redis_url_or_client):
            self.redis = cluster_from_url(redis_url_or_client, timeout, asyncio=True)
        elif isinstance(redis_url_or_client, str):
            self.redis = aioredis.Redis.from_url(redis_url_or_client, socket_timeout=timeout, socket_connect_timeout=timeout)
        else:
            self.redis = redis_url_or_client
        self._cluster = is_cluster(self.redis)
        self.max_in_flight = max(1, max_in_flight)
        self.timeout = timeout
        self.on_error = on_error
        self._queue: List[tuple] = []
        self._in_flight = 0
        self._in_flight_items = 0
        self._loaded = False

    async def connect(self) -> None:
        """As RedisLimiter.connect, awaited."""
        r = self.redis
        if self._cluster:
            await ensure_library_on_primaries_async(r, self.library, ensure_library_async)
        else:
            await ensure_library_async(r.execute_command, self.library)
        self._loaded = True

    async def acquire(self, policy: str, key: str, cost: int = 1, *, now_us: Optional[int] = None) -> Decision:
        return await self._decide(self.item(policy, key, cost, ACQUIRE, now_us))

    async def peek(self, policy: str, key: str, cost: int = 1, *, now_us: Optional[int] = None) -> Decision:
        return await self._decide(self.item(policy, key, cost, PEEK, now_us))

    async def report(self, policy: str, key: str, cost: int, *, now_us: Optional[int] = None) -> Decision:
        """As RedisLimiter.report."""
        return await self._decide(self.item(policy, key, cost, REPORT, now_us))

    async def reserve(self, policy: str, key: str, estimate: int) -> AsyncReservation:
        """As RedisLimiter.reserve, awaited."""
        return await reserve_async(self, policy, key, estimate)

    async def reset(self, policy: str, key: str) -> None:
        await self.redis.delete(*self.reset_keys(policy, key))

    async def close(self) -> None:
        await self.redis.close()
        if not self._cluster:
            await self.redis.connection_pool.disconnect()

    def _decide(self, item: Item) -> "asyncio.Future[Decision]":
        fut = asyncio.get_running_loop().create_future()
        self._queue.append((item, fut))
        if self._in_flight < self.max_in_flight:
            self._flush()
        return fut

    def _flush(self) -> None:
        # A batch takes at most its share (1 / max_in_flight) of the decisions outstanding, so the
        # calls in flight stay of even size and Redis decides one while this loop answers another
        # (else a lone early decision leaves alone beside one batch of all the others).
        while self._queue and self._in_flight < self.max_in_flight:
            share = -(-(len(self._queue) + self._in_flight_items) // self.max_in_flight)
            if self._cluster:
                batch, self._queue = cut_by_slot(self._queue, _slot, min(MAX_BATCH, share))
            else:
                batch, self._queue = self._queue[:share][:MAX_BATCH], self._queue[min(MAX_BATCH, share):]
            n = len(batch)
            self._in_flight += 1
            self._in_flight_items += n
            task = asyncio.ensure_future(self._send(batch))
            task.add_done_callback(lambda _t, n=n: self._sent(n))

    def _sent(self, n: int) -> None:
        self._in_flight -= 1
        self._in_flight_items -= n
        self._flush()

    async def _call(self, items: List[Item]):
        if not self._loaded:
            await self.connect()
        args = self.encode(items)
        try:
            return await self.redis.execute_command("FCALL", self.function, *args)
        except redis.ResponseError as e:
            if not _not_found(e):
                raise
            await self.connect()
            return await self.redis.execute_command("FCALL", self.function, *args)

    async def _bounded(self, items: List[Item]):
        """_call within self.timeout, else asyncio.TimeoutError. The call is shielded, not
        cancelled: cancelling a command mid-reply can leave its answer on the connection for the
        next command to read (redis-py before 4.5.3, CVE-2023-28858); a late one is dropped."""
        task = asyncio.ensure_future(self._call(items))
        task.add_done_callback(lambda t: t.cancelled() or t.exception())  # a late error is answered
        return await asyncio.wait_for(asyncio.shield(task), self.timeout)

    async def _send(self, batch) -> None:
        items = [it for it, _ in batch]
        try:
            reply = await self._bounded(items)
            results = decode_reply(reply, [it.policy.limit for it in items])
        except RateLimitError as e:
            if e.code == "library_missing":
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(e)
                return
            results = self._failed(items, e)
        except (redis.RedisError, RedisClusterException, OSError, asyncio.TimeoutError) as e:
            results = self._failed(items, e)
        for (_, fut), d in zip(batch, results):
            if not fut.done():
                fut.set_result(d)
