"""Which fetcher fetches a partition: partitions hash to fetcher ids, and a per-mirror task finds
the source leader of every partition no fetcher has (Metadata) and hands it to the fetcher of
(fetcher id, leader). A partition whose leader moved or whose fetch failed is parked (taken off
its fetcher, looked up again after a backoff); one that cannot be mirrored is failed.

`FetchAssignment` is the base of `MirrorFetcherManager` and of its other parts (mixins: the
state is the manager's, set up by it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import zlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, cast

from ..log.clock import Clock
from ..log.partition_log import PartitionLog
from ..network.client import backoff_ms
from ..network.errors import NetworkError
from ..replication.partition import Partition
from .fetch_state import RETRY_BACKOFF_MAX_MS, RETRY_BACKOFF_MS, _Mirror, _Partition
from .source import SourceError
from .source_fetcher import _Fetcher

if TYPE_CHECKING:
    from .fetcher import MirrorFetcherManager

# The name the code logged under before fetcher.py was split: KMIRROR_LOG_LEVELS lines and the
# (logger) of log lines stay the same.
log = logging.getLogger("broker.mirror.fetcher")


class FetchAssignment:
    """Partitions to fetchers, and off them again."""

    node_id: int
    get_partition: Callable[[str, int], Partition | None]
    clock: Clock
    on_failed: Callable[[str, str, int, str], None]
    on_appended: Callable[[str, int], None] | None
    num_fetchers: int
    _monotonic: Callable[[], float]
    _mirrors: dict[str, _Mirror]
    _rng: random.Random

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        part = self.get_partition(topic, partition)
        return None if part is None else part.log

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
                topics = await m.source.topics(sorted({p.source_topic for p in due}))
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
                t = topics.get(p.source_topic)
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
                    # only MirrorFetcherManager (this class's subclass) runs this loop
                    f = _Fetcher(cast("MirrorFetcherManager", self), m, fid, sp.leader_id)
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
