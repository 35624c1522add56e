"""Applying one partition of a Fetch response: the source's offsets and status are noted, an error
parks or reconciles the partition, and the whole batches at or past the local log end are
appended byte for byte (``append_raw``: the source's offsets, leader epochs and compression).
A control batch the mirror cannot read stops the partition there. Synchronous: no other task
runs between the request's answer and the append, which is what makes ``remove`` safe.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from protocol.errors import ProtocolError
from protocol.fetch_codec import FetchPartitionData
from protocol.records import BatchView, scan_batches

from ..log.errors import LogError
from ..replication.partition import Partition
from .control_check import control_batch_problem
from .fetch_assignment import FetchAssignment
from .fetch_state import NONE, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE, _Partition, _Sent

if TYPE_CHECKING:
    from .source_fetcher import _Fetcher


class BatchAppender(FetchAssignment):
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
        self._follow_log_start(part, data.log_start_offset)
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
                part.truncate_fully_and_start_at(first.base_offset)
            else:
                part.truncate_to(first.base_offset)
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
    def _follow_log_start(part: Partition, source_log_start: int) -> None:
        """Mirror the source's retention / DeleteRecords as far as our copy reaches."""
        plog = part.log
        if plog.log_start_offset < source_log_start <= plog.high_watermark:
            part.delete_records_before(source_log_start)
