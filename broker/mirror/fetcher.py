"""Mirror fetchers: copy source partitions into local logs, batch for batch, at the source's offsets.

One asyncio task per (fetcher id, source broker, mirror) sends consumer Fetch requests
(replica id -1, READ_COMMITTED) in an incremental fetch session (KIP-227) and appends the
returned batches byte for byte with ``PartitionLog.append_raw``, which keeps the source's offsets,
partition leader epochs and compression. Partitions are hashed to fetcher ids; their source
leader comes from Metadata and is looked up again whenever a fetch says it moved.

Safety of ``remove``: every response is matched to the partition state object and fetch offset
it was requested for, so data that arrives after a partition was removed (or re-added, or
truncated by the caller) is dropped; the only awaits that precede a log change (offset
reconciliation) hold the partition busy, and ``remove`` waits for that.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from protocol.errors import ProtocolError
from protocol.fetch_codec import (
    FETCH,
    FIRST_TOPIC_ID_VERSION,
    FetchPartitionData,
    FetchPartitionRequest,
    encode_fetch_request,
    parse_fetch_response,
)
from protocol.fetch_session import SESSION_ERRORS, FetchSessionBuilder
from protocol.records import BatchView, scan_batches

from ..log.clock import Clock
from ..log.errors import LogError
from ..log.partition_log import PartitionLog
from ..network.client import ReconnectingClient, backoff_ms
from ..network.errors import NetworkError
from ..network.stats import NetworkStats
from ..replication.partition import Partition
from .control_check import control_batch_problem
from .source import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, SourceClient, SourceError

log = logging.getLogger(__name__)

Key = tuple[str, int]  # (topic, partition)

# Kafka error codes the fetcher reacts to.
NONE: Final = 0
OFFSET_OUT_OF_RANGE: Final = 1
UNKNOWN_TOPIC_OR_PARTITION: Final = 3
LEADER_NOT_AVAILABLE: Final = 5
NOT_LEADER_OR_FOLLOWER: Final = 6
REPLICA_NOT_AVAILABLE: Final = 9
KAFKA_STORAGE_ERROR: Final = 56
FETCH_SESSION_ID_NOT_FOUND: Final = 70
INVALID_FETCH_SESSION_EPOCH: Final = 71
FENCED_LEADER_EPOCH: Final = 74
UNKNOWN_LEADER_EPOCH: Final = 75
OFFSET_NOT_AVAILABLE: Final = 78
UNKNOWN_TOPIC_ID: Final = 100
INCONSISTENT_TOPIC_ID: Final = 103
FETCH_SESSION_TOPIC_ID_ERROR: Final = 106

DEFAULT_MAX_WAIT_MS: Final = 500
DEFAULT_MIN_BYTES: Final = 1
DEFAULT_MAX_BYTES: Final = 50 * 1024 * 1024
DEFAULT_PARTITION_MAX_BYTES: Final = 1024 * 1024
RETRY_BACKOFF_MS: Final = 100
RETRY_BACKOFF_MAX_MS: Final = 2000
# --describe: a source offset older than this many fetch waits (or MIN_STALE_AFTER_MS) while
# the partition is fetched is not current any more: its lag is shown as unknown
STALE_AFTER_WAITS: Final = 3
MIN_STALE_AFTER_MS: Final = 3000
RATE_WINDOW_S: Final = 1.0
THROTTLE_BURST_S: Final = 0.2  # tokens a throttled fetcher may save up, in seconds of rate


@dataclass(frozen=True, slots=True)
class FetchStatus:
    source_high_watermark: int  # -1 until the first answer
    source_last_stable_offset: int
    source_log_start_offset: int
    local_log_end_offset: int
    lag: int  # records: source HW - local LEO, never negative
    last_fetch_ms: int  # wall clock of the last answer for this partition, -1 never
    bytes_per_sec: float
    source_leader_id: int  # -1 while looking for the leader
    error: str | None  # the last problem, None when fetching fine
    failed: bool  # handed to on_failed; not fetched any more


class SourceFreshness(NamedTuple):
    """How current a partition's source high watermark is, for --describe."""

    source_high_watermark: int  # -1 never learnt
    learnt_ms: int  # wall clock when the source last confirmed it, -1 never
    error: str | None  # the last fetch problem since the last good answer, None if none
    fetching: bool  # False: no longer fetched (paused, ...): the last known values, frozen
    stale_after_ms: int  # older than this while fetching: the source offset is not current


