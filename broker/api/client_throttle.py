"""Client quota enforcement for Produce and Fetch: what the handlers call, over the sans-IO
managers of `broker.quotas.client_quota_manager`.

Produce records the request's size, Fetch the size of the records it would return (followers,
replica id >= 0, are never throttled), as Kafka's KafkaApis does. A client over its quota gets
its response with ``throttle_time_ms`` set; a Fetch over the quota is answered without data (its
bytes are taken back, as Kafka does, and the consumer fetches them again after the wait). Then,
as Kafka (KIP-219), the client's connection is muted for the throttle time: the node reads
nothing more from it until the time is up. Versions before KIP-219 (Produce < v6, Fetch < v8)
get their response only after the throttle time instead. ``active()`` is the fast path: with no
client quota in the image, nothing is looked up or recorded.
"""

import asyncio
import dataclasses
import datetime
import time
import types
from collections.abc import Awaitable, Callable, Generator
from typing import Any, Final, TypeVar

from ..metadata.client_quotas import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
)
from ..metadata.image import MetadataImage
from ..metrics.quota_metrics import QuotaRow, QuotaSnapshot
from ..quotas.client_quota_manager import (
    DEFAULT_SAMPLES,
    ClientQuotaManager,
    IpConnectionQuotaManager,
    user_of,
)
from .context import RequestContext

# The first versions whose clients throttle themselves on throttle_time_ms (KIP-219)
PRODUCE_CLIENT_THROTTLES: Final = 6
FETCH_CLIENT_THROTTLES: Final = 8
# Not under request_percentage, as Kafka: node-to-node (cluster action) APIs and SASL
REQUEST_QUOTA_EXEMPT: Final = frozenset({17, 27, 36, 52, 53, 54, 56, 58, 59, 62, 63, 67, 80, 81})
T = TypeVar("T")


class TimedRun:
    """Adds up the time an awaitable's own steps take on the event loop (not the time it
    waits): the request handling time ``request_percentage`` is measured on."""

    __slots__ = ("seconds",)

    def __init__(self) -> None:
        self.seconds = 0.0

    @types.coroutine
    def run(self, aw: Awaitable[T]) -> Generator[Any, Any, T]:
        it = aw.__await__()
        clock = time.perf_counter
        value: Any = None
        error: BaseException | None = None
        while True:
            start = clock()
            try:
                step = it.send(value) if error is None else it.throw(error)
            except StopIteration as done:
                self.seconds += clock() - start
                return done.value  # type: ignore[no-any-return]
            self.seconds += clock() - start
            try:
                value, error = (yield step), None
            except BaseException as e:  # cancellation goes on into the handler
                value, error = None, e


class ClientThrottle:
    def __init__(
        self,
        image: Callable[[], MetadataImage],
        now_ms: Callable[[], float],
        samples: int = DEFAULT_SAMPLES,
        window_s: int = 1,
        controller_samples: int = DEFAULT_SAMPLES,
        controller_window_s: int = 1,
    ) -> None:
        self._image = image
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, now_ms, samples, window_s)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, now_ms, samples, window_s)
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, now_ms, samples, window_s)
        self.ip = IpConnectionQuotaManager(now_ms, samples, window_s)
        self.mutation = ClientQuotaManager(
            CONTROLLER_MUTATION_RATE, now_ms, controller_samples, controller_window_s
        )
        self._source: object = None

    def active(self) -> bool:
        """Any client quota set (the managers follow the image; cheap when it is unchanged)."""
        quotas = self._image().client_quotas
        if quotas is not self._source:
            self._source = quotas
            for m in (self.produce, self.fetch, self.request, self.mutation):
                m.update(quotas)
            self.ip.update(quotas)
        return bool(quotas)

    def ip_connection_throttle_s(self, ip: str) -> float:
        """For the network server: a new connection from ``ip``; seconds it is throttled
        (then closed unserved, as Kafka does), 0 when within ``connection_creation_rate``."""
        if not self.active():
            return 0.0
        return self.ip.record(ip) / 1000

    def metrics_snapshot(self) -> QuotaSnapshot:
        """Rates and throttle times of the clients under a quota (read on the event loop)."""
        rows: list[QuotaRow] = []
        totals: dict[str, tuple[int, float]] = {}
        for kind, m in (
            ("Produce", self.produce),
            ("Fetch", self.fetch),
            ("Request", self.request),
        ):
            st = m.stats
            totals[kind] = (st.throttled_requests, st.throttle_ms_total / 1000)
            for (user, client), sensor in st.by_tags.items():
                mean = (
                    sensor.throttle_ms_total / sensor.throttle_count if sensor.throttle_count else 0
                )
                rows.append(QuotaRow(kind, user, client, m.rate((user, client)), mean))
        return QuotaSnapshot(tuple(rows), totals)

    def mutation_quota(self, ctx: RequestContext, strict: bool) -> "MutationQuota | None":
        """KIP-599's controller_mutation_rate for this request, None when none applies."""
        if not (self.active() and self.mutation.enabled):
            return None
        user, client = user_of(ctx.principal), ctx.client_id
        if self.mutation.resolve(user, client) is None:
            return None
        return MutationQuota(self.mutation, user, client, strict)

    def request_quota_applies(self, ctx: RequestContext) -> bool:
        """``request_percentage`` is set for someone and this request is under it."""
        return (
            self.active()
            and self.request.enabled
            and ctx.connection is not None
            and ctx.header.api_key not in REQUEST_QUOTA_EXEMPT
        )

    def request_throttle_ms(self, ctx: RequestContext, seconds: float) -> int:
        """Record ``seconds`` of handling time (as percent-seconds of one thread)."""
        m = self.request
        user, client = user_of(ctx.principal), ctx.client_id
        ms = m.record(user, client, seconds * 100)
        if ms > 0:
            m.throttled(user, client, ms)
        return ms

    def produce_throttle_ms(self, ctx: RequestContext, request_bytes: int) -> int:
        m = self.produce
        if not m.enabled:
            return 0
        user, client = user_of(ctx.principal), ctx.client_id
        ms = m.record(user, client, request_bytes)
        if ms > 0:
            m.throttled(user, client, ms)
        return ms

    def fetch_max_bytes(self, ctx: RequestContext, max_bytes: int) -> int:
        """Kafka caps a consumer's fetch at what its quota lets through in a window."""
        m = self.fetch
        if not m.enabled:
            return max_bytes
        cap = m.max_value_in_window(user_of(ctx.principal), ctx.client_id)
        return max_bytes if cap >= max_bytes else max(1, int(cap))

    def fetch_throttle_ms(self, ctx: RequestContext, response_bytes: int) -> int:
        """Records the bytes; when over the quota, takes them back (the response goes
        without data) and returns the throttle time."""
        m = self.fetch
        if not m.enabled:
            return 0
        user, client = user_of(ctx.principal), ctx.client_id
        ms = m.record(user, client, response_bytes)
        if ms > 0:
            m.unrecord(user, client, response_bytes)
            m.throttled(user, client, ms)
        return ms


