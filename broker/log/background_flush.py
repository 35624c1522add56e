"""Flushes that run off the event loop: a rolled segment's flush, the periodic recovery
checkpoint (fsync to the log end, then a producer snapshot there), and the directories of new
partitions (``sync_new_dirs``: creating thousands of partitions does not wait for the disk).

Three steps, so the loop never waits for the disk:

1. ``PartitionLog.plan_flush`` (on the loop) captures the offset to make durable, writes the
   index entries still in memory, lists the files to fsync and, for a checkpoint, encodes the
   producer state as of that offset;
2. ``FlushPlan.run`` (a worker thread) waits for the log writer to have written everything
   below the planned offset (``barrier``: appends are written by another thread), opens each file in turn, fsyncs and closes it (a plan
   holds no descriptor while it waits: thousands of logs rolling at once must not use up the
   node's), and writes the snapshot to a temporary file, fsynced. A file gone meanwhile (a
   deleted or swapped segment) fails the plan: nothing is claimed durable that was not fsynced;
   new leader-epoch entries go to a temporary file too;
3. ``PartitionLog.complete_flush`` (on the loop) moves the recovery point and renames the
   snapshot and the epoch file into place, unless the log was truncated or closed since step 1: a snapshot of
   a history the log no longer has must never be found by a restart.
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from .checkpoint import PARTITION_METADATA, fsync_dir, write_epoch_checkpoint

log = logging.getLogger(__name__)


@dataclass
class FlushPlan:
    """What one log's background flush does; see the module docstring."""

    name: str
    up_to: int  # the recovery point once done
    generation: int  # the log's truncation count at planning
    paths: list[Path] = field(default_factory=list)  # files to fsync
    snapshot: bytes | None = None  # encoded producer state as of ``up_to``
    snapshot_tmp: Path | None = None
    epochs: list[tuple[int, int]] | None = None  # leader-epoch-checkpoint entries to write
    epochs_tmp: Path | None = None
    # Waits until the log writer has put every byte below ``up_to`` in the files (None:
    # nothing was pending at planning): a flush never claims bytes still in memory.
    barrier: Callable[[], None] | None = None
    ok: bool = False

    def run(self) -> None:
        """The worker thread's part: fsync, write the snapshot's temporary file."""
        try:
            if self.barrier is not None:
                self.barrier()
            for path in self.paths:
                fsync_dir(path)
            if self.snapshot is not None and self.snapshot_tmp is not None:
                _write_synced(self.snapshot_tmp, self.snapshot)
            if self.epochs is not None and self.epochs_tmp is not None:
                write_epoch_checkpoint(self.epochs_tmp, self.epochs, rename=False)
            self.ok = True
        except FileNotFoundError as exc:
            log.info("%s: background flush to %d not done: %s", self.name, self.up_to, exc)
        except OSError:
            log.exception("%s: background flush to %d failed", self.name, self.up_to)

    def discard(self) -> None:
        """The log changed under the plan: drop what it wrote."""
        if self.snapshot_tmp is not None:
            self.snapshot_tmp.unlink(missing_ok=True)
        if self.epochs_tmp is not None:
            self.epochs_tmp.unlink(missing_ok=True)


# From this many new directories on, one syncfs per file system replaces their fsyncs: on
# ext4 every directory fsync is a journal commit that the loop's file creations queue behind.
SYNCFS_FROM = 64


def _syncfs() -> Callable[[int], int] | None:
    try:
        fn = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return cast("Callable[[int], int]", fn)


_SYNCFS = _syncfs()


def _sync_file_systems(parents: set[Path]) -> bool:
    """syncfs once per file system holding ``parents``; False if that is not possible."""
    if _SYNCFS is None:
        return False
    done: set[int] = set()
    for parent in parents:
        try:
            fd = os.open(parent, os.O_RDONLY)
        except OSError:
            return False
        try:
            dev = os.fstat(fd).st_dev
            if dev not in done:
                if _SYNCFS(fd) != 0:
                    return False
                done.add(dev)
        finally:
            os.close(fd)
    return True


def sync_new_dirs(dirs: list[Path]) -> None:
    """fsync new partition directories: their partition.metadata, their entries (the segment
    files created with them) and their parents' entries for them. A directory deleted since
    is skipped. Many at once: one syncfs per file system instead."""
    if len(dirs) >= SYNCFS_FROM and _sync_file_systems({d.parent for d in dirs}):
        return
    parents: set[Path] = set()
    for d in dirs:
        for path in (d / PARTITION_METADATA, d):
            try:
                fsync_dir(path)
            except FileNotFoundError:
                continue
            except OSError:
                log.exception("could not fsync %s", path)
        parents.add(d.parent)
    for parent in parents:
        try:
            fsync_dir(parent)
        except OSError:
            log.exception("could not fsync %s", parent)


def _write_synced(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
