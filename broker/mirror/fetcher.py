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

The fetchers are in parts, one job each, each an object given what it needs:
`fetch_state` (per-partition and per-mirror bookkeeping, error codes, defaults),
`fetch_throttle` (byte rates, the replication throttle), `fetch_logs` (the local partitions),
`fetch_interfaces` (what the parts need of each other), `source_fetcher` (one fetch loop per
source broker), `fetch_assignment` (parking, and partitions to fetchers by source leader),
`fetch_append` (a response's batches into the local log) and `fetch_reconcile` (realigning a log
that diverged from the source). `MirrorFetcherManager`, here, builds them, keeps the registry of
mirrors and is what the rest of the node calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import random
import time
import uuid
from collections.abc import Callable, Iterable, Mapping

from ..log.clock import Clock
from ..log.partition_log import PartitionLog
from ..metadata import mirror_names
from ..replication.partition import Partition
from .fetch_append import BatchAppender
from .fetch_assignment import FetchParking, LeaderAssignment
from .fetch_interfaces import FetcherServices
from .fetch_logs import LocalLogs
from .fetch_reconcile import OffsetReconciler
from .fetch_state import (
    MIN_STALE_AFTER_MS,
    STALE_AFTER_WAITS,
    FetcherCounters,
    FetcherHandle,
    FetchMirror,
    FetchPartition,
    FetchStatus,
    Key,
    SourceFreshness,
    copyable_lag,
)
from .fetch_throttle import TokenBucket
from .source import SourceClient
from .source_fetcher import SourceFetcher

__all__ = ["MirrorFetcherManager"]

log = logging.getLogger(__name__)


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
        cluster_id: str = "",
    ) -> None:
        if num_fetchers < 1:
            raise ValueError("num_fetchers must be at least 1")
        self.node_id = node_id
        self.throttle = TokenBucket(monotonic)
        self._throttled: Callable[[str, int], bool] = lambda _topic, _partition: False
        self._mirrors: dict[str, FetchMirror] = {}
        self._closed = False
        self._counters: dict[tuple[str, int, int], FetcherCounters] = {}
        # (mirror, topic, partition) -> how current its source high watermark was when it
        # stopped being fetched (paused, failed over): --describe keeps showing it, aged
        self._last_known: dict[tuple[str, str, int], SourceFreshness] = {}
        rng = random.Random()
        self._logs = LocalLogs(get_partition)
        self._parking = FetchParking(self._mirrors, on_failed, monotonic, rng)
        self._services = FetcherServices(
            node_id,
            cluster_id,
            self._logs,
            self._parking,
            BatchAppender(get_partition, clock.now_ms, self._parking, on_appended),
            OffsetReconciler(self._mirrors, get_partition, self._parking, rng),
            self.throttle,
            clock.now_ms,
            rng,
        )
        self._assignment = LeaderAssignment(
            self._parking, self._new_fetcher, monotonic, num_fetchers
        )

    def _new_fetcher(self, m: FetchMirror, fetcher_id: int, node: int) -> FetcherHandle:
        counters = self._counters.setdefault((m.name, node, fetcher_id), FetcherCounters())
        return SourceFetcher(self._services, m, fetcher_id, node, counters)

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get_log(topic, partition)

    def fetcher_id(self, topic: str, partition: int) -> int:
        return self._assignment.fetcher_id(topic, partition)

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
            m = FetchMirror(mirror, source_config, source)
            self._mirrors[mirror] = m
            m.task = asyncio.create_task(self._assignment.run(m), name=f"mirror-{mirror}-metadata")
        for key, topic_id in partitions.items():
            old = m.partitions.get(key)
            if old is not None and not old.failed and not old.removed:
                if topic_id is not None:
                    old.topic_id = topic_id
                continue
            if old is not None:
                await self._parking.detach(old)
            source_topic = mirror_names.naming(m.config).source_topic(key[0])
            p = m.partitions[key] = FetchPartition(mirror, key[0], key[1], topic_id, source_topic)
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
                    p.src_hw, p.hw_ms, p.error, False, 0, p.src_lso
                )
            await self._parking.detach(p)

    def last_known(self, mirror: str, topic: str, partition: int) -> tuple[int, int, int] | None:
        """(source high watermark, wall ms it was learnt, source last stable offset) of a
        partition no longer fetched."""
        known = self._last_known.get((mirror, topic, partition))
        if known is None:
            return None
        return known.source_high_watermark, known.learnt_ms, known.source_last_stable_offset

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
            await self._parking.detach(p)
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

    def status(self, mirror: str, topic: str, partition: int) -> FetchStatus | None:
        m = self._mirrors.get(mirror)
        p = m.partitions.get((topic, partition)) if m is not None else None
        if p is None:
            return None
        plog = self.get_log(topic, partition)
        leo = plog.log_end_offset if plog is not None else -1
        lag, held = copyable_lag(p.src_hw, p.src_lso, leo)
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
            held,
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
