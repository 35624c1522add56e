"""Moving a partition's log to another of ``log.dirs`` while it keeps serving (JBOD,
AlterReplicaLogDirs).

Kafka creates a future replica, ``<topic>-<partition>.<id>-future``, in the target dir, fills it
from the current log with a fetcher thread, and swaps the two once it has caught up. Both live in
this process here, so the future replica is a copy of the files:

1. Copy passes, off the loop: closed segments (immutable), a batch per pass, are copied with
   their indexes by a worker thread, through descriptors opened on the loop (a segment that
   retention deletes meanwhile stays readable). Before a pass a large active segment is rolled
   so that its bytes are copied off the loop too. Passes repeat until what is left to copy is
   small; a segment deleted, cleaned or truncated after its copy is dropped or copied again.
2. The swap, on the loop in one go (no append, read, roll or retention runs meanwhile): copy
   what is left (the active segment, segments rolled, cleaned or truncated since their copy),
   the epoch checkpoint, partition.metadata and producer snapshots; fsync; rename the future
   dir to ``<topic>-<partition>``; the live log reopens its files there (``PartitionLog.move_to``,
   the same object, so every holder keeps writing to it); the old dir is renamed
   ``-delete`` and removed.

Every record acknowledged before the swap is in the copy (step 2 copies up to the log end);
every later one goes to the new dir. Produce is never paused longer than step 2.

Crash safety: a copy is marked complete (``MOVE_MARKER``) before its rename, so a crash between
the rename and the old dir's removal leaves two dirs of which the marked one wins at start-up
(they hold the same records: nothing is appended between the two renames). A ``-future`` dir
found at start-up is a move the stop interrupted: it is started again from scratch.
A failed move (the target dir full or gone) leaves the partition where it was and is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import threading
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Protocol

from .checkpoint import (
    LEADER_EPOCH_CHECKPOINT,
    PARTITION_METADATA,
    fsync_dir,
    write_epoch_checkpoint,
    write_partition_metadata,
)
from .partition_log import PartitionLog, partition_dir_name
from .producer_snapshot import list_snapshots
from .segment import LogSegment

FUTURE_DIR_SUFFIX: Final = "-future"
MOVE_MARKER: Final = ".kmirror-move-complete"
ROLL_AT_BYTES: Final = 1 << 20  # a bigger active segment is rolled before a copy pass
FINAL_COPY_BYTES: Final = 4 << 20  # copied on the loop at the swap, at most (normally)
MAX_PASSES: Final = 32
# Segments copied per pass: bounds the descriptors held open and how stale a pass gets.
BATCH_SEGMENTS: Final = 16
BATCH_BYTES: Final = 256 << 20
_CHUNK: Final = 1 << 20
_TAIL: Final = 512  # bytes of a segment's end compared to tell a rewritten segment

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


def future_dir_name(topic: str, partition: int, unique: str) -> str:
    return f"{partition_dir_name(topic, partition)}.{unique}{FUTURE_DIR_SUFFIX}"


class MoveStopped(Exception):
    """The move was cancelled, superseded, or its log went away."""


class SourceChanged(OSError):
    """A segment got shorter while being copied (truncated)."""


@dataclass(frozen=True, slots=True)
class _FileCopy:
    """One file as the worker copies it: its first ``length`` bytes, from ``fd``."""

    name: str
    fd: int
    length: int


@dataclass(frozen=True, slots=True)
class _Copied:
    """A closed segment already in the future dir, as it was when copied."""

    segment: LogSegment
    size: int
    tail: bytes
    files: tuple[str, ...]


@dataclass(slots=True)
class Move:
    """One partition on its way to ``target``; ``future`` is its future replica's directory."""

    topic: str
    partition: int
    target: Path
    future: Path
    stop: threading.Event = field(default_factory=threading.Event)
    copied: dict[int, _Copied] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None

    def progress(self, plog: PartitionLog) -> tuple[int, int]:
        """(bytes in the future replica, its log end offset): the copied segments from the
        log start on."""
        size = sum(c.size for c in self.copied.values())
        end = plog.log_start_offset
        segs = plog.segments
        for i, seg in enumerate(segs[:-1]):
            c = self.copied.get(seg.base_offset)
            if c is None or c.segment is not seg:
                break
            end = segs[i + 1].base_offset
        return size, end


class HostedLogs(Protocol):
    """What a `ReplicaMover` needs from the owner of the logs it moves (the `LogManager`)."""

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's log while it is hosted here."""

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        """The log dir the partition's log is in now."""

    def relocated(self, topic: str, partition: int, log_dir: Path) -> None:
        """A move switched the partition's log to ``log_dir``."""


