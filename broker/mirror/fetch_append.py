"""Applying one partition of a Fetch response: the source's offsets and status are noted, and
`core.fetch_position` decides the rest, which this carries out: an error parks or reconciles
the partition, and the whole batches at or past the local log end are appended byte for byte
(``append_raw``: the source's offsets, leader epochs and compression). A control batch the
mirror cannot read stops the partition there. Synchronous: no other task runs between the
request's answer and the append, which is what makes ``remove`` safe.
"""

from __future__ import annotations

from collections.abc import Callable

from protocol.errors import ProtocolError
from protocol.fetch_codec import FetchPartitionData
from protocol.records import scan_batches

from ..log.errors import LogError
from ..replication.partition import Partition
from .core import fetch_position
from .core.control_check import control_batch_problem
from .core.fetch_position import Verdict
from .fetch_interfaces import Applied, Parking
from .fetch_state import NOT_LEADER_OR_FOLLOWER, FetchPartition, SentFetch

NOTHING = Applied(0)


class BatchAppender:
    """A Fetch answer's partitions into the local logs (the `fetch_interfaces.Appender`)."""

    def __init__(
        self,
        get_partition: Callable[[str, int], Partition | None],
        now_ms: Callable[[], int],
        parking: Parking,
        on_appended: Callable[[str, int], None] | None = None,
    ) -> None:
        self._get_partition = get_partition
        self._now_ms = now_ms
        self._parking = parking
        self._on_appended = on_appended

    # -- applying fetched data (synchronous: no other task runs in between) --------------
    def apply(self, p: FetchPartition, sent: SentFetch, data: FetchPartitionData) -> Applied:
        """Handle one partition of a Fetch response: the record bytes appended, or that the
        partition is to be reconciled with the source first."""
        if data.high_watermark >= 0:
            p.src_hw = data.high_watermark
            p.hw_ms = self._now_ms()
        if data.last_stable_offset >= 0:
            p.src_lso = data.last_stable_offset
        if data.log_start_offset >= 0:
            p.src_log_start = data.log_start_offset
        p.last_fetch_ms = self._now_ms()
        code = data.error_code
        if code not in (fetch_position.NONE, fetch_position.OFFSET_OUT_OF_RANGE):
            self._parking.park(p, f"source error {code} fetching {p.topic}-{p.partition}")
            return NOTHING
        part = self._get_partition(p.topic, p.partition)
        if part is None and code == fetch_position.NONE:
            self._parking.fail(p, "no local log")
            return NOTHING
        local_end = part.log.log_end_offset if part is not None else sent.fetch_offset
        decided = fetch_position.verdict(code, data.diverging_epoch, local_end, sent.fetch_offset)
        if decided == Verdict.RECONCILE:
            if code == fetch_position.NONE:
                return Applied(0, True, (data.diverging_epoch, data.diverging_end_offset))
            return Applied(0, True)
        if decided != Verdict.RECORDS or part is None:
            return NOTHING  # the log moved under the request (truncated by the caller): refetch
        appended = 0
        refused: str | None = None
        if len(data.records):
            try:
                appended, refused = append_planned(part, data.records)
            except (LogError, ProtocolError, OSError, ValueError) as e:
                if getattr(e, "error_code", None) == NOT_LEADER_OR_FOLLOWER:
                    # leadership moved here before the manager stopped this fetcher: not a
                    # failure of the partition; the data is fetched again by the new leader
                    self._parking.park(p, f"{p.topic}-{p.partition} is led by another node now")
                    return NOTHING
                self._parking.fail(p, f"append failed: {e}")
                return NOTHING
        if appended:
            p.rate.record(appended)
        if refused is not None:
            # What preceded the refused batch is stored; the partition stops there.
            if appended and self._on_appended is not None:
                self._on_appended(p.topic, p.partition)
            self._parking.fail(p, refused)
            return Applied(appended)
        plog = part.log
        start = fetch_position.follow_log_start(
            plog.log_start_offset, plog.high_watermark, data.log_start_offset
        )
        if start is not None:
            part.delete_records_before(start)
        p.error = None
        p.failures = 0
        if appended and self._on_appended is not None:
            self._on_appended(p.topic, p.partition)
        return Applied(appended)


def append_planned(part: Partition, records: memoryview) -> tuple[int, str | None]:
    """Carry out `fetch_position.plan_append`: (bytes appended, why the batch after them
    was refused, or None)."""
    plog = part.log
    # Headers only (append_raw checks each CRC). Control batches are decoded too (one
    # tiny record each): see control_check.
    plan = fetch_position.plan_append(
        scan_batches(records, verify_crc=False, allow_partial_tail=True),
        plog.log_end_offset,
        plog.log_start_offset,
        plog.config.segment_bytes,
        control_batch_problem,
    )
    if plan.cut_to >= 0:
        if plan.restart:
            part.truncate_fully_and_start_at(plan.cut_to)
        else:
            part.truncate_to(plan.cut_to)
    for start, end in plan.chunks:
        part.append_raw(records[start:end])
    return plan.size, plan.refused
