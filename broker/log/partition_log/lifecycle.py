"""``PartitionLog``: the mixins of this package composed into one class, plus its lifecycle:
opening, clean close, deletion, and the move to another log dir.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from ..clock import Clock
from ..config import LogConfig
from ..log_writer import INLINE, LogWriter
from .append import AppendMixin
from .flush import FlushMixin
from .loading import LoadingMixin
from .producer_replay import ProducerReplayMixin
from .read import ReadMixin
from .retention import RetentionMixin
from .state import partition_dir_name
from .truncation import TruncationMixin


class PartitionLog(
    LoadingMixin,
    AppendMixin,
    TruncationMixin,
    ProducerReplayMixin,
    ReadMixin,
    RetentionMixin,
    FlushMixin,
):
    """One partition's log; use ``PartitionLog.open``, the constructor does not touch the disk.

    Each mixin subclasses the ones whose methods it calls; this list keeps every class
    before the classes it builds on.
    """

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
        self.epoch_cache.hold_recovery_point(self._leo)
        self._unflushed = 0
        self._roll_flush_offset = None
        self._generation += 1  # a background flush planned in the old directory is void
        if self.producer_state is not None:
            self.producer_state.partition_dir = self.dir
