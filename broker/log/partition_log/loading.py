"""Opening a partition's log from disk: a new log's first files, or the existing segments
loaded, leftovers of a crash or a cleaner swap cleared, and the unflushed tail recovered
(validated batch by batch, indexes rebuilt, a torn tail truncated).
"""

from __future__ import annotations

import os
from typing import Final

from ..checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    RECOVERY_POINT_CHECKPOINT,
    CheckpointError,
    create_partition_metadata,
    read_partition_metadata,
    write_partition_metadata,
)
from ..epoch_cache import LeaderEpochCache
from ..errors import CorruptIndexError
from ..segment import DELETED_SUFFIX, INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX
from ..segment_swap import SWAP_SUFFIX, complete_swaps
from .state import PartitionLogState, log

_LEFTOVER_SUFFIXES: Final = (DELETED_SUFFIX, ".cleaned", ".swap", ".tmp")


class LoadingMixin(PartitionLogState):
    """Builds the log from its directory (``PartitionLog.open`` calls one of these)."""

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
        try:
            stored_id = read_partition_metadata(meta_path)
        except CheckpointError as exc:
            # Torn: the topic id is known from the metadata log (or written again below).
            log.warning("%s: %s; ignoring it", self.name, exc)
            stored_id = None
        if self._topic_id is None:
            self._topic_id = stored_id
        elif stored_id is None:
            write_partition_metadata(meta_path, self._topic_id, sync=sync_files)
        elif stored_id != self._topic_id:
            raise ValueError(
                f"{self.dir}: partition.metadata has topic id {stored_id}, "
                f"expected {self._topic_id}"
            )
        # One listing of the directory serves every question below (a restart of thousands
        # of partitions paid for six listings each). A committed cleaner swap is finished
        # first; every other leftover goes.
        names = os.listdir(self.dir)
        swapped: list[int] = []
        if any(n.endswith(LOG_SUFFIX + SWAP_SUFFIX) for n in names):
            swapped = complete_swaps(self.dir)
            names = os.listdir(self.dir)
        kept = []
        for name in names:
            if name.endswith(_LEFTOVER_SUFFIXES):
                (self.dir / name).unlink(missing_ok=True)
            else:
                kept.append(name)
        bases = sorted(
            int(n[: -len(LOG_SUFFIX)])
            for n in kept
            if n.endswith(LOG_SUFFIX) and n[: -len(LOG_SUFFIX)].isdigit()
        )
        known = set(bases)
        for name in kept:
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                stem = name[: -len(suffix)]
                if name.endswith(suffix) and stem.isdigit() and int(stem) not in known:
                    (self.dir / name).unlink()  # orphan index: its log is gone
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
        if recovery_point > self._segments[-1].read_next_offset():
            recovery_point, clean_shutdown = self._distrust_recovery_point(recovery_point)
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
        self.epoch_cache.hold_recovery_point(max(recovery_point, self._recovery_point))
        hw = self._leo if high_watermark is None else high_watermark
        self._hw = min(max(hw, self._log_start), self._leo)

    def _distrust_recovery_point(self, recovery_point: int) -> tuple[int, bool]:
        """The recovery point says more is durable than the segments hold: a checkpoint file
        from another state of the log (a crash right after a truncation, files restored
        from elsewhere, a lost write). Nothing it vouches for is trusted: every segment is
        validated, its indexes rebuilt, and the producer state and .txnindex entries rebuilt
        from the log start. Returns the recovery point and clean flag to go on with."""
        log.warning(
            "%s: recovery point %d in %s is past the log end %d; recovering every segment",
            self.name,
            recovery_point,
            self.dir.parent / RECOVERY_POINT_CHECKPOINT,
            self._segments[-1].read_next_offset(),
        )
        first = self._segments[0].base_offset
        self._recover(first, False)
        self._mark_txn_index_stale(first)
        return first, False

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