@dataclass(slots=True)
class FetcherCounters:
    """Running totals of one fetcher (mirror, source broker, fetcher id) for the metrics exporter.
    The fetch loop only adds to them; they outlive fetcher restarts, so they never go back."""

    requests: int = 0  # Fetch responses received
    errors: int = 0  # failed Fetch round trips (connection lost, error code, bad response)
    response_bytes: int = 0  # Fetch response bodies received
    appended_bytes: int = 0  # record bytes appended to local logs
    throttled_bytes: int = 0  # of those, bytes of throttled partitions
    throttled_seconds: float = 0.0  # time spent waiting with every partition over the throttle
    # time spent waiting out the source's throttle_time_ms (its client quota on this fetcher)
    source_throttled_seconds: float = 0.0
    network: NetworkStats = field(default_factory=NetworkStats)  # its source connections


class _Rate:
    """Bytes per second over the current and the previous one-second window."""

    __slots__ = ("_cur", "_prev", "_start")

    def __init__(self) -> None:
        self._start = time.monotonic()
        self._cur = 0
        self._prev = 0

    def _roll(self, now: float) -> None:
        elapsed = now - self._start
        if elapsed >= RATE_WINDOW_S:
            self._prev = self._cur if elapsed < 2 * RATE_WINDOW_S else 0
            self._cur = 0
            self._start = now - (elapsed % RATE_WINDOW_S)

    def record(self, nbytes: int) -> None:
        self._roll(time.monotonic())
        self._cur += nbytes

    def rate(self) -> float:
        now = time.monotonic()
        self._roll(now)
        return (self._prev + self._cur) / (RATE_WINDOW_S + (now - self._start))


class TokenBucket:
    """The destination's mirror replication throttle, shared by every fetcher.

    Fetchers wait while the bucket is in debt and pay for each response after the fact (as Kafka
    quotas do); requests are also capped so one response cannot overshoot by much.
    """

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self.rate: float | None = None
        self._tokens = 0.0
        self._last = monotonic()

    def _refill(self) -> None:
        now = self._monotonic()
        if self.rate is not None:
            burst = self.rate * THROTTLE_BURST_S
            self._tokens = min(burst, self._tokens + (now - self._last) * self.rate)
        self._last = now

    def set_rate(self, rate: float | None) -> None:
        self._refill()
        self.rate = rate if rate is not None and rate > 0 else None
        if self.rate is None:
            self._tokens = 0.0

    def delay(self) -> float:
        """Seconds to wait before the next fetch."""
        self._refill()
        if self.rate is None or self._tokens >= 0:
            return 0.0
        return -self._tokens / self.rate

    def consume(self, nbytes: int) -> None:
        if self.rate is not None:
            self._refill()
            self._tokens -= nbytes

    def request_cap(self) -> int | None:
        return None if self.rate is None else max(1, int(self.rate * THROTTLE_BURST_S))


class _Partition:
    """One mirrored partition; a new object each time the partition is added."""

    def __init__(self, mirror: str, topic: str, partition: int, topic_id: uuid.UUID | None) -> None:
        self.mirror = mirror
        self.topic = topic
        self.partition = partition
        self.topic_id = topic_id
        self.leader_id = -1
        self.leader_epoch = -1
        self.fetcher: _Fetcher | None = None
        self.removed = False
        self.failed = False
        self.error: str | None = None
        self.src_hw = -1
        self.src_lso = -1
        self.src_log_start = -1
        self.last_fetch_ms = -1
        self.hw_ms = -1  # wall clock when src_hw was last confirmed by the source
        self.rate = _Rate()
        self.throttled = False  # listed in mirror.replication.throttled.replicas for this broker
        self.retry_at = 0.0
        self.failures = 0
        self.idle = asyncio.Event()
        self.idle.set()

    @property
    def key(self) -> Key:
        return (self.topic, self.partition)

    def __repr__(self) -> str:
        return f"{self.mirror}:{self.topic}-{self.partition}"


@dataclass(slots=True)
class _Sent:
    """What a Fetch asked the source for one partition (its answer is matched to this)."""

    state: _Partition
    fetch_offset: int
    leader_epoch: int
    last_fetched_epoch: int
    max_bytes: int


class _Mirror:
    def __init__(self, name: str, config: Mapping[str, str], source: SourceClient) -> None:
        self.name = name
        self.config = dict(config)
        self.source = source
        self.partitions: dict[Key, _Partition] = {}
        self.fetchers: dict[tuple[int, int], _Fetcher] = {}  # (fetcher id, node) -> fetcher
        self.refresh = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.max_wait_ms = int(config.get("fetch.max.wait.ms", DEFAULT_MAX_WAIT_MS))
        self.min_bytes = int(config.get("fetch.min.bytes", DEFAULT_MIN_BYTES))
        self.max_bytes = int(config.get("fetch.max.bytes", DEFAULT_MAX_BYTES))
        self.partition_max_bytes = int(
            config.get("max.partition.fetch.bytes", DEFAULT_PARTITION_MAX_BYTES)
        )


