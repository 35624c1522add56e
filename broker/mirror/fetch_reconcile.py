"""Offset reconciliation: after OFFSET_OUT_OF_RANGE or a diverging epoch in a Fetch answer, the
local log is realigned with the source (restarted at the source's log start, or truncated where
the epoch histories part, from the source's OffsetForLeaderEpoch). The partition is held busy
meanwhile, so ``remove`` waits for it.
"""

from __future__ import annotations

import asyncio
import logging

from ..log.partition_log import PartitionLog
from ..network.client import backoff_ms
from ..network.errors import NetworkError
from .fetch_assignment import FetchAssignment
from .fetch_state import RETRY_BACKOFF_MAX_MS, RETRY_BACKOFF_MS, _Mirror, _Partition
from .source import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, SourceError

# The name the code logged under before fetcher.py was split: KMIRROR_LOG_LEVELS lines and the
# (logger) of log lines stay the same.
log = logging.getLogger("broker.mirror.fetcher")


class OffsetReconciler(FetchAssignment):
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
                part = self.get_partition(p.topic, p.partition)
                if part is not None:
                    part.truncate_fully_and_start_at(start)
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
        part = self.get_partition(p.topic, p.partition)
        if part is None:
            return
        if target < plog.log_start_offset:
            part.truncate_fully_and_start_at(target)
        else:
            part.truncate_to(target)
