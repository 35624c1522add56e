"""Leader epoch -> start offset map, persisted as ``leader-epoch-checkpoint``.

Semantics follow Kafka's LeaderEpochFileCache: entries are kept strictly increasing in both
epoch and start offset; a new entry evicts any later-or-equal entries that conflict with it.

A new entry is not written at once (Kafka stopped fsyncing it on the append path in
KAFKA-15046; we go one step further): it starts at or past the log end, so above the recovery
point, and recovery after a crash re-assigns the epochs of those batches from the segments
anyway. ``flush`` (when the log moves its recovery point, and at close) writes the file, with
fsync. A torn or unreadable file is rebuilt from the segments on load. Truncations write at
once: they are rare, and they remove entries that recovery would not remove by itself.

The premise fails after a truncation: the recovery-point file may still hold the recovery
point from before it, above the new entry, and a kill -9 then lets recovery trust the
batches below that stale point without reassigning their epochs (the new epoch would seem to
start where recovery resumed, and OffsetsForLeaderEpoch would answer a later end offset for
the previous epoch, hiding a follower's divergence). So an entry starting below the highest
recovery point the file may hold (``hold_recovery_point``) is written at once too: one write
per epoch change, only until the log grows past that point again.
"""

from __future__ import annotations

import bisect
import logging
import os
from pathlib import Path
from typing import Final

from .checkpoint import LEADER_EPOCH_CHECKPOINT, read_epoch_checkpoint, write_epoch_checkpoint

UNDEFINED_EPOCH: Final = -1
UNDEFINED_EPOCH_OFFSET: Final = -1

log = logging.getLogger(__name__)


class LeaderEpochCache:
    def __init__(self, partition_dir: Path, *, persist: bool = True, fresh: bool = False) -> None:
        self._path = partition_dir / LEADER_EPOCH_CHECKPOINT
        self._persist = persist
        # Parallel lists, both strictly increasing.
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        self._unsynced = False
        # the highest recovery point a recovery-point file may hold for this log (it only grows)
        self._held_recovery_point = 0
        if persist and not fresh:  # fresh: a new partition's directory, made just now
            for epoch, offset in read_epoch_checkpoint(self._path):
                self._assign(epoch, offset)

    # -- reads ---------------------------------------------------------------------------
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets, strict=True))

    @property
    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range holds ``offset`` (None before the first entry)."""
        i = bisect.bisect_right(self._offsets, offset) - 1
        return self._epochs[i] if i >= 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch answers; (-1, -1) when unknown."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._epochs[-1] == requested_epoch:
            # The current epoch is still being written: its end is the log end offset.
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            # Older than anything we know: the data is gone; point at the first known epoch.
            return requested_epoch, self._offsets[0]
        return self._epochs[higher - 1], self._offsets[higher]

    # -- writes --------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; persists when something changed."""
        changed = self._assign(epoch, start_offset)
        if changed:
            if start_offset < self._held_recovery_point:
                self._write()  # recovery would not reassign it (see the module docstring)
            else:
                self._unsynced = self._persist
        return changed

    def plan_write(self) -> tuple[list[tuple[int, int]], Path] | None:
        """For a background flush: the entries to write (if any are unwritten) and the
        temporary file the flush thread writes them to, fsynced (``FlushPlan.run``);
        ``install`` renames it into place on the loop afterwards."""
        if not self._unsynced or not self._path.parent.exists():
            return None
        return self.entries(), self._path.with_name(self._path.name + ".background.tmp")

    def install(self, entries: list[tuple[int, int]], tmp: Path) -> None:
        """Rename the file the flush thread wrote into place; the log was not truncated since
        ``plan_write`` (entries were only added, so the file holds a prefix of the cache,
        and what it lacks starts past the planned recovery point)."""
        try:
            os.replace(tmp, self._path)
        except OSError:
            log.exception("%s: could not install %s", self._path.parent.name, self._path.name)
            tmp.unlink(missing_ok=True)
            return
        if entries == self.entries():
            self._unsynced = False

    def hold_recovery_point(self, offset: int) -> None:
        """The log's recovery point moved to (or was loaded as) ``offset``: a recovery-point
        file may say so until it is rewritten, even after a truncation below it."""
        self._held_recovery_point = max(self._held_recovery_point, offset)

    def flush(self) -> None:
        """Write the entries assigned since the last write, durably."""
        if self._unsynced:
            self._write()

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._offsets[-1]:
            return False
        removed = []
        while self._epochs and (self._epochs[-1] >= epoch or self._offsets[-1] >= start_offset):
            removed.append((self._epochs.pop(), self._offsets.pop()))
        if len(removed) > 1 or (removed and removed[0][1] != start_offset):
            log.warning(
                "%s: epoch entry (%d, %d) truncated conflicting entries %s",
                self._path.parent.name,
                epoch,
                start_offset,
                removed,
            )
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset``."""
        if end_offset < 0 or not self._offsets or self._offsets[-1] < end_offset:
            return
        while self._offsets and self._offsets[-1] >= end_offset:
            self._epochs.pop()
            self._offsets.pop()
        self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly before ``start_offset``; the one covering it now starts there."""
        i = bisect.bisect_right(self._offsets, start_offset)
        if i == 0:
            return
        epoch = self._epochs[i - 1]
        if i == 1 and self._offsets[0] == start_offset:
            return
        del self._epochs[:i]
        del self._offsets[:i]
        self._epochs.insert(0, epoch)
        self._offsets.insert(0, start_offset)
        self._write()

    def clear(self) -> None:
        self._epochs.clear()
        self._offsets.clear()
        self._write()

    def _write(self) -> None:
        self._unsynced = False
        if self._persist and self._path.parent.exists():
            write_epoch_checkpoint(self._path, self.entries())