class ReplicaMover:
    """The moves in progress of one LogManager's partitions."""

    def __init__(self, logs: HostedLogs) -> None:
        self._logs = logs
        self._moves: dict[TopicPartition, Move] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False
        self._cleanups: set[asyncio.Future[None]] = set()

    # -- queries ---------------------------------------------------------------------------
    def get(self, topic: str, partition: int) -> Move | None:
        return self._moves.get((topic, partition))

    def moves(self) -> list[Move]:
        return list(self._moves.values())

    # -- control (on the loop) -------------------------------------------------------------
    def start(self, topic: str, partition: int, target: Path) -> None:
        """Move the partition's log to ``target`` (one of the log dirs), replacing a move to
        another dir; nothing to do when it is there or on its way there already."""
        tp = (topic, partition)
        current = self._moves.get(tp)
        if current is not None:
            if current.target == target:
                return
            self.cancel(topic, partition)
        plog = self._logs.get(topic, partition)
        if self._closed or plog is None or self._logs.log_dir_of(topic, partition) == target:
            return
        future = target / future_dir_name(topic, partition, uuid.uuid4().hex)
        move = Move(topic, partition, target, future)
        self._moves[tp] = move
        move.task = asyncio.get_running_loop().create_task(self._run(move, plog))

    def cancel(self, topic: str, partition: int) -> None:
        """Stop a move; its task removes the future replica."""
        move = self._moves.pop((topic, partition), None)
        if move is not None:
            move.stop.set()

    def close(self) -> None:
        """Stop every move (their ``-future`` dirs stay: the next start resumes them)."""
        self._closed = True
        for move in self._moves.values():
            move.stop.set()
        self._moves.clear()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    # -- the move --------------------------------------------------------------------------
    async def _run(self, move: Move, plog: PartitionLog) -> None:
        try:
            move.future.mkdir()
            await self._copy_passes(move, plog)
            self._swap(move, plog)
        except MoveStopped:
            log.info("move of %s to %s stopped", plog.name, move.target)
        except Exception as exc:  # OSError (target full, gone), or a bug: the log stays put
            log.error(
                "moving %s to %s failed, it stays in %s: %s",
                plog.name,
                move.target,
                plog.dir.parent,
                exc,
                exc_info=not isinstance(exc, OSError),
            )
        finally:
            if self._moves.get((move.topic, move.partition)) is move:
                del self._moves[(move.topic, move.partition)]
            if not self._closed and move.future.exists():
                await self._remove_later(move.future)

    async def _copy_passes(self, move: Move, plog: PartitionLog) -> None:
        """Copy closed segments, a batch per pass, until little is left (or passes run out:
        every pass copies at least one segment, so the backlog needs one pass per segment
        at most, and MAX_PASSES more chase what arrives meanwhile)."""
        loop = asyncio.get_running_loop()
        for _ in range(MAX_PASSES + len(plog.segments)):
            self._check(move, plog)
            if plog.active_segment.size >= ROLL_AT_BYTES:
                plog.roll()  # its bytes become a closed segment, copied off the loop
            segs = plog.segments
            self._forget_changed(move, segs)
            todo = [s for s in segs[:-1] if s.base_offset not in move.copied]
            if sum(s.size for s in todo) + segs[-1].size <= FINAL_COPY_BYTES:
                return
            opened = [(s, _open_segment(s), _tail(s, s.size)) for s in _batch(todo)]
            files = [f for _, fs, _ in opened for f in fs]
            try:
                await loop.run_in_executor(self._worker(), _copy_all, files, move.future, move.stop)
            except SourceChanged:  # truncated meanwhile: the next pass sees it changed
                for f in files:
                    (move.future / f.name).unlink(missing_ok=True)
                continue
            finally:
                _close_all(files)
            for s, fs, tail in opened:
                move.copied[s.base_offset] = _Copied(
                    s, fs[0].length, tail, tuple(f.name for f in fs)
                )

    def _swap(self, move: Move, plog: PartitionLog) -> None:
        """Finish the copy and switch the log to it; synchronous, on the loop."""
        self._check(move, plog)
        segs = plog.segments
        self._forget_changed(move, segs)
        for seg in segs:
            if seg.base_offset in move.copied:
                continue
            files = _open_segment(seg)
            try:
                _copy_all(files, move.future, move.stop)
            finally:
                _close_all(files)
        for name in _copy_side_files(plog, move.future):
            fsync_dir(move.future / name)
        (move.future / MOVE_MARKER).touch()
        fsync_dir(move.future)
        final = move.target / plog.name
        if final.exists():
            raise OSError(f"{final} exists already")
        os.rename(move.future, final)
        fsync_dir(move.target)
        old_dir = plog.dir
        try:
            plog.move_to(final)
        except BaseException:
            doomed = move.target / f"{plog.name}.{uuid.uuid4().hex}-delete"
            os.rename(final, doomed)
            shutil.rmtree(doomed, ignore_errors=True)
            raise
        self._logs.relocated(move.topic, move.partition, move.target)
        doomed = old_dir.parent / f"{plog.name}.{uuid.uuid4().hex}-delete"
        os.rename(old_dir, doomed)
        fsync_dir(old_dir.parent)
        (final / MOVE_MARKER).unlink(missing_ok=True)
        log.info(
            "moved %s from %s to %s (log end offset %d)",
            plog.name,
            old_dir.parent,
            move.target,
            plog.log_end_offset,
        )
        task = asyncio.ensure_future(self._remove_later(doomed))
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)

    def _check(self, move: Move, plog: PartitionLog) -> None:
        if (
            move.stop.is_set()
            or self._closed
            or self._logs.get(move.topic, move.partition) is not plog
        ):
            raise MoveStopped()

    def _forget_changed(self, move: Move, segs: list[LogSegment]) -> None:
        """Drop copies of segments deleted, cleaned, truncated or made active since."""
        closed = {s.base_offset: s for s in segs[:-1]}
        for base, c in list(move.copied.items()):
            seg = closed.get(base)
            if seg is not c.segment or seg.size != c.size or _tail(seg, seg.size) != c.tail:
                del move.copied[base]
                for name in c.files:
                    (move.future / name).unlink(missing_ok=True)

    def _worker(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="kmirror-log-mover")
        return self._executor

    async def _remove_later(self, path: Path) -> None:
        if self._closed:
            return  # the next start removes it
        # RuntimeError: the worker was shut down; the next start removes it
        with contextlib.suppress(RuntimeError):
            await asyncio.get_running_loop().run_in_executor(
                self._worker(), lambda: shutil.rmtree(path, ignore_errors=True)
            )


