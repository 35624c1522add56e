"""Offset reconciliation: after OFFSET_OUT_OF_RANGE or a diverging epoch in a Fetch answer, the
local log is realigned with the source (restarted at the source's log start, or truncated where
the epoch histories part, from the source's OffsetForLeaderEpoch): `core.truncation` decides
where, this asks the source and cuts through the partition. The partition is held busy
meanwhile, so ``remove`` waits for it.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Mapping

from ..log.partition_log import PartitionLog
from ..network.client import backoff_ms
from ..network.errors import NetworkError
from ..replication.partition import Partition
from .core import truncation
from .fetch_interfaces import Parking
from .fetch_state import RETRY_BACKOFF_MAX_MS, RETRY_BACKOFF_MS, FetchMirror, FetchPartition
from .source import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, SourceError

# The name the code logged under before fetcher.py was split: KMIRROR_LOG_LEVELS lines and the
# (logger) of log lines stay the same.
log = logging.getLogger("broker.mirror.fetcher")


class OffsetReconciler:
    """Realigns local logs with the source (the `fetch_interfaces.Reconciler`)."""

    def __init__(
        self,
        mirrors: Mapping[str, FetchMirror],
        get_partition: Callable[[str, int], Partition | None],
        parking: Parking,
        rng: random.Random,
    ) -> None:
        self._mirrors = mirrors
        self._get_partition = get_partition
        self._parking = parking
        self._rng = rng

    async def reconcile(self, p: FetchPartition, diverged: tuple[int, int] | None) -> None:
        """OFFSET_OUT_OF_RANGE or a diverging epoch: realign the local log with the source."""
        m = self._mirrors.get(p.mirror)
        if m is None or p.removed:
            return
        p.idle.clear()
        try:
            if diverged is not None:
                target: int | None = await self._divergence_target(m, p, *diverged)
                if target is not None:
                    self._truncate(p, target)
                return
            start, _ = await m.source.list_offsets(p.source_topic, p.partition, EARLIEST_TIMESTAMP)
            end, _ = await m.source.list_offsets(p.source_topic, p.partition, LATEST_TIMESTAMP)
            plog = self._live_log(p)
            if plog is None:
                return
            leo = plog.log_end_offset
            decided = truncation.out_of_range(leo, plog.latest_epoch, start, end)
            if decided.restart_at is not None:
                log.info(
                    "mirror %s: %s-%d: local end %d is below the source's log start %d; "
                    "restarting the local log there",
                    p.mirror,
                    p.topic,
                    p.partition,
                    leo,
                    start,
                )
                part = self._get_partition(p.topic, p.partition)
                if part is not None:
                    part.truncate_fully_and_start_at(decided.restart_at)
                return
            if decided.diverged_epoch is not None:
                target = await self._divergence_target(
                    m, p, decided.diverged_epoch, -1, fallback=decided.fallback
                )
                if target is not None:
                    self._truncate(p, target)
                return
            p.error = decided.retry
            p.failures += 1
            await asyncio.sleep(
                backoff_ms(p.failures, RETRY_BACKOFF_MS, RETRY_BACKOFF_MAX_MS, self._rng) / 1000
            )
        except (SourceError, NetworkError) as e:
            p.error = f"offset reconciliation: {e}"
            self._parking.park(p, p.error)
        finally:
            p.idle.set()

    def _live_log(self, p: FetchPartition) -> PartitionLog | None:
        if p.removed or p.failed:
            return None
        part = self._get_partition(p.topic, p.partition)
        return None if part is None else part.log

    async def _divergence_target(
        self, m: FetchMirror, p: FetchPartition, epoch: int, end_offset: int, *, fallback: int = -1
    ) -> int | None:
        """Where our log stops agreeing with the source, from the source's end of ``epoch``
        (asked for when ``end_offset`` is unknown; epoch -1: nothing to ask)."""
        if end_offset < 0 and epoch >= 0:
            try:
                epoch, end_offset = await m.source.offset_for_leader_epoch(
                    p.source_topic, p.partition, epoch
                )
            except NetworkError as e:  # the source lacks OffsetForLeaderEpoch
                log.warning("mirror %s: %s: %s; truncating to the source end", m.name, p, e)
                epoch = -1
        plog = self._live_log(p)
        if plog is None:
            return None
        ours = plog.end_offset_for_epoch(epoch) if epoch >= 0 else (-1, -1)
        return truncation.divergence_target(
            plog.log_end_offset, epoch, end_offset, ours, fallback=fallback
        )

    def _truncate(self, p: FetchPartition, target: int) -> None:
        """Cut through the partition (which brings its HW down with the log end)."""
        part = None if p.removed or p.failed else self._get_partition(p.topic, p.partition)
        if part is None:
            return
        plog = part.log
        log.info(
            "mirror %s: %s-%d diverged from the source; truncating %d -> %d",
            p.mirror,
            p.topic,
            p.partition,
            plog.log_end_offset,
            target,
        )
        if truncation.restart(target, plog.log_start_offset):
            part.truncate_fully_and_start_at(target)
        else:
            part.truncate_to(target)
