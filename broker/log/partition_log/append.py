"""Appends: as the leader (validated, offsets and epoch assigned in one copy), raw (followers
and mirrors: bytes kept as they are), and transaction markers. Every append feeds the producer
state, and the write goes through the log writer into the active segment.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Protocol

from crc32c import crc32c

from protocol.errors import ProtocolError
from protocol.records import (
    BatchView,
    build_end_txn_marker,
    scan_batches,
    set_base_offset,
    set_max_timestamp,
    set_partition_leader_epoch,
)
from protocol.records.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, LOG_OVERHEAD

from ..config import LONG_MAX
from ..errors import (
    CORRUPT_MESSAGE,
    INVALID_RECORD,
    KAFKA_STORAGE_ERROR,
    RECORD_LIST_TOO_LARGE,
    LogAppendError,
    UnexpectedAppendOffsetError,
)
from ..producer_state import ProducerStateManager
from ..segment import BatchMeta, batch_max_timestamp
from ..validation import AppendOrigin, check_leader_batches
from .flush import FlushMixin
from .producer_replay import aborted_txn
from .state import Buffer

_U32 = struct.Struct(">I")
_LEN = struct.Struct(">i")


class DuplicateInfo(Protocol):
    """What a producer-state ``check`` returns for a duplicate batch."""

    @property
    def first_offset(self) -> int: ...

    @property
    def last_offset(self) -> int: ...


@dataclass(frozen=True, slots=True)
class AppendResult:
    first_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int
    record_count: int
    duplicate: bool = False


class AppendMixin(FlushMixin):
    """Appends; a write may roll the segment or flush (flush.messages), hence ``FlushMixin``."""

    def append_as_leader(
        self,
        records: Buffer,
        leader_epoch: int,
        *,
        now_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
    ) -> AppendResult:
        """Validate, assign offsets and the leader epoch, write. Raises ``LogAppendError``."""
        cfg = self._config
        checked = check_leader_batches(records, cfg, now_ms, origin)
        if not checked:
            return AppendResult(-1, -1, -1, self._log_start, 0)
        # The one copy: patch the copy's headers in place, never the caller's buffer.
        out = bytearray(records)
        append_time = cfg.log_append_time
        next_offset = self._leo
        metas: list[BatchMeta] = []
        record_count = 0
        max_ts = -1
        for cb in checked:
            pos = cb.position
            set_base_offset(out, pos, next_offset)
            set_partition_leader_epoch(out, pos, leader_epoch)
            batch_max_ts = cb.max_timestamp
            if append_time:
                # Kafka stamps LogAppendTime in max_timestamp
                set_max_timestamp(out, pos, now_ms, log_append_time=True)
                batch_max_ts = now_ms
            elif cb.header_stale:
                # The producer's header disagrees with its records (librdkafka writes 0 when
                # every record says -1): store the records' max, as Kafka's leader does.
                set_max_timestamp(out, pos, batch_max_ts)
            next_offset += cb.offset_count
            metas.append(BatchMeta(pos, cb.size, next_offset - 1, batch_max_ts))
            record_count += cb.record_count
            max_ts = max(max_ts, batch_max_ts)
        first_offset = self._leo
        last_offset = next_offset - 1
        psm = self.producer_state
        if psm is not None:
            for cb in checked:
                view = BatchView(out, cb.position)
                if view.producer_id < 0:
                    continue
                dup = psm.check(view)
                if dup is not None:
                    return AppendResult(
                        dup.first_offset,
                        dup.last_offset,
                        dup.log_append_time_ms,
                        self._log_start,
                        0,
                        duplicate=True,
                    )
        if leader_epoch >= 0:
            self.epoch_cache.assign(leader_epoch, first_offset)
        self._write(out, metas, first_offset, last_offset, max_ts, now_ms, owned=True)
        self._count_unflushed(record_count)
        if psm is not None:
            self._update_producer_state(psm, [BatchView(out, cb.position) for cb in checked])
        self._maybe_flush_by_count()
        return AppendResult(
            first_offset,
            last_offset,
            now_ms if append_time else -1,
            self._log_start,
            record_count,
        )

    def append_raw(self, records: Buffer, *, now_ms: int) -> AppendResult:
        """Append batches with their own offsets and epochs, byte for byte (followers, mirrors).

        Offsets must start at or after the log end offset and increase; gaps are allowed.
        Every CRC is checked, with one exception: a control batch whose CRC field is 0, which
        is how librdkafka's mock cluster writes its COMMIT/ABORT markers (it never computes
        one). Such a batch is stored with its CRC filled in, so the log stays valid for
        recovery, Kafka's tools and CRC-checking consumers; every other byte is kept.
        """
        metas: list[BatchMeta] = []
        views: list[BatchView] = []
        unsummed: list[int] = []
        record_count = 0
        max_ts = -1
        prev_last = self._leo - 1
        try:
            for view in scan_batches(records, verify_crc=False):
                if not view.crc_ok():
                    if view.crc != 0 or not view.is_control:
                        raise LogAppendError(
                            CORRUPT_MESSAGE,
                            f"malformed record batch: batch at byte {view.position}: CRC32C "
                            f"mismatch, header says {view.crc:#010x} but the data computes "
                            f"to {view.compute_crc():#010x}",
                        )
                    unsummed.append(view.position)
                if not metas and view.base_offset < self._leo:
                    raise UnexpectedAppendOffsetError(view.base_offset, self._leo)
                if view.base_offset <= prev_last or view.last_offset < view.base_offset:
                    raise LogAppendError(
                        INVALID_RECORD,
                        f"out of order offsets in raw append: batch [{view.base_offset}, "
                        f"{view.last_offset}] after offset {prev_last}",
                    )
                prev_last = view.last_offset
                batch_max_ts = batch_max_timestamp(view)
                metas.append(BatchMeta(view.position, view.size, view.last_offset, batch_max_ts))
                views.append(view)
                record_count += view.record_count
                max_ts = max(max_ts, batch_max_ts)
        except ProtocolError as exc:
            raise LogAppendError(CORRUPT_MESSAGE, f"malformed record batch: {exc}") from None
        if not metas:
            return AppendResult(-1, -1, -1, self._log_start, 0)
        total = sum(m.size for m in metas)
        if total > self._config.segment_bytes:
            raise LogAppendError(
                RECORD_LIST_TOO_LARGE,
                f"append of {total} bytes exceeds segment.bytes {self._config.segment_bytes}",
            )
        first_offset = views[0].base_offset
        last_offset = prev_last
        if last_offset - first_offset > 2**31 - 1:
            raise LogAppendError(
                INVALID_RECORD, f"raw append spans offsets {first_offset}..{last_offset}"
            )
        for view in views:
            epoch = view.partition_leader_epoch
            if epoch >= 0:
                self.epoch_cache.assign(epoch, view.base_offset)
        data = records if total == len(records) else memoryview(records)[:total]
        if unsummed:
            data = _fill_crcs(data, unsummed)
        self._write(data, metas, first_offset, last_offset, max_ts, now_ms, owned=bool(unsummed))
        self._count_unflushed(record_count)
        psm = self.producer_state
        if psm is not None:
            self._update_producer_state(psm, views)
        self._maybe_flush_by_count()
        return AppendResult(first_offset, last_offset, -1, self._log_start, record_count)

    def _update_producer_state(self, psm: ProducerStateManager, views: list[BatchView]) -> None:
        """After a write: feed each batch to the producer state; an aborted transaction gets
        its .txnindex entry in the segment that holds its marker (the active one)."""
        for view in views:
            done = psm.on_append(view, view.base_offset)
            if done is not None and done.is_aborted:
                self._segments[-1].txn_index.append(aborted_txn(done))

    def append_txn_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        *,
        leader_epoch: int,
        now_ms: int,
    ) -> AppendResult:
        """Write a COMMIT/ABORT marker as the partition leader (the transaction coordinator's
        WriteTxnMarkers). The producer state refuses a marker from an older producer epoch
        (INVALID_PRODUCER_EPOCH) or an older coordinator epoch (TRANSACTION_COORDINATOR_FENCED);
        raises ``LogAppendError``."""
        batch = build_end_txn_marker(
            commit,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            partition_leader_epoch=leader_epoch,
            timestamp=now_ms,
        )
        return self.append_as_leader(
            batch, leader_epoch, now_ms=now_ms, origin=AppendOrigin.COORDINATOR
        )

    def _write(
        self,
        data: Buffer,
        metas: list[BatchMeta],
        first_offset: int,
        last_offset: int,
        max_ts: int,
        now_ms: int,
        *,
        owned: bool = False,
    ) -> None:
        if self._write_error is not None:
            raise LogAppendError(
                KAFKA_STORAGE_ERROR, f"{self.name}: an earlier write failed: {self._write_error}"
            )
        size = len(data) if not isinstance(data, memoryview) else data.nbytes
        seg = self._segments[-1]
        if seg.should_roll(
            segment_bytes=self._config.segment_bytes,
            segment_ms=self._config.segment_ms,
            messages_size=size,
            max_timestamp=max_ts,
            max_offset=last_offset,
            now_ms=now_ms,
        ):
            seg = self.roll(first_offset, now_ms=now_ms)
        job = seg.append(data, metas, end_offset=last_offset + 1, owned=owned)
        if job is not None:
            if self._last_job is None:
                self._written_leo = self._leo
            self._last_job = job
        self._leo = last_offset + 1

    def _count_unflushed(self, records: int) -> None:
        if not self._unflushed and self._config.flush_ms < LONG_MAX:
            self._want_background()  # a flush.ms deadline starts
        self._unflushed += records

    def _maybe_flush_by_count(self) -> None:
        if self._unflushed >= self._config.flush_messages:
            self.flush()


def _fill_crcs(data: Buffer, positions: list[int]) -> bytearray:
    out = bytearray(data)
    for pos in positions:
        size = LOG_OVERHEAD + _LEN.unpack_from(out, pos + 8)[0]
        _U32.pack_into(
            out, pos + CRC_OFFSET, crc32c(memoryview(out)[pos + ATTRIBUTES_OFFSET : pos + size])
        )
    return out