# -- file copying (the worker thread, or the loop at the swap) --------------------------------


def _batch(todo: list[LogSegment]) -> list[LogSegment]:
    """The first segments of ``todo`` up to the batch limits, at least one."""
    out: list[LogSegment] = []
    size = 0
    for seg in todo[:BATCH_SEGMENTS]:
        if out and size + seg.size > BATCH_BYTES:
            break
        out.append(seg)
        size += seg.size
    return out


def _open_segment(seg: LogSegment) -> list[_FileCopy]:
    """Descriptors of a segment's files, the log first; opened on the loop."""
    seg.drain()  # a just-sealed segment may still have writes queued
    files = [_FileCopy(seg.log_path.name, os.dup(seg.fd), seg.size)]
    try:
        # Index entries only: an active segment's preallocated tail would read as entries
        # (the copy is opened as after a clean shutdown, whose indexes are trimmed).
        for index in (seg.index, seg.time_index):
            index.materialize()  # a new segment's is created when first needed
            index.write_pending()  # an active segment's newest entries are in memory only
            fd = os.open(index.path, os.O_RDONLY)
            files.append(_FileCopy(index.path.name, fd, index.size_in_bytes))
        txn = seg.txn_index.path
        try:
            fd = os.open(txn, os.O_RDONLY)
        except FileNotFoundError:
            pass
        else:
            files.append(_FileCopy(txn.name, fd, os.fstat(fd).st_size))
    except BaseException:
        _close_all(files)
        raise
    return files


def _close_all(files: Iterable[_FileCopy]) -> None:
    for f in files:
        os.close(f.fd)


def _copy_all(files: list[_FileCopy], into: Path, stop: threading.Event) -> None:
    for f in files:
        _copy_file(f, into / f.name, stop)


def _copy_file(f: _FileCopy, dest: Path, stop: threading.Event) -> None:
    out = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        pos = 0
        while pos < f.length:
            if stop.is_set():
                raise MoveStopped()
            chunk = os.pread(f.fd, min(_CHUNK, f.length - pos), pos)
            if not chunk:
                raise SourceChanged(f"{dest.name}: ends at byte {pos}, not {f.length}")
            view = memoryview(chunk)
            while view:
                n = os.pwrite(out, view, pos)
                view = view[n:]
                pos += n
        os.fsync(out)
    finally:
        os.close(out)


def _copy_side_files(plog: PartitionLog, into: Path) -> list[str]:
    """The epoch checkpoint (from memory), partition.metadata and producer snapshots."""
    names = [LEADER_EPOCH_CHECKPOINT]
    write_epoch_checkpoint(into / LEADER_EPOCH_CHECKPOINT, plog.epoch_cache.entries())
    if plog.topic_id is not None:
        write_partition_metadata(into / PARTITION_METADATA, plog.topic_id)
        names.append(PARTITION_METADATA)
    for path in list_snapshots(plog.dir).values():
        try:
            shutil.copyfile(path, into / path.name)
        except FileNotFoundError:
            continue
        names.append(path.name)
    return names


def _tail(seg: LogSegment, size: int) -> bytes:
    seg.drain()
    n = min(size, _TAIL)
    return os.pread(seg.fd, n, size - n) if n else b""
