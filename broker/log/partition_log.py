"""One partition's log: an ordered list of segments plus offsets, epochs and policies.

Semantics follow Kafka's UnifiedLog/LocalLog/LogLoader (see docs in each method). Batches
stay bytes: a leader append is one copy into a bytearray (to patch base offset and partition
leader epoch in place) and one ``pwrite``; a raw append writes the caller's bytes unchanged.
Not thread-safe: call from one thread (the event loop).

Transactions (once ``load_producer_state`` attached a ``ProducerStateManager``): every append
(leader, raw/mirror, markers) updates the producer state; an ABORT marker adds an entry to the
segment's ``.txnindex``; the last stable offset is min(HW, first unstable offset) and follows
appends, HW moves, truncation and the log start. Recovery rebuilds index entries from the log.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import os
import random
import shutil
import struct
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

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
from protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    LOG_OVERHEAD,
)
from protocol.txn_index import AbortedTxn

from .background_flush import FlushPlan
from .checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    CheckpointError,
    create_partition_metadata,
    fsync_dir,
    read_partition_metadata,
    write_partition_metadata,
)
from .clock import Clock
from .config import LONG_MAX, LogConfig
from .epoch_cache import LeaderEpochCache
from .errors import (
    CORRUPT_MESSAGE,
    INVALID_RECORD,
    KAFKA_STORAGE_ERROR,
    RECORD_LIST_TOO_LARGE,
    CorruptIndexError,
    LogAppendError,
    OffsetOutOfRange,
    UnexpectedAppendOffsetError,
)
from .log_writer import INLINE, LogWriter, WriteJob
from .producer_state import CompletedTxn, ProducerStateManager
from .segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    BatchMeta,
    LogSegment,
    batch_max_timestamp,
)
from .segment_swap import (
    CLEANED_SUFFIX,
    SWAP_SUFFIX,
    complete_swaps,
    remove_staged,
    rename_suffix,
)
from .validation import AppendOrigin, check_leader_batches

Buffer = bytes | bytearray | memoryview

log = logging.getLogger(__name__)

_I64 = struct.Struct(">q")
_U32 = struct.Struct(">I")
_LEN = struct.Struct(">i")
_LAST_DELTA_AT: Final = 23  # last offset delta's byte position in a batch header
_REPLAY_CHUNK: Final = 8 << 20
_LEFTOVER_SUFFIXES: Final = (DELETED_SUFFIX, ".cleaned", ".swap", ".tmp")


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


@dataclass(frozen=True, slots=True)
class ReadResult:
    records: list[Buffer]
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    # With ``read(..., aborted=True)``: the aborted transactions overlapping the returned data.
    aborted_transactions: list[AbortedTxn] | None = None

    @property
    def size(self) -> int:
        return sum(len(b) if not isinstance(b, memoryview) else b.nbytes for b in self.records)


@dataclass
class _PendingDelete:
    due_ms: int
    paths: list[Path] = field(default_factory=list)


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class PartitionLog:
    """Use ``PartitionLog.open``; the constructor does not touch the disk."""

    def __init__(
        self,
        directory: Path,
        topic: str,
        partition: int,
        topic_id: uuid.UUID | None,
        config: LogConfig,
        clock: Clock,
        writer: LogWriter = INLINE,
    ) -> None:
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self._topic_id = topic_id
        self._config = config
        self._clock = clock
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._log_start = 0
        self._leo = 0
        self._hw = 0
        self._recovery_point = 0
        self._unflushed = 0
        self._last_flush_ms = clock.now_ms()
        self._roll_flush_offset: int | None = None
        self._pending_deletes: list[_PendingDelete] = []
        self._random = random.Random()
        self._closed = False
        self.epoch_cache = LeaderEpochCache(directory, persist=False)
        self.producer_state: ProducerStateManager | None = None
        # Lowest offset from which .txnindex entries may be stale (recovered or repaired
        # segments): ``load_producer_state`` rebuilds them from the log.
        self._txn_index_stale_from: int | None = None
        # LogManager's hook, called when this log gets background work (a rolled segment to
        # flush, files to purge, a flush.ms deadline, a new log start to checkpoint): the
        # maintenance tick visits only such logs, never every log.
        self.on_background_work: Callable[[PartitionLog], None] | None = None
        self._generation = 0  # truncations so far: a background flush planned before one is void
        self._flush_in_flight = False
        # Appends go through the writer (see log_writer): with a threaded one the log end
        # (``_leo``, offsets assigned) runs ahead of what is in the file. ``_last_job`` is the
        # newest write not yet known done, ``_written_leo`` the log end the file has reached.
        self._writer = writer
        self._last_job: WriteJob | None = None
        self._written_leo = 0
        self._write_error: OSError | None = None
        # Called on the loop when writes completed (the partition advances its HW and wakes
        # acks=1 produces and fetchers waiting for them).
        self.on_written: Callable[[], None] | None = None

    def _want_background(self) -> None:
        hook = self.on_background_work
        if hook is not None:
            hook(self)

    def has_background_work(self) -> bool:
        """A rolled segment not yet flushed, files waiting for their purge, or unflushed data
        under a finite flush.ms."""
        return (
            self._roll_flush_offset is not None
            or bool(self._pending_deletes)
            or (self._unflushed > 0 and self._config.flush_ms < LONG_MAX)
        )

    def __repr__(self) -> str:
        return (
            f"PartitionLog({self.topic}-{self.partition}, start={self._log_start}, "
            f"end={self._leo}, hw={self._hw}, segments={len(self._segments)})"
        )

    # -- opening -------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        dir: Path,
        topic: str,
        partition: int,
        topic_id: uuid.UUID | None,
        config: LogConfig,
        clock: Clock,
        *,
        recovery_point: int = 0,
        log_start_offset: int | None = None,
        clean_shutdown: bool = False,
        high_watermark: int | None = None,
        sync_files: bool = True,
        writer: LogWriter = INLINE,
    ) -> PartitionLog:
        """Open (creating if needed) the log of ``topic``-``partition``.

        ``dir`` is the log directory (one of ``log.dirs``); the partition's files live in
        ``dir/<topic>-<partition>`` (passing that directory itself works too). Segments
        holding offsets at or past ``recovery_point`` are validated batch by batch unless
        ``clean_shutdown``; a torn or corrupt tail is truncated and logged. A missing or
        broken index is rebuilt. ``high_watermark`` defaults to the log end offset.
        """
        name = partition_dir_name(topic, partition)
        pdir = dir if dir.name == name else dir / name
        try:
            os.mkdir(pdir)
            fresh = True  # made just now: nothing in it to look for or recover
        except FileExistsError:
            fresh = False
        except FileNotFoundError:  # the log dir itself is missing
            pdir.mkdir(parents=True, exist_ok=True)
            fresh = False
        plog = cls(pdir, topic, partition, topic_id, config, clock, writer)
        if fresh:
            plog._create(log_start_offset or 0)
        else:
            plog._load(recovery_point, log_start_offset, clean_shutdown, high_watermark, sync_files)
        return plog

    def _create(self, start: int) -> None:
        """A new log in a directory made just now: its first segment (no index files yet) and
        partition.metadata, without listing, reading or recovering anything (most of the file
        system work of creating thousands of partitions at once)."""
        if self._topic_id is not None:
            create_partition_metadata(self.dir / PARTITION_METADATA, self._topic_id)
        self.epoch_cache = LeaderEpochCache(self.dir, fresh=True)
        segment = self._make_segment(start, self._clock.now_ms(), fresh=True)
        self._segments = [segment]
        self._bases = [start]
        segment.resize_indexes(self._config.segment_index_bytes)
        self._leo = self._log_start = self._recovery_point = start
        self._hw = start

    def _load(
        self,
        recovery_point: int,
        log_start_offset: int | None,
        clean_shutdown: bool,
        high_watermark: int | None,
        sync_files: bool = True,
    ) -> None:
        meta_path = self.dir / PARTITION_METADATA
        stored_id = read_partition_metadata(meta_path)
        if self._topic_id is None:
            self._topic_id = stored_id
        elif stored_id is None:
            write_partition_metadata(meta_path, self._topic_id, sync=sync_files)
        elif stored_id != self._topic_id:
            raise ValueError(
                f"{self.dir}: partition.metadata has topic id {stored_id}, "
                f"expected {self._topic_id}"
            )
        # A committed cleaner swap is finished first; every other leftover goes.
        swapped = complete_swaps(self.dir)
        for path in self.dir.iterdir():
            if path.name.endswith(_LEFTOVER_SUFFIXES):
                path.unlink(missing_ok=True)
        bases = sorted(
            int(p.name[: -len(LOG_SUFFIX)])
            for p in self.dir.glob("*" + LOG_SUFFIX)
            if p.name[: -len(LOG_SUFFIX)].isdigit()
        )
        known = set(bases)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            for p in self.dir.glob("*" + suffix):
                stem = p.name[: -len(suffix)]
                if stem.isdigit() and int(stem) not in known:
                    p.unlink()  # orphan index: its log is gone
        try:
            self.epoch_cache = LeaderEpochCache(self.dir)
        except CheckpointError as e:
            # Torn by a crash (see epoch_cache): rebuild it from every batch's epoch.
            log.warning("%s: %s; rebuilding the leader epoch cache from the segments", self.name, e)
            (self.dir / LEADER_EPOCH_CHECKPOINT).unlink(missing_ok=True)
            self.epoch_cache = LeaderEpochCache(self.dir)
            recovery_point, clean_shutdown = 0, False
        now = self._clock.now_ms()
        segments = [self._make_segment(b, now) for b in bases]
        if not segments:
            start = log_start_offset or 0
            segments = [self._make_segment(start, now)]
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._recover(recovery_point, clean_shutdown)
        for base in swapped:
            self._mark_txn_index_stale(base)  # its .txnindex was dropped: rebuild from markers
        for seg in self._segments:
            if seg.txn_index.sanity_check() is not None:
                self._mark_txn_index_stale(seg.base_offset)
        active = self._segments[-1]
        active.resize_indexes(self._config.segment_index_bytes)
        self._leo = max(active.read_next_offset(), active.base_offset)
        first_base = self._segments[0].base_offset
        self._log_start = max(log_start_offset or 0, first_base)
        if self._log_start > self._leo:
            self._log_start = self._leo
        self.epoch_cache.truncate_from_end(self._leo)
        self.epoch_cache.truncate_from_start(self._log_start)
        self._recovery_point = self._leo if clean_shutdown else min(recovery_point, self._leo)
        hw = self._leo if high_watermark is None else high_watermark
        self._hw = min(max(hw, self._log_start), self._leo)

    def _recover(self, recovery_point: int, clean_shutdown: bool) -> None:
        i = 0
        while i < len(self._segments):
            seg = self._segments[i]
            nxt = self._segments[i + 1].base_offset if i + 1 < len(self._segments) else None
            unflushed = not clean_shutdown and (nxt is None or nxt > recovery_point)
            broken = seg.indexes_missing
            if not broken:
                try:
                    seg.index.sanity_check(seg.size)
                    seg.time_index.sanity_check()
                except CorruptIndexError as exc:
                    log.warning("%s: %s; rebuilding the indexes", self.name, exc)
                    broken = True
            if unflushed or broken:
                # Entries below the recovery point were fsynced with the log; a segment the
                # recovery point falls inside needs only those above it rebuilt.
                stale_from = seg.base_offset if broken else max(seg.base_offset, recovery_point)
                self._mark_txn_index_stale(stale_from)
                trusted = None if broken or clean_shutdown else recovery_point
                truncated, why = seg.recover(self.epoch_cache, trusted)
                if truncated:
                    log.warning(
                        "%s: recovery truncated %d invalid bytes at byte %d of %s (%s)",
                        self.name,
                        truncated,
                        seg.size,
                        seg.log_path,
                        why,
                    )
                    later = self._segments[i + 1 :]
                    if later:
                        log.warning(
                            "%s: deleting %d segment(s) after the corrupt one: %s",
                            self.name,
                            len(later),
                            [s.base_offset for s in later],
                        )
                        for s in later:
                            s.delete()
                        del self._segments[i + 1 :]
                        self._bases = [s.base_offset for s in self._segments]
            i += 1

    def _mark_txn_index_stale(self, offset: int) -> None:
        stale = self._txn_index_stale_from
        self._txn_index_stale_from = offset if stale is None else min(stale, offset)

    def _make_segment(self, base_offset: int, now_ms: int, fresh: bool = False) -> LogSegment:
        cfg = self._config
        jitter = 0
        if cfg.segment_jitter_ms > 0:
            jitter = self._random.randrange(min(cfg.segment_jitter_ms, cfg.segment_ms))
        return LogSegment(
            self.dir,
            base_offset,
            index_interval_bytes=cfg.index_interval_bytes,
            max_index_size=cfg.segment_index_bytes,
            now_ms=now_ms,
            roll_jitter_ms=jitter,
            writer=self._writer,
            owner=self,
            fresh=fresh,
        )

    # -- properties ----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return partition_dir_name(self.topic, self.partition)

    @property
    def topic_id(self) -> uuid.UUID | None:
        return self._topic_id

    def adopt_topic_id(self, topic_id: uuid.UUID) -> None:
        """A log loaded without a partition.metadata learns its id from the metadata log (the
        file is written again; its fsync is the caller's)."""
        if self._topic_id is None:
            self._topic_id = topic_id
            write_partition_metadata(self.dir / PARTITION_METADATA, topic_id, sync=False)

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        """New topic config; applies to the next roll/append/retention pass."""
        self._config = config
        if self.has_background_work():
            self._want_background()  # flush.ms may have become finite

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        """Offsets assigned so far: what reads see (pending writes are read from memory)."""
        return self._leo

    @property
    def written_end_offset(self) -> int:
        """The log end the file has reached (the page cache: it survives a kill -9). The
        leader's high watermark, acks=1 and a follower's fetch offset go by this one."""
        return self._leo if self._last_job is None else self._written_leo

    @property
    def write_error(self) -> OSError | None:
        """A failed write: the log refuses appends (KAFKA_STORAGE_ERROR) from then on."""
        return self._write_error

    def writer_room(self) -> asyncio.Future[None] | None:
        """Back-pressure from the log writer (``LogWriter.room``): None to append now, else a
        future to await first (this log has much queued while the writer is behind)."""
        return self._writer.room(self)

    # -- completions from the writer (on the loop) -----------------------------------------
    def on_segment_written(self, job: WriteJob) -> None:
        if job.error is not None:
            if self._write_error is None:
                self._write_error = job.error
                log.error("%s: a write failed, appends are refused: %s", self.name, job.error)
            return
        if self._last_job is None:
            return  # already drained
        self._written_leo = max(self._written_leo, job.end_offset)
        if job is self._last_job:
            self._last_job = None

    def on_writes_applied(self) -> None:
        hook = self.on_written
        if hook is not None:
            hook()

    def drain_writes(self) -> None:
        """Block until every queued write of this log is in the file (truncation, flush,
        close, move: rare operations that need the files whole)."""
        last = self._last_job
        if last is None:
            return
        self._writer.wait(last)  # FIFO: every earlier job of every segment is done too
        for seg in self._segments:
            seg.drain()
        if self._write_error is None:
            self._last_job = None

    @property
    def high_watermark(self) -> int:
        return self._hw

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        self._hw = min(max(offset, self._log_start), self._leo)
        psm = self.producer_state
        if psm is not None:
            psm.on_high_watermark_updated(self._hw)

    @property
    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest undecided transaction (or ended one whose marker the
        HW has not passed), never below the log start; None without transactions."""
        psm = self.producer_state
        if psm is None:
            return None
        first = psm.first_unstable_offset()
        return None if first is None else max(first, self._log_start)

    @property
    def last_stable_offset(self) -> int:
        """Kafka's LSO: min(HW, first unstable offset). READ_COMMITTED reads stop here."""
        hw = self._hw
        first = self.first_unstable_offset
        return hw if first is None or first >= hw else first

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        return self.epoch_cache

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def unflushed_messages(self) -> int:
        return self._unflushed

    @property
    def latest_epoch(self) -> int | None:
        return self.epoch_cache.latest_epoch

    # -- append --------------------------------------------------------------------------
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
                self._segments[-1].txn_index.append(_aborted(done))

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

    # -- roll / flush --------------------------------------------------------------------
    def roll(
        self, expected_next_offset: int | None = None, *, now_ms: int | None = None
    ) -> LogSegment:
        """Start a new active segment at max(expected, log end offset)."""
        now = self._clock.now_ms() if now_ms is None else now_ms
        new_base = max(expected_next_offset or 0, self._leo)
        active = self._segments[-1]
        if active.base_offset == new_base and active.size == 0:
            return active
        if active.size == 0:
            # An empty active segment at another offset is simply replaced.
            active.delete()
            self._segments.pop()
            self._bases.pop()
        else:
            active.on_become_inactive()  # drains its writes first (see there)
            self._roll_flush_offset = new_base
            self._want_background()
        seg = self._make_segment(new_base, now)
        self._segments.append(seg)
        self._bases.append(new_base)
        psm = self.producer_state
        if psm is not None:
            # As Kafka: a snapshot per segment bounds what a truncation or a recovery replays.
            # Not fsynced here; a torn one fails its CRC and an older one is used.
            psm.take_snapshot(new_base, sync=False)
        return seg

    def flush(self, up_to: int | None = None) -> None:
        """fsync everything below ``up_to`` (default: the log end) and move the recovery point."""
        offset = self._leo if up_to is None else min(up_to, self._leo)
        if offset <= self._recovery_point:
            return
        self.drain_writes()
        for i, seg in enumerate(self._segments):
            seg_end = self._bases[i + 1] if i + 1 < len(self._bases) else None
            if seg_end is not None and seg_end <= self._recovery_point:
                continue  # already durable
            if seg.base_offset >= offset:
                break
            seg.flush()
        self._recovery_point = max(self._recovery_point, offset)
        self.epoch_cache.flush()
        self._last_flush_ms = self._clock.now_ms()
        if offset >= self._leo:
            self._unflushed = 0
        if self._roll_flush_offset is not None and self._roll_flush_offset <= offset:
            self._roll_flush_offset = None

    # -- background flushes (see background_flush) ----------------------------------------
    def plan_due_flush(self, now_ms: int) -> FlushPlan | None:
        """The periodic flush, planned for a worker thread: a rolled segment, or everything
        once flush.ms has passed."""
        if self._unflushed and now_ms - self._last_flush_ms >= self._config.flush_ms:
            return self.plan_flush()
        if self._roll_flush_offset is not None:
            return self.plan_flush(self._roll_flush_offset)
        return None

    def plan_flush(self, up_to: int | None = None, *, snapshot: bool = False) -> FlushPlan | None:
        """Step 1 of a background flush to ``up_to`` (default: the log end); with ``snapshot``
        the producer state there too (the recovery checkpoint). None: nothing to do, or a
        background flush of this log is still running."""
        if self._closed or self._flush_in_flight:
            return None
        end = self._leo if up_to is None else min(up_to, self._leo)
        plan = FlushPlan(self.name, end, self._generation)
        if end > self._recovery_point:
            for i, seg in enumerate(self._segments):
                seg_end = self._bases[i + 1] if i + 1 < len(self._bases) else None
                if seg_end is not None and seg_end <= self._recovery_point:
                    continue  # already durable
                if seg.base_offset >= end:
                    break
                plan.paths.extend(seg.sync_paths())
        psm = self.producer_state
        if snapshot and psm is not None and end == self._leo > self._log_start:
            latest = psm.latest_snapshot_offset()
            if latest is None or latest < end:
                plan.snapshot = psm.encode_state()
                plan.snapshot_tmp = psm.snapshot_tmp_path(end)
        if end <= self._recovery_point and plan.snapshot is None:
            return None
        if self._last_job is not None:
            # The flush thread first waits until the writer has put ``end`` in the file.
            plan.barrier = self._writer.barrier()
        self._flush_in_flight = True
        return plan

    def complete_flush(self, plan: FlushPlan) -> None:
        """Step 3, on the loop once the thread is done: the recovery point moves and the
        snapshot goes into place, unless the log was truncated or closed meanwhile."""
        self._flush_in_flight = False
        if not plan.ok or self._closed or plan.generation != self._generation:
            plan.discard()
            return
        self.epoch_cache.flush()
        if plan.up_to > self._recovery_point:
            self._recovery_point = plan.up_to
            self._last_flush_ms = self._clock.now_ms()
            if plan.up_to >= self._leo:
                self._unflushed = 0
        if self._roll_flush_offset is not None and self._roll_flush_offset <= plan.up_to:
            self._roll_flush_offset = None
        psm = self.producer_state
        if plan.snapshot_tmp is not None:
            if psm is None:
                plan.discard()
            else:
                psm.install_snapshot(plan.snapshot_tmp, plan.up_to)

    def checkpoint_recovery(self) -> None:
        """The recovery checkpoint done in place (tools, tests): the background flush's three
        steps in a row: fsync to the log end, then the producer snapshot there."""
        plan = self.plan_flush(snapshot=True)
        if plan is not None:
            plan.run()
            self.complete_flush(plan)

    # -- read ----------------------------------------------------------------------------
    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        upper_bound: int | None = None,
        min_one_batch: bool = True,
        aborted: bool = False,
    ) -> ReadResult:
        """Whole batches from ``fetch_offset`` below ``upper_bound`` (default: the HW).

        A fetch inside a batch returns that whole batch. With ``min_one_batch`` the first
        batch is returned even when larger than ``max_bytes`` (KIP-74). With ``aborted``
        (READ_COMMITTED) the result lists the aborted transactions overlapping the data.
        """
        if fetch_offset < self._log_start or fetch_offset > self._leo:
            raise OffsetOutOfRange(self._log_start, self._leo, fetch_offset)
        upper = self._hw if upper_bound is None else min(upper_bound, self._leo)
        records: list[Buffer] = []
        end = fetch_offset
        if fetch_offset < upper:
            found = self._read_from(fetch_offset, max_bytes, upper, min_one_batch)
            if found is not None:
                data, end = found
                records.append(data)
                if end < 0:
                    end = upper  # unknown: a superset is harmless to consumers
        txns = None
        if aborted:
            txns = self.aborted_transactions(fetch_offset, end) if end > fetch_offset else []
        return ReadResult(records, self._hw, self._log_start, self._leo, txns)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound)`` (Kafka's
        collectAbortedTransactions): from the segment holding ``fetch_offset`` on, until an
        entry's last stable offset shows that nothing later can overlap. Segments without
        entries cost an attribute read, so logs without aborts pay nearly nothing."""
        out: list[AbortedTxn] = []
        segments = self._segments
        for i in range(max(bisect.bisect_right(self._bases, fetch_offset) - 1, 0), len(segments)):
            index = segments[i].txn_index
            if index.count == 0:
                continue
            found, complete = index.collect(fetch_offset, upper_bound)
            out.extend(found)
            if complete:
                break
        return out

    def _read_from(
        self, offset: int, max_bytes: int, upper: int, min_one_batch: bool
    ) -> tuple[Buffer, int] | None:
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        while i < len(self._segments):
            seg = self._segments[i]
            header = seg.translate_offset(offset)
            if header is None:
                i += 1  # offset falls after this segment's last batch (or in a gap)
                continue
            if header.base_offset >= upper:
                return None
            next_base = self._bases[i + 1] if i + 1 < len(self._bases) else None
            if upper >= self._leo or (next_base is not None and next_base <= upper):
                max_pos = seg.size
            else:
                limit = seg.translate_offset(upper, header.position)
                max_pos = seg.size if limit is None else limit.position
            if header.position >= max_pos:
                return None
            budget = max(max_bytes, header.size) if min_one_batch else max_bytes
            want = min(max_pos - header.position, budget)
            if want < header.size and not min_one_batch:
                return None
            data = seg.read(header.position, want)
            return _whole_batches(data, seg, header.position)
        return None

    # -- producer state ------------------------------------------------------------------
    def load_producer_state(self, psm: ProducerStateManager) -> int:
        """Attach ``psm`` and bring it up to the log end; returns how many batches it replayed.

        The newest usable snapshot is loaded (written per segment roll and at clean shutdown),
        then the batches after it are replayed, headers only (control batches are tiny and
        parsed). If recovery found segments whose .txnindex may lag the log (past the
        recovery point after an unclean shutdown, or a repaired index), the replay starts at
        or below the first of them and rewrites their entries from the markers it meets.
        """
        self.producer_state = psm
        return self._reload_producer_state(psm, rebuild_txn_index=True)

    def _reload_producer_state(self, psm: ProducerStateManager, *, rebuild_txn_index: bool) -> int:
        start = psm.truncate_and_reload(self._log_start, self._leo)
        stale = self._txn_index_stale_from if rebuild_txn_index else None
        if stale is not None and stale < start:
            start = psm.reload_at_or_below(stale, self._log_start)
        if rebuild_txn_index and start < self._leo:
            for seg in self._segments:
                seg.txn_index.truncate_to(start)
        replayed = self._replay(psm, start, rebuild_txn_index)
        psm.update_map_end_offset(self._leo)
        if rebuild_txn_index:
            self._txn_index_stale_from = None
        psm.on_high_watermark_updated(self._hw)
        if replayed:
            log.info("%s: producer state rebuilt from %d batches", self.name, replayed)
        return replayed

    def _replay(self, psm: ProducerStateManager, offset: int, with_txn_index: bool) -> int:
        end = self._leo
        replayed = 0
        while offset < end:
            result = self.read(offset, _REPLAY_CHUNK, upper_bound=end)
            progressed = False
            for buf in result.records:
                for batch in scan_batches(buf, verify_crc=False, allow_partial_tail=True):
                    if batch.last_offset < offset:
                        continue
                    done = psm.replay_batch(batch)
                    if with_txn_index and done is not None and done.is_aborted:
                        seg = self._segments[bisect.bisect_right(self._bases, done.last_offset) - 1]
                        seg.txn_index.append(_aborted(done))
                    offset = batch.last_offset + 1
                    replayed += 1
                    progressed = True
            if not progressed:
                break
        return replayed

    # -- timestamps and epochs -----------------------------------------------------------
    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record with timestamp >= ``ts_ms``."""
        for seg in self._segments:
            if seg.largest_timestamp < ts_ms:
                continue
            found = seg.find_offset_by_timestamp(ts_ms, self._log_start)
            if found is not None:
                ts, off, epoch = found
                return off, ts, epoch if epoch >= 0 else -1
        return None

    def max_timestamp_offset(self) -> tuple[int, int, int] | None:
        """(offset, timestamp, epoch) of the record with the largest timestamp (ListOffsets -3)."""
        best: LogSegment | None = None
        for seg in self._segments:
            if (
                best is None
                or seg.max_timestamp_so_far.timestamp > best.max_timestamp_so_far.timestamp
            ):
                best = seg
        if best is None:
            return None
        found = best.offset_of_max_timestamp()
        if found is None:
            return None
        ts, off, epoch = found
        return off, ts, epoch if epoch >= 0 else -1

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset), (-1, -1) when unknown."""
        return self.epoch_cache.end_offset_for(epoch, self._leo)

    # -- truncation and start offset -----------------------------------------------------
    def truncate_to(self, offset: int) -> bool:
        """Drop everything at or after ``offset`` (a follower diverged). True if data went."""
        if offset < 0:
            raise ValueError(f"cannot truncate {self.name} to negative offset {offset}")
        if offset >= self._leo:
            self.epoch_cache.truncate_from_end(self._leo)
            return False
        self.drain_writes()
        if self._segments[0].base_offset > offset:
            self.truncate_fully_and_start_at(offset)
            return True
        now = self._clock.now_ms()
        while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
            self._segments.pop().delete()
            self._bases.pop()
        active = self._segments[-1]
        active.truncate_to(offset, now)
        active.resize_indexes(self._config.segment_index_bytes)
        self._leo = max(active.read_next_offset(), active.base_offset)
        self.epoch_cache.truncate_from_end(self._leo)
        self._log_start = min(self._log_start, self._leo)
        self._hw = min(self._hw, self._leo)
        self._recovery_point = min(self._recovery_point, self._leo)
        self._unflushed = 0
        self._generation += 1
        if self._roll_flush_offset is not None and self._roll_flush_offset > self._leo:
            self._roll_flush_offset = None
        psm = self.producer_state
        if psm is not None:
            # Kafka's truncateAndReload: the newest snapshot at or below the new end, then the
            # batches after it. The .txnindex entries below the cut are still right.
            self._reload_producer_state(psm, rebuild_txn_index=False)
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete all data; the log restarts empty at ``offset``."""
        self.drain_writes()
        now = self._clock.now_ms()
        for seg in self._segments:
            seg.delete()
        self._segments = [self._make_segment(offset, now)]
        self._bases = [offset]
        self.epoch_cache.clear()
        self._log_start = self._leo = self._hw = self._recovery_point = offset
        self._unflushed = 0
        self._roll_flush_offset = None
        self._txn_index_stale_from = None
        self._generation += 1
        if self.producer_state is not None:
            self.producer_state.truncate_fully_and_start_at(offset)

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start up to ``offset`` (-1 = the HW); new log start."""
        if offset == -1:
            offset = self._hw
        if offset < 0 or offset > self._hw:
            raise OffsetOutOfRange(self._log_start, self._hw, offset)
        self._increment_log_start(offset)
        self._delete_while(self._before_log_start, self._clock.now_ms())
        return self._log_start

    def _increment_log_start(self, offset: int) -> None:
        if offset > self._hw:
            raise OffsetOutOfRange(self._log_start, self._hw, offset)
        if offset > self._log_start:
            self._log_start = offset
            self._want_background()  # the log start checkpoint is due
            self.epoch_cache.truncate_from_start(offset)
            if self.producer_state is not None:
                self.producer_state.on_log_start_offset_incremented(offset)
            log.info("%s: log start offset is now %d", self.name, offset)

    # -- retention -----------------------------------------------------------------------
    def delete_old_segments(self, now_ms: int) -> int:
        """Retention: segments below the log start, then by size and age (cleanup.policy=delete).

        Never deletes data at or above the high watermark, nor the active segment's data
        (an all-deleted log rolls a fresh empty segment first, as Kafka does).
        """
        deleted = self._delete_while(self._before_log_start, now_ms)
        cfg = self._config
        if cfg.delete_enabled:
            if cfg.retention_bytes >= 0 and self.size_bytes >= cfg.retention_bytes:
                excess = [self.size_bytes - cfg.retention_bytes]

                def over_size(seg: LogSegment, _nxt: LogSegment | None) -> bool:
                    if excess[0] - seg.size >= 0:
                        excess[0] -= seg.size
                        return True
                    return False

                deleted += self._delete_while(over_size, now_ms)
            if cfg.retention_ms >= 0:

                def too_old(seg: LogSegment, _nxt: LogSegment | None) -> bool:
                    return now_ms - seg.largest_timestamp > cfg.retention_ms

                deleted += self._delete_while(too_old, now_ms)
        self.purge_deleted_files(now_ms)
        return deleted

    def _before_log_start(self, _seg: LogSegment, nxt: LogSegment | None) -> bool:
        return nxt is not None and nxt.base_offset <= self._log_start

    def _delete_while(
        self, predicate: Callable[[LogSegment, LogSegment | None], bool], now_ms: int
    ) -> int:
        deletable: list[LogSegment] = []
        for i, seg in enumerate(self._segments):
            nxt = self._segments[i + 1] if i + 1 < len(self._segments) else None
            upper = nxt.base_offset if nxt is not None else self._leo
            if nxt is None and seg.size == 0:
                break
            if self._hw >= upper and predicate(seg, nxt):
                deletable.append(seg)
            else:
                break
        if not deletable:
            return 0
        count = len(deletable)
        if count == len(self._segments):
            new_seg = self.roll(now_ms=now_ms)
            if deletable[-1] is new_seg:
                deletable.pop()
        if deletable:
            idx = self._segments.index(deletable[-1])
            self._increment_log_start(self._segments[idx + 1].base_offset)
            pending = _PendingDelete(now_ms + self._config.file_delete_delay_ms)
            for seg in deletable:
                pending.paths.extend(seg.mark_deleted())
            del self._segments[: len(deletable)]
            del self._bases[: len(deletable)]
            self._pending_deletes.append(pending)
            self._want_background()
            log.info(
                "%s: deleted %d segment(s); log start offset %d",
                self.name,
                len(deletable),
                self._log_start,
            )
        return count

    def purge_deleted_files(self, now_ms: int, *, force: bool = False) -> None:
        """Remove ``*.deleted`` files whose file.delete.delay.ms has passed."""
        keep = []
        for pending in self._pending_deletes:
            if force or pending.due_ms <= now_ms:
                for path in pending.paths:
                    path.unlink(missing_ok=True)
            else:
                keep.append(pending)
        self._pending_deletes = keep

    # -- compaction ----------------------------------------------------------------------
    def replace_segments(self, old: Sequence[LogSegment], sizes: Sequence[int]) -> bool:
        """Swap the cleaner's ``<base>.*.cleaned`` files in for ``old`` (adjacent closed
        segments, the first one's base offset naming the new segment); see ``segment_swap``.

        Runs on the loop in one go, so readers never see a half-swapped log. Returns False,
        and removes the staged files, when the log changed since the cleaner read ``old``
        (a segment deleted, truncated or become active, or the log closed).
        """
        base = old[0].base_offset if old else -1
        i = next((k for k, seg in enumerate(self._segments) if seg is old[0]), -1) if old else -1
        n = len(old)
        if (
            self._closed
            or i < 0
            or i + n >= len(self._segments)
            or any(a is not b for a, b in zip(self._segments[i : i + n], old, strict=True))
            or any(seg.size != size for seg, size in zip(old, sizes, strict=True))
        ):
            remove_staged(self.dir, base, CLEANED_SUFFIX)
            return False
        now = self._clock.now_ms()
        rename_suffix(self.dir, base, CLEANED_SUFFIX, SWAP_SUFFIX)
        fsync_dir(self.dir)
        pending = _PendingDelete(now + self._config.file_delete_delay_ms)
        for seg in old:
            pending.paths.extend(seg.mark_deleted())
        rename_suffix(self.dir, base, SWAP_SUFFIX, "")
        fsync_dir(self.dir)
        self._segments[i : i + n] = [self._make_segment(base, now)]
        self._bases[i : i + n] = [base]
        self._pending_deletes.append(pending)
        self._want_background()
        return True

    # -- lifecycle -----------------------------------------------------------------------
    def close(self) -> None:
        """Clean shutdown: flush everything, trim the indexes, close the files."""
        if self._closed:
            return
        self.drain_writes()
        self.flush()
        self.epoch_cache.flush()
        for seg in self._segments:
            seg.close()
        self.purge_deleted_files(0, force=True)
        self._closed = True

    def delete(self) -> None:
        """Remove the whole partition directory (no flush)."""
        self.drain_writes()
        for seg in self._segments:
            seg.close_handles()
        self._pending_deletes.clear()
        self._closed = True
        shutil.rmtree(self.dir, ignore_errors=True)

    def close_handles(self) -> None:
        """Close files without flushing (before the manager renames the directory)."""
        self.drain_writes()
        for seg in self._segments:
            seg.close_handles()
        self._closed = True

    def move_to(self, copy: Path) -> None:
        """Go on in ``copy``, a complete and durable copy of this partition's directory in
        another log dir (AlterReplicaLogDirs): segments and the epoch checkpoint are reopened
        there; offsets, high watermark and producer state carry over, and this object stays the
        one every holder uses. In one go on the loop, so no append or read sees it half-moved.
        Raises (changing nothing) when ``copy`` does not hold this log; the old directory is
        the caller's to remove."""
        self.drain_writes()
        fresh = PartitionLog.open(
            copy,
            self.topic,
            self.partition,
            self._topic_id,
            self._config,
            self._clock,
            clean_shutdown=True,
            log_start_offset=self._log_start,
            high_watermark=self._hw,
            writer=self._writer,
        )
        same = (
            fresh._bases == self._bases
            and fresh._leo == self._leo
            and fresh.epoch_cache.entries() == self.epoch_cache.entries()
        )
        if self._closed or not same:
            fresh.close_handles()
            raise ValueError(f"{copy} is not a copy of {self!r} ({fresh!r})")
        for seg in self._segments:
            seg.close_handles()
        self.dir = fresh.dir
        self._segments = fresh._segments
        for seg in self._segments:
            seg.adopt(self)  # completions of later writes come to this object
        self.epoch_cache = fresh.epoch_cache
        self._pending_deletes = []  # files in the old directory, which goes as a whole
        self._recovery_point = self._leo  # the copy was fsynced
        self._unflushed = 0
        self._roll_flush_offset = None
        self._generation += 1  # a background flush planned in the old directory is void
        if self.producer_state is not None:
            self.producer_state.partition_dir = self.dir


