"""A broker partition log as the replication core sees it (``LeaderLog`` and ``FollowerLog``).

``PartitionLog`` already has the offsets, the epoch cache lookups and truncation; this adds the
three operations the sans-IO states name differently, and keeps one rule of this broker: an
epoch start is recorded only when the epoch is newer than the cache's latest (a mirrored log
carries the source cluster's epochs, which may be higher than our partition's).
"""

from typing import Any

from protocol.records.scan import epoch_prefix

from ..log.partition_log import PartitionLog


class ReplicaLog:
    __slots__ = ("_log", "_now_ms")

    def __init__(self, log: PartitionLog, now_ms: Any) -> None:
        self._log = log
        self._now_ms = now_ms

    @property
    def log_start_offset(self) -> int:
        return self._log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._log.log_end_offset

    @property
    def written_end_offset(self) -> int:
        return self._log.written_end_offset

    @property
    def high_watermark(self) -> int:
        return self._log.high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._log.high_watermark = offset

    @property
    def latest_epoch(self) -> int | None:
        return self._log.latest_epoch

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self._log.end_offset_for_epoch(epoch)

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        latest = self._log.latest_epoch
        if latest is None or epoch > latest:
            self._log.leader_epoch_cache.assign(epoch, start_offset)

    def append_as_follower(self, records: Any, max_epoch: int) -> bool:
        """The leader's batches, byte for byte at their offsets (the epoch cache learns their
        epochs and the producer state and transaction index follow, as for any raw append), up
        to the first batch of an epoch above ``max_epoch`` (-1: no bound)."""
        size = len(records) if not isinstance(records, memoryview) else records.nbytes
        keep = size if max_epoch < 0 else epoch_prefix(records, max_epoch)
        if keep:
            self._log.append_raw(records[:keep] if keep < size else records, now_ms=self._now_ms())
        return keep == size

    def truncate_to(self, offset: int) -> bool:
        return self._log.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._log.truncate_fully_and_start_at(offset)

    def increment_log_start_offset(self, offset: int) -> None:
        """The leader's log start (retention, DeleteRecords), never past our high watermark."""
        if offset > self._log.log_start_offset:
            self._log.delete_records_before(min(offset, self._log.high_watermark))
