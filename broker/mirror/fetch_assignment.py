"""Which fetcher fetches a partition: partitions hash to fetcher ids, and a per-mirror task finds
the source leader of every partition no fetcher has (Metadata) and hands it to the fetcher of
(fetcher id, leader). A partition whose leader moved or whose fetch failed is parked (taken off
its fetcher, looked up again after a backoff); one that cannot be mirrored is failed.

`FetchParking` does the parking and failing (the `fetch_interfaces.Parking` the other parts are
given); `LeaderAssignment` runs each mirror's lookup loop and makes fetchers through the factory
it is given.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import zlib
from collections.abc import Callable, Mapping

from ..network.client import backoff_ms
from ..network.errors import NetworkError
from .fetch_interfaces import Parking
from .fetch_state import (
    RETRY_BACKOFF_MAX_MS,
    RETRY_BACKOFF_MS,
    FetcherHandle,
    FetchMirror,
    FetchPartition,
)
from .source import SourceError

# The name the code logged under before fetcher.py was split: KMIRROR_LOG_LEVELS lines and the
# (logger) of log lines stay the same.
log = logging.getLogger("broker.mirror.fetcher")


class FetchParking:
    """Partitions off their fetchers: parked until looked up again, failed, or detached."""

    def __init__(
        self,
        mirrors: Mapping[str, FetchMirror],
        on_failed: Callable[[str, str, int, str], None],
        monotonic: Callable[[], float],
        rng: random.Random,
    ) -> None:
        self._mirrors = mirrors
        self._on_failed = on_failed
        self._monotonic = monotonic
        self._rng = rng

    async def detach(self, p: FetchPartition) -> None:
        """No longer fetched; on return nothing for ``p`` is in flight or appending."""
        p.removed = True
        if p.fetcher is not None:
            p.fetcher.drop(p)
        await p.idle.wait()

    def park(self, p: FetchPartition, error: str | None, *, backoff: bool = True) -> None:
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

    def fail(self, p: FetchPartition, reason: str) -> None:
        if p.fetcher is not None:
            p.fetcher.drop(p)
        p.failed = True
        p.error = reason
        log.error("mirror %s: partition %s-%d FAILED: %s", p.mirror, p.topic, p.partition, reason)
        try:
            self._on_failed(p.mirror, p.topic, p.partition, reason)
        except Exception:
            log.exception("on_failed callback raised")


class LeaderAssignment:
    """Partitions to fetchers: each mirror's loop finds source leaders and hands partitions on."""

    def __init__(
        self,
        parking: Parking,
        new_fetcher: Callable[[FetchMirror, int, int], FetcherHandle],
        monotonic: Callable[[], float],
        num_fetchers: int,
    ) -> None:
        self._parking = parking
        self._new_fetcher = new_fetcher  # (mirror, fetcher id, source node) -> a running fetcher
        self._monotonic = monotonic
        self.num_fetchers = num_fetchers

    def fetcher_id(self, topic: str, partition: int) -> int:
        return (zlib.crc32(topic.encode()) * 31 + partition) % self.num_fetchers

    async def run(self, m: FetchMirror) -> None:
        """Find the source leader of every unassigned partition, then hand it to its fetcher."""
        park = self._parking.park
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
                    park(p, f"metadata: {e}")
                continue
            except Exception as e:
                log.exception("mirror %s: metadata refresh failed", m.name)
                for p in due:
                    park(p, f"metadata: {e!r}")
                continue
            for p in due:
                if p.removed or p.fetcher is not None:
                    continue
                t = topics.get(p.source_topic)
                if t is None:
                    park(p, "topic not found at the source")
                    continue
                if p.topic_id is not None and t.topic_id is not None and p.topic_id != t.topic_id:
                    park(p, f"source topic id is {t.topic_id}, expected {p.topic_id}")
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
                    park(p, "no leader at the source")
                    continue
                p.leader_id, p.leader_epoch = sp.leader_id, sp.leader_epoch
                fid = self.fetcher_id(p.topic, p.partition)
                f = m.fetchers.get((fid, sp.leader_id))
                if f is None:
                    f = m.fetchers[(fid, sp.leader_id)] = self._new_fetcher(m, fid, sp.leader_id)
                f.assign(p)