def _whole_batches(data: bytes, seg: LogSegment, start: int) -> tuple[Buffer, int] | None:
    """Cut a read at the last whole batch; walks headers only from the nearest index entry.

    Also returns an exclusive upper bound of the offsets returned (the last batch's last
    offset + 1, or the next batch's base offset), -1 if unknown.
    """
    n = len(data)
    pos = 0
    floor = seg.index.floor_position(start + n)
    if floor is not None and floor > start:
        pos = floor - start
    last = -1
    while pos + LOG_OVERHEAD <= n:
        nxt = pos + LOG_OVERHEAD + _LEN.unpack_from(data, pos + 8)[0]
        if nxt > n:
            break
        last = pos
        pos = nxt
    if pos == 0:
        return None
    if last >= 0:
        end = _I64.unpack_from(data, last)[0] + _LEN.unpack_from(data, last + _LAST_DELTA_AT)[0] + 1
    else:
        # Cut at the indexed batch without walking one: that batch's base offset bounds it.
        head = data[pos : pos + 8] if pos + 8 <= n else seg.read(start + pos, 8)
        end = _I64.unpack_from(head)[0] if len(head) == 8 else -1
    return (data if pos == n else memoryview(data)[:pos]), end


def _aborted(txn: CompletedTxn) -> AbortedTxn:
    return AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset)


def _fill_crcs(data: Buffer, positions: list[int]) -> bytearray:
    out = bytearray(data)
    for pos in positions:
        size = LOG_OVERHEAD + _LEN.unpack_from(out, pos + 8)[0]
        _U32.pack_into(
            out, pos + CRC_OFFSET, crc32c(memoryview(out)[pos + ATTRIBUTES_OFFSET : pos + size])
        )
    return out
