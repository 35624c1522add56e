"""The state every part of ``PartitionLog`` shares: the segment list, the offsets (log start,
log end, high watermark, recovery point), the writer's completions, and the read-only
properties. The mixins in this package add behaviour on top of it.
"""

from __future__ import annotations

import asyncio
import logging
import random
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from ..checkpoint import PARTITION_METADATA, write_partition_metadata
from ..clock import Clock
from ..config import LONG_MAX, LogConfig
from ..epoch_cache import LeaderEpochCache
from ..log_writer import INLINE, LogWriter, WriteJob
from ..producer_state import ProducerStateManager
from ..segment import LogSegment

Buffer = bytes | bytearray | memoryview

# The package's name: log configuration that names the partition log applies to all its parts.
log = logging.getLogger("broker.log.partition_log")


@dataclass
class PendingDelete:
    """Files renamed ``.deleted``, unlinked once ``due_ms`` (file.delete.delay.ms) has passed."""

    due_ms: int
    paths: list[Path] = field(default_factory=list)


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class PartitionLogState:
    """What a ``PartitionLog`` holds; use ``PartitionLog.open``, which builds one from disk."""

    # Typed with Self so that LogManager's hook, which takes a ``PartitionLog``, fits.
    on_background_work: Callable[[Self], None] | None
    on_recovery_point_lowered: Callable[[Self], None] | None

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
        self._pending_deletes: list[PendingDelete] = []
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
        self.on_background_work = None
        # LogManager's hook, called when a truncation moved the recovery point back: the
        # recovery-point file must not go on vouching for what is no longer there.
        self.on_recovery_point_lowered = None
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

    def _recovery_point_moved_back(self: Self) -> None:
        hook = self.on_recovery_point_lowered
        if hook is not None:
            hook(self)

    def _want_background(self: Self) -> None:
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