THROTTLING_QUOTA_EXCEEDED_MESSAGE: Final = "The throttling quota has been exceeded."


class MutationQuota:
    """One CreateTopics / DeleteTopics / CreatePartitions under ``controller_mutation_rate``
    (KIP-599), counted in partitions created or deleted. Strict (the versions that know
    THROTTLING_QUOTA_EXCEEDED: CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+): a
    topic is refused while the client's rate is over its quota, else admitted and counted even
    if that takes the rate over. Permissive (older versions): everything is admitted and counted.
    Either way the response carries the throttle time the rate then calls for."""

    def __init__(self, m: ClientQuotaManager, user: str, client: str, strict: bool) -> None:
        self._m, self._user, self._client, self.strict = m, user, client, strict

    def admit(self, permits: int) -> bool:
        if self.strict and self._m.over(self._user, self._client):
            return False
        if permits > 0:
            self._m.record(self._user, self._client, permits)
        return True

    def throttle_ms(self, ctx: RequestContext) -> int:
        ms = self._m.throttle_ms(self._user, self._client)
        if ms > 0:
            self._m.throttled(self._user, self._client, ms)
            conn: Any = ctx.connection
            if conn is not None:
                conn.mute(ms / 1000)
        return ms


async def timed_request(
    quotas: ClientThrottle, ctx: RequestContext, handler: Awaitable[Any]
) -> Any:
    """Run a decoded request's handler under ``request_percentage``: its handling time is
    recorded and, over the quota, the response gets ``throttle_time_ms`` (the larger of its own
    and this one) and the connection is muted, as Kafka does."""
    await wait_while_muted(ctx)
    timer = TimedRun()
    resp = await timer.run(handler)
    ms = quotas.request_throttle_ms(ctx, timer.seconds)
    if ms <= 0 or resp is None:
        return resp
    conn: Any = ctx.connection
    conn.mute(ms / 1000)
    own = getattr(resp, "throttle_time", None)
    if not isinstance(own, datetime.timedelta) or own.total_seconds() * 1000 >= ms:
        return resp
    return dataclasses.replace(resp, throttle_time=datetime.timedelta(milliseconds=ms))


async def timed_raw_request(
    quotas: ClientThrottle, ctx: RequestContext, handler: Awaitable[T]
) -> T:
    """Produce and Fetch under ``request_percentage``: recorded, and over the quota the
    connection is muted (their own byte-rate throttle is what their response carries)."""
    timer = TimedRun()
    out = await timer.run(handler)
    ms = quotas.request_throttle_ms(ctx, timer.seconds)
    conn: Any = ctx.connection
    if ms > 0:
        conn.mute(ms / 1000)
    return out


async def wait_while_muted(ctx: RequestContext) -> None:
    """A request read before its connection was muted waits for the mute to end before it is
    served: Kafka reads one request of a connection at a time, so it would not have read it
    yet (without this, requests a client pipelined would all slip through at once)."""
    conn: Any = ctx.connection
    if conn is None:
        return
    wait = conn.muted_for()
    while wait > 0:  # requests woken together are served one at a time: each may mute again
        await asyncio.sleep(wait)
        wait = conn.muted_for()


async def throttle(ctx: RequestContext, throttle_ms: int, client_throttles: bool) -> None:
    """Mute the client's connection for ``throttle_ms``; for clients before KIP-219 also hold
    the response back that long."""
    if throttle_ms <= 0:
        return
    conn: Any = ctx.connection
    if conn is not None:
        conn.mute(throttle_ms / 1000)
    if not client_throttles:
        await asyncio.sleep(throttle_ms / 1000)