class MirrorFetcherManager:
    def __init__(
        self,
        node_id: int,
        get_partition: Callable[[str, int], Partition | None],
        clock: Clock,
        *,
        on_failed: Callable[[str, str, int, str], None],
        on_appended: Callable[[str, int], None] | None = None,
        num_fetchers: int = 1,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if num_fetchers < 1:
            raise ValueError("num_fetchers must be at least 1")
        self.node_id = node_id
        self.get_partition = get_partition
        self.clock = clock
        self.on_failed = on_failed
        self.on_appended = on_appended
        self.num_fetchers = num_fetchers
        self.throttle = TokenBucket(monotonic)
        self._throttled: Callable[[str, int], bool] = lambda _topic, _partition: False
        self._monotonic = monotonic
        self._mirrors: dict[str, _Mirror] = {}
        self._rng = random.Random()
        self._closed = False
        self._counters: dict[tuple[str, int, int], FetcherCounters] = {}
        # (mirror, topic, partition) -> how current its source high watermark was when it
        # stopped being fetched (paused, failed over): --describe keeps showing it, aged
        self._last_known: dict[tuple[str, str, int], SourceFreshness] = {}

    # -- public API ----------------------------------------------------------------------
    async def add(
        self,
        mirror: str,
        source_config: Mapping[str, str],
        partitions: Mapping[Key, uuid.UUID | None],
    ) -> None:
        """Start fetching ``partitions`` (topic id = the source's) from their local log end."""
        if self._closed:
            raise RuntimeError("the mirror fetcher manager is closed")
        for topic, partition in partitions:
            self._last_known.pop((mirror, topic, partition), None)
        m = self._mirrors.get(mirror)
        if m is not None and m.config != dict(source_config):
            # Any change of the mirror's client configs reconnects (KIP-1279).
            keep = {k: p.topic_id for k, p in m.partitions.items() if not p.removed}
            await self.remove_mirror(mirror)
            keep.update(partitions)
            partitions = keep
            m = None
        if m is None:
            source = SourceClient(source_config, f"broker-{self.node_id}-mirror-{mirror}")
            m = _Mirror(mirror, source_config, source)
            self._mirrors[mirror] = m
            m.task = asyncio.create_task(self._refresh_loop(m), name=f"mirror-{mirror}-metadata")
        for key, topic_id in partitions.items():
            old = m.partitions.get(key)
            if old is not None and not old.failed and not old.removed:
                if topic_id is not None:
                    old.topic_id = topic_id
                continue
            if old is not None:
                await self._detach(old)
            p = m.partitions[key] = _Partition(mirror, key[0], key[1], topic_id)
            p.throttled = self._throttled(*key)
        m.refresh.set()

    async def remove(self, mirror: str, partitions: Iterable[Key]) -> None:
        """Stop fetching; on return nothing for these partitions is in flight or appending."""
        m = self._mirrors.get(mirror)
        if m is None:
            return
        states = [p for p in (m.partitions.pop(k, None) for k in partitions) if p is not None]
        for p in states:
            if p.src_hw >= 0:
                self._last_known[(mirror, p.topic, p.partition)] = SourceFreshness(
                    p.src_hw, p.hw_ms, p.error, False, 0
                )
            await self._detach(p)

    def last_known(self, mirror: str, topic: str, partition: int) -> tuple[int, int] | None:
        """(source high watermark, wall ms it was learnt) of a partition no longer fetched."""
        known = self._last_known.get((mirror, topic, partition))
        return None if known is None else (known.source_high_watermark, known.learnt_ms)

    def freshness(self, mirror: str, topic: str, partition: int) -> SourceFreshness | None:
        """How current the source offset --describe shows is: of the partition being fetched,
        else the last known one; None when there is neither."""
        m = self._mirrors.get(mirror)
        p = m.partitions.get((topic, partition)) if m is not None else None
        if m is None or p is None or p.removed:
            return self._last_known.get((mirror, topic, partition))
        stale_after = max(STALE_AFTER_WAITS * m.max_wait_ms, MIN_STALE_AFTER_MS)
        return SourceFreshness(p.src_hw, p.hw_ms, p.error, not p.failed, stale_after)

    async def remove_mirror(self, mirror: str) -> None:
        m = self._mirrors.pop(mirror, None)
        if m is None:
            return
        states = list(m.partitions.values())
        m.partitions.clear()
        for p in states:
            await self._detach(p)
        if m.task is not None:
            m.task.cancel()
        tasks = [f.task for f in m.fetchers.values() if f.task is not None]
        for f in m.fetchers.values():
            f.stop()
        for t in [*tasks, *([m.task] if m.task is not None else [])]:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        m.fetchers.clear()
        await m.source.close()

    def mirrors(self) -> list[str]:
        return list(self._mirrors)

    def partitions(self, mirror: str) -> list[Key]:
        m = self._mirrors.get(mirror)
        return list(m.partitions) if m is not None else []

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        part = self.get_partition(topic, partition)
        return None if part is None else part.log

    def _changed(self, p: _Partition) -> None:
        """The local log was cut in place: its owner recomputes the high watermark."""
        part = self.get_partition(p.topic, p.partition)
        if part is not None:
            part.after_local_change()

    def status(self, mirror: str, topic: str, partition: int) -> FetchStatus | None:
        m = self._mirrors.get(mirror)
        p = m.partitions.get((topic, partition)) if m is not None else None
        if p is None:
            return None
        plog = self.get_log(topic, partition)
        leo = plog.log_end_offset if plog is not None else -1
        lag = max(0, p.src_hw - leo) if p.src_hw >= 0 and leo >= 0 else 0
        return FetchStatus(
            p.src_hw,
            p.src_lso,
            p.src_log_start,
            leo,
            lag,
            p.last_fetch_ms,
            p.rate.rate(),
            p.leader_id if p.fetcher is not None else -1,
            p.error,
            p.failed,
        )

    def fetcher_stats(self) -> list[tuple[str, int, int, bool | None, FetcherCounters]]:
        """(mirror, source broker, fetcher id, task alive or None when no such fetcher runs now,
        a copy of its counters), for every fetcher that ever ran."""
        out: list[tuple[str, int, int, bool | None, FetcherCounters]] = []
        for (mirror, node, fid), c in list(self._counters.items()):
            m = self._mirrors.get(mirror)
            f = m.fetchers.get((fid, node)) if m is not None else None
            alive = None if f is None else f.task is not None and not f.task.done()
            out.append((mirror, node, fid, alive, dataclasses.replace(c, network=c.network.copy())))
        return out

    def set_throttle(self, rate_bytes_per_s: int | None) -> None:
        """``mirror.replication.throttled.rate`` (None or <= 0: unthrottled); applies at once to
        the partitions ``set_throttled_replicas`` selects."""
        self.throttle.set_rate(float(rate_bytes_per_s) if rate_bytes_per_s else None)

    def set_throttled_replicas(self, throttled: Callable[[str, int], bool]) -> None:
        """Which partitions the rate applies to (``mirror.replication.throttled.replicas`` lists
        them for this broker; unlisted partitions are never held back, as in Kafka). Re-read for
        every partition now and for each one added later."""
        self._throttled = throttled
        for m in self._mirrors.values():
            for p in m.partitions.values():
                now = throttled(p.topic, p.partition)
                if now != p.throttled:
                    log.info("mirror %s: %s %s", m.name, p, "throttled" if now else "unthrottled")
                p.throttled = now

    async def close(self) -> None:
        self._closed = True
        for name in list(self._mirrors):
            await self.remove_mirror(name)

    # -- assignment ----------------------------------------------------------------------
    def fetcher_id(self, topic: str, partition: int) -> int:
        return (zlib.crc32(topic.encode()) * 31 + partition) % self.num_fetchers

    async def _detach(self, p: _Partition) -> None:
        p.removed = True
        if p.fetcher is not None:
            p.fetcher.drop(p)
        await p.idle.wait()

    def _park(self, p: _Partition, error: str | None, *, backoff: bool = True) -> None:
        """Take a partition off its fetcher until Metadata names its (new) leader."""
        if p.fetcher is not None:
            p.fetcher.drop(p)
        p.error = error
        if backoff:
            p.failures += 1
            p.retry_at = self._monotonic() + (
                backoff_ms(p.failures, RETRY_BACKOFF_MS, RETRY_BACKOFF_MAX_MS, self._rng) / 1000
            )
        m = self._mirrors.get(p.mirror)
        if m is not None:
            m.refresh.set()

    def _fail(self, p: _Partition, reason: str) -> None:
        if p.fetcher is not None:
            p.fetcher.drop(p)
        p.failed = True
        p.error = reason
        log.error("mirror %s: partition %s-%d FAILED: %s", p.mirror, p.topic, p.partition, reason)
        try:
            self.on_failed(p.mirror, p.topic, p.partition, reason)
        except Exception:
            log.exception("on_failed callback raised")

    async def _refresh_loop(self, m: _Mirror) -> None:
        """Find the source leader of every unassigned partition, then hand it to its fetcher."""
        while True:
            now = self._monotonic()
            waiting = [
                p
                for p in m.partitions.values()
                if p.fetcher is None and not p.failed and not p.removed
            ]
            due = [p for p in waiting if p.retry_at <= now]
            if not due:
                timeout = min((p.retry_at for p in waiting), default=now + 3600) - now
                m.refresh.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(m.refresh.wait(), max(timeout, 0.001))
                continue
            try:
                topics = await m.source.topics(sorted({p.topic for p in due}))
            except (SourceError, NetworkError) as e:
                for p in due:
                    self._park(p, f"metadata: {e}")
                continue
            except Exception as e:
                log.exception("mirror %s: metadata refresh failed", m.name)
                for p in due:
                    self._park(p, f"metadata: {e!r}")
                continue
            for p in due:
                if p.removed or p.fetcher is not None:
                    continue
                t = topics.get(p.topic)
                if t is None:
                    self._park(p, "topic not found at the source")
                    continue
                if p.topic_id is not None and t.topic_id is not None and p.topic_id != t.topic_id:
                    self._park(p, f"source topic id is {t.topic_id}, expected {p.topic_id}")
                    continue
                if t.topic_id is None and p.topic_id is not None:
                    # The source assigns no topic ids (older than Kafka 2.8, or a server that
                    # reports none): our id means nothing there, so fetch this one by name.
                    log.info(
                        "mirror %s: the source reports no topic id for %s; fetching it by name",
                        m.name,
                        p,
                    )
                    p.topic_id = None
                if p.topic_id is None:
                    p.topic_id = t.topic_id
                sp = t.partitions.get(p.partition)
                if sp is None or sp.leader_id < 0:
                    self._park(p, "no leader at the source")
                    continue
                p.leader_id, p.leader_epoch = sp.leader_id, sp.leader_epoch
                fid = self.fetcher_id(p.topic, p.partition)
                f = m.fetchers.get((fid, sp.leader_id))
                if f is None:
                    f = _Fetcher(self, m, fid, sp.leader_id)
                    m.fetchers[(fid, sp.leader_id)] = f
                f.assign(p)

    def writer_room(self, parts: Iterable[_Partition]) -> asyncio.Future[None] | None:
        """Back-pressure from the node's log writer (``LogWriter.room``): None to go on."""
        for p in parts:
            part = self.get_partition(p.topic, p.partition)
            if part is not None:
                room = part.log.writer_room()
                if room is not None:
                    return room
        return None

    # -- applying fetched data (synchronous: no other task runs in between) --------------
    def _apply(
        self, p: _Partition, sent: _Sent, data: FetchPartitionData, fetcher: _Fetcher
    ) -> int:
        """Handle one partition of a Fetch response; returns the record bytes appended."""
        if data.high_watermark >= 0:
            p.src_hw = data.high_watermark
            p.hw_ms = self.clock.now_ms()
        if data.last_stable_offset >= 0:
            p.src_lso = data.last_stable_offset
        if data.log_start_offset >= 0:
            p.src_log_start = data.log_start_offset
        p.last_fetch_ms = self.clock.now_ms()
        code = data.error_code
        if code == OFFSET_OUT_OF_RANGE:
            fetcher.reconcile.add(p)
            return 0
        if code != NONE:
            self._park(p, f"source error {code} fetching {p.topic}-{p.partition}")
            return 0
        part = self.get_partition(p.topic, p.partition)
        if part is None:
            self._fail(p, "no local log")
            return 0
        plog = part.log
        if plog.log_end_offset != sent.fetch_offset:
            return 0  # the log moved under the request (truncated by the caller): refetch
        if data.diverging_epoch >= 0:
            fetcher.diverged[p] = (data.diverging_epoch, data.diverging_end_offset)
            fetcher.reconcile.add(p)
            return 0
        appended = 0
        refused: str | None = None
        if len(data.records):
            try:
                appended, refused = self._append(p, part, data.records)
            except (LogError, ProtocolError, OSError, ValueError) as e:
                if getattr(e, "error_code", None) == NOT_LEADER_OR_FOLLOWER:
                    # leadership moved here before the manager stopped this fetcher: not a
                    # failure of the partition; the data is fetched again by the new leader
                    self._park(p, f"{p.topic}-{p.partition} is led by another node now")
                    return 0
                self._fail(p, f"append failed: {e}")
                return 0
        if appended:
            p.rate.record(appended)
        if refused is not None:
            # What preceded the refused batch is stored; the partition stops there.
            if appended and self.on_appended is not None:
                self.on_appended(p.topic, p.partition)
            self._fail(p, refused)
            return appended
        self._follow_log_start(plog, data.log_start_offset)
        p.error = None
        p.failures = 0
        if appended and self.on_appended is not None:
            self.on_appended(p.topic, p.partition)
        return appended

    def _append(
        self, p: _Partition, part: Partition, records: memoryview
    ) -> tuple[int, str | None]:
        """Append the whole batches at or past the local log end: (bytes appended, why the
        batch after them was refused, or None). Only a control batch the mirror cannot read
        is refused; the batches before it are appended."""
        plog = part.log
        leo = plog.log_end_offset
        start = end = -1
        first: BatchView | None = None
        refused: str | None = None
        # Headers only (append_raw checks each CRC): find the whole batches at or past the LEO.
        # Control batches are decoded too (one tiny record each): see control_check.
        for view in scan_batches(records, verify_crc=False, allow_partial_tail=True):
            if view.last_offset < leo:
                continue
            if view.is_control:
                refused = control_batch_problem(view)
                if refused is not None:
                    break
            if start < 0:
                start, first = view.position, view
            end = view.position + view.size
        if first is None:
            return 0, refused
        if first.base_offset < leo:
            # The source's batch straddles our log end: its log start (DeleteRecords) or a
            # truncation point fell inside the batch. Restart our log at the batch, as a
            # Kafka follower does, then move the log start back up below.
            if leo == plog.log_start_offset or first.base_offset < plog.log_start_offset:
                plog.truncate_fully_and_start_at(first.base_offset)
            else:
                plog.truncate_to(first.base_offset)
            part.after_local_change()
        limit = max(plog.config.segment_bytes, 1)
        total = 0
        chunk_start = start
        pos = start
        # Split at batch boundaries so one append never exceeds segment.bytes.
        while pos < end:
            view = BatchView(records, pos)
            if pos + view.size - chunk_start > limit and pos > chunk_start:
                part.append_raw(records[chunk_start:pos])
                total += pos - chunk_start
                chunk_start = pos
            pos += view.size
        part.append_raw(records[chunk_start:end])
        total += end - chunk_start
        return total, refused

    @staticmethod
    def _follow_log_start(plog: PartitionLog, source_log_start: int) -> None:
        """Mirror the source's retention / DeleteRecords as far as our copy reaches."""
        if plog.log_start_offset < source_log_start <= plog.high_watermark:
            plog.delete_records_before(source_log_start)

    async def _reconcile(self, p: _Partition, diverged: tuple[int, int] | None) -> None:
        """OFFSET_OUT_OF_RANGE or a diverging epoch: realign the local log with the source."""
        m = self._mirrors.get(p.mirror)
        if m is None or p.removed:
            return
        p.idle.clear()
        try:
            if diverged is not None:
                target: int | None = await self._divergence_target(m, p, *diverged)
                plog = self._live_log(p)
                if plog is not None and target is not None:
                    self._truncate(p, plog, target)
                return
            start, _ = await m.source.list_offsets(p.topic, p.partition, EARLIEST_TIMESTAMP)
            end, _ = await m.source.list_offsets(p.topic, p.partition, LATEST_TIMESTAMP)
            plog = self._live_log(p)
            if plog is None:
                return
            leo = plog.log_end_offset
            if leo < start:
                log.info(
                    "mirror %s: %s-%d: local end %d is below the source's log start %d; "
                    "restarting the local log there",
                    p.mirror,
                    p.topic,
                    p.partition,
                    leo,
                    start,
                )
                plog.truncate_fully_and_start_at(start)
                self._changed(p)
                return
            if leo > end:
                epoch = plog.latest_epoch
                target = end
                if epoch is not None:
                    target = await self._divergence_target(m, p, epoch, -1, fallback=end)
                plog = self._live_log(p)
                if plog is not None and target is not None:
                    self._truncate(p, plog, target)
                return
            p.error = f"offset {leo} out of range at the source [{start}, {end}]; retrying"
            p.failures += 1
            await asyncio.sleep(
                backoff_ms(p.failures, RETRY_BACKOFF_MS, RETRY_BACKOFF_MAX_MS, self._rng) / 1000
            )
        except (SourceError, NetworkError) as e:
            p.error = f"offset reconciliation: {e}"
            self._park(p, p.error)
        finally:
            p.idle.set()

    def _live_log(self, p: _Partition) -> PartitionLog | None:
        if p.removed or p.failed:
            return None
        return self.get_log(p.topic, p.partition)

    async def _divergence_target(
        self, m: _Mirror, p: _Partition, epoch: int, end_offset: int, *, fallback: int = -1
    ) -> int | None:
        """Where our log stops agreeing with the source, from the source's end of ``epoch``."""
        if end_offset < 0:
            try:
                epoch, end_offset = await m.source.offset_for_leader_epoch(
                    p.topic, p.partition, epoch
                )
            except NetworkError as e:  # the source lacks OffsetForLeaderEpoch
                log.warning("mirror %s: %s: %s; truncating to the source end", m.name, p, e)
                epoch = -1
        plog = self._live_log(p)
        if plog is None:
            return None
        leo = plog.log_end_offset
        if epoch < 0 or end_offset < 0:
            return min(fallback, leo) if fallback >= 0 else None
        ours_epoch, ours_end = plog.end_offset_for_epoch(epoch)
        if ours_epoch < 0:
            return min(end_offset, leo)
        return min(end_offset, ours_end, leo)

    def _truncate(self, p: _Partition, plog: PartitionLog, target: int) -> None:
        log.info(
            "mirror %s: %s-%d diverged from the source; truncating %d -> %d",
            p.mirror,
            p.topic,
            p.partition,
            plog.log_end_offset,
            target,
        )
        if target < plog.log_start_offset:
            plog.truncate_fully_and_start_at(target)
        else:
            plog.truncate_to(target)
        self._changed(p)


class _Fetcher:
    """One task fetching a mirror's partitions led by one source broker."""

    def __init__(self, mgr: MirrorFetcherManager, m: _Mirror, fetcher_id: int, node: int) -> None:
        self.mgr = mgr
        self.mirror = m
        self.fetcher_id = fetcher_id
        self.node = node
        self.client_id = f"broker-{mgr.node_id}-fetcher-{fetcher_id}-mirror-{m.name}"
        self.parts: dict[Key, _Partition] = {}
        self.wake = asyncio.Event()
        self.session = FetchSessionBuilder()
        self.session_by_id: bool | None = None
        # per partition: (its state, the fields its entry was built from, _Sent, entry)
        self._entries: dict[
            Key, tuple[_Partition, tuple[int, int, int, int], _Sent, FetchPartitionRequest]
        ] = {}
        self.reconcile: set[_Partition] = set()
        self.diverged: dict[_Partition, tuple[int, int]] = {}
        self.failures = 0
        # time.monotonic() until which the source broker asked this fetcher to wait
        # (a Fetch response's throttle_time_ms, KIP-219: the client holds back, not the broker)
        self.source_throttle_until = 0.0
        self.counters = mgr._counters.setdefault((m.name, node, fetcher_id), FetcherCounters())
        self.task: asyncio.Task[None] | None = asyncio.create_task(
            self._run(), name=self.client_id + f"-node-{node}"
        )

    def assign(self, p: _Partition) -> None:
        p.fetcher = self
        self.parts[p.key] = p
        self.wake.set()

    def drop(self, p: _Partition) -> None:
        if self.parts.get(p.key) is p:
            del self.parts[p.key]
        if p.fetcher is self:
            p.fetcher = None
        self.reconcile.discard(p)
        self.diverged.pop(p, None)

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()

    def _reset_session(self) -> None:
        self.session.reset()

    async def _run(self) -> None:
        while True:
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: fetch loop error", self.client_id)
                self._reset_session()
                await asyncio.sleep(1.0)

    async def _backoff(self, error: str) -> None:
        self.failures += 1
        self.counters.errors += 1
        for p in list(self.parts.values()):
            p.error = error
        await asyncio.sleep(
            backoff_ms(self.failures, RETRY_BACKOFF_MS, RETRY_BACKOFF_MAX_MS, self.mgr._rng) / 1000
        )

    async def _step(self) -> None:
        if not self.parts:
            self._reset_session()
            self.wake.clear()
            await self.wake.wait()
            return
        room = self.mgr.writer_room(self.parts.values())
        if room is not None:  # the node's log writer is behind: fetch once it caught up
            await room
            return  # and look again (``room`` wakes every waiter at once)
        wait = self.source_throttle_until - time.monotonic()
        if wait > 0:  # the source throttled us: no Fetch to it until the time is up
            await asyncio.sleep(wait)
            self.counters.source_throttled_seconds += wait
            return
        # Over the rate: throttled partitions sit out (Kafka's follower quota does the same);
        # the others are fetched as usual.
        delay = self.mgr.throttle.delay()
        if delay > 0 and all(p.throttled for p in self.parts.values()):
            await asyncio.sleep(min(delay, 1.0))
            self.counters.throttled_seconds += min(delay, 1.0)
            return
        m = self.mirror
        try:
            client: ReconnectingClient = m.source.connection_for(
                self.node, self.client_id, self.counters.network
            )
            conn = await client.connection()
            version = conn.version_for(FETCH)
        except (NetworkError, SourceError) as e:
            await self._lost(f"source broker {self.node}: {e}")
            return
        if version >= FIRST_TOPIC_ID_VERSION and any(
            p.topic_id is None for p in self.parts.values()
        ):
            version = FIRST_TOPIC_ID_VERSION - 1  # some topic has no id: fetch by name
        by_id = version >= FIRST_TOPIC_ID_VERSION
        sessions = version >= 7
        if (self.session_by_id is not None and by_id != self.session_by_id) or (
            sessions != self.session.enabled
        ):
            self._reset_session()
        self.session_by_id = by_id
        self.session.enabled = sessions
        body, sent, id_map = self._build(version, by_id, delay)
        try:
            raw = await conn.send_raw(FETCH, version, body)
            self.counters.requests += 1
            self.counters.response_bytes += len(raw)
            resp = parse_fetch_response(raw, version)
        except NetworkError as e:
            await self._lost(f"fetch from source broker {self.node}: {e}")
            return
        except ProtocolError as e:
            self._reset_session()
            await self._backoff(f"bad Fetch response from source broker {self.node}: {e}")
            return
        if resp.throttle_time_ms > 0:
            self.source_throttle_until = time.monotonic() + resp.throttle_time_ms / 1000
        self.session.on_response(resp.error_code, resp.session_id)
        if resp.error_code in SESSION_ERRORS:
            return
        if resp.error_code != NONE:
            await self._backoff(f"source broker {self.node}: Fetch error {resp.error_code}")
            return
        self.failures = 0
        throttled_bytes = appended_bytes = 0
        for tkey, data in resp.partitions:
            name = id_map.get(tkey) if isinstance(tkey, uuid.UUID) else tkey
            if name is None:
                continue
            s = sent.get((name, data.partition))
            if s is None:
                continue
            p = s.state
            if p.removed or p.failed or self.parts.get(p.key) is not p:
                continue
            appended = self.mgr._apply(p, s, data, self)
            appended_bytes += appended
            if p.throttled:
                throttled_bytes += appended
        self.mgr.throttle.consume(throttled_bytes)
        self._confirm(sent)
        self.counters.appended_bytes += appended_bytes
        self.counters.throttled_bytes += throttled_bytes
        if self.reconcile:
            todo = list(self.reconcile)
            self.reconcile.clear()
            for p in todo:
                diverged = self.diverged.pop(p, None)
                if self.parts.get(p.key) is p:
                    await self.mgr._reconcile(p, diverged)

    def _confirm(self, sent: Mapping[Key, _Sent]) -> None:
        """A good answer confirms the source offset of every partition it was asked about: an
        incremental session leaves the unchanged ones out (status bookkeeping for --describe)."""
        now = self.mgr.clock.now_ms()
        for s in sent.values():
            p = s.state
            if p.src_hw >= 0 and p.error is None and not p.removed and not p.failed:
                p.hw_ms = now

    async def _lost(self, error: str) -> None:
        """The source broker is unreachable: find the partitions' leaders again."""
        self._reset_session()
        self.failures += 1
        self.counters.errors += 1
        log.info("mirror %s: %s", self.mirror.name, error)
        for p in list(self.parts.values()):
            self.mgr._park(p, error)
        self.parts.clear()

    def _build(
        self, version: int, by_id: bool, throttle_delay: float = 0.0
    ) -> tuple[bytes, dict[Key, _Sent], dict[uuid.UUID, str]]:
        """The Fetch request. Throttled partitions ask for at most the throttle's burst, and are
        left out (forgotten by the session) while ``throttle_delay`` > 0; the wait for data is
        then cut to that delay so they are back in time."""
        m = self.mirror
        cap = self.mgr.throttle.request_cap()
        held = throttle_delay > 0
        max_wait_ms = m.max_wait_ms if not held else min(m.max_wait_ms, int(throttle_delay * 1000))
        only_throttled = all(p.throttled for p in self.parts.values())
        max_bytes = m.max_bytes if cap is None or not only_throttled else min(m.max_bytes, cap)
        sent: dict[Key, _Sent] = {}
        wanted: list[FetchPartitionRequest] = []
        id_map: dict[uuid.UUID, str] = {}
        # Each partition's entry is reused while its fields stay the same: a fetcher of
        # thousands of idle partitions rebuilt all of them twice a second.
        cache = self._entries
        for key, p in self.parts.items():
            if p.throttled and held:
                continue
            part_max = m.partition_max_bytes
            if p.throttled and cap is not None:
                part_max = min(part_max, cap)
            plog = self.mgr.get_log(p.topic, p.partition)
            if plog is None:
                continue
            if p.topic_id is not None:
                id_map[p.topic_id] = p.topic
            epoch = plog.latest_epoch
            last_epoch = -1 if epoch is None else epoch
            leo = plog.log_end_offset
            hit = cache.get(key)
            if (
                hit is not None
                and hit[0] is p
                and hit[1] == (leo, p.leader_epoch, last_epoch, part_max)
            ):
                s, fpr = hit[2], hit[3]  # unchanged: the session builder sees the same entry
            else:
                s = _Sent(p, leo, p.leader_epoch, last_epoch, part_max)
                fpr = FetchPartitionRequest(
                    p.topic,
                    p.topic_id,
                    p.partition,
                    leo,
                    s.leader_epoch,
                    last_epoch,
                    -1,
                    part_max,
                )
                cache[key] = (p, (leo, p.leader_epoch, last_epoch, part_max), s, fpr)
            sent[key] = s
            wanted.append(fpr)
        if len(cache) > len(sent):  # partitions gone or left out: their entries go
            for key in [k for k in cache if k not in sent]:
                del cache[key]
        fetch = self.session.build(wanted)
        body = encode_fetch_request(
            version,
            max_wait_ms=max_wait_ms,
            min_bytes=m.min_bytes,
            max_bytes=max_bytes,
            session_id=fetch.session_id,
            session_epoch=fetch.session_epoch,
            partitions=fetch.partitions,
            forgotten=fetch.forgotten,
            by_topic_id=by_id,
        )
        return body, sent, id_map
